// `cujax bench ...`: benchmarks that print tables; never part of the tests.
#pragma once

#include <string>
#include <vector>

namespace cujax::cli {

int bench_dispatch();
int bench_train(const std::vector<std::string>& args);
int bench_scaling(const std::vector<std::string>& args);
// Built only with cpp-httplib, as `cujax serve`.
int bench_serve(const std::vector<std::string>& args);
// The interpreter that has Debian's python3-torch (CUJAX_PEER_PYTHON overrides).
std::string peer_python();

}  // namespace cujax::cli
