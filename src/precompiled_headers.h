// The standard headers most of the library's and the command's files include, parsed once per
// target when CUJAX_PRECOMPILE_HEADERS is on (CMakeLists.txt): together they expand to more
// lines than a typical file of ours does with all its includes (82k against a median of 71k,
// 2026-12-07, docs/performance.md). Only standard headers: cujax's own would put names into
// files that do not include them (backends/common has its own `scalar`).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>
