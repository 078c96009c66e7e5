// Source locations of IR ops for traces: an op's loc(...) (with the module's #locN aliases
// resolved) as "name @ file:line:col", the form the op spans of a trace show.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace cujax::profiler {

class LocationTable {
 public:
  // `aliases`: the module's alias definitions, verbatim ("#loc3 = loc(\"f.py\":3:0)").
  explicit LocationTable(const std::vector<std::string>& aliases);
  // "jit(f)/add @ f.py:3:0", "f.py:3:0" or "jit(f)/add"; empty when `loc` names neither a file
  // position nor a name (loc(unknown), no loc).
  std::string resolve(std::string_view loc) const;

 private:
  std::string expand(std::string_view text, int depth) const;
  std::unordered_map<std::string, std::string> aliases_;
};

}  // namespace cujax::profiler
