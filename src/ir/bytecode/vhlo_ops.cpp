// The VHLO op table: facts from StableHLO's VhloOps.td, one row per op version.
#include "vhlo_ops.h"

#include <charconv>

namespace cujax::ir::bytecode {
namespace {

const std::vector<VhloOpInfo>& table() {
  static const std::vector<VhloOpInfo> ops = {
#include "vhlo_ops.inc"
  };
  return ops;
}

// "1.10.3" -> {1, 10, 3}; false when it is not three dotted numbers.
bool parse_version(std::string_view s, int out[3]) {
  for (int i = 0; i < 3; ++i) {
    const auto dot = i < 2 ? s.find('.') : s.size();
    if (dot == std::string_view::npos || dot == 0) return false;
    const auto part = s.substr(0, dot);
    const auto r = std::from_chars(part.data(), part.data() + part.size(), out[i]);
    if (r.ec != std::errc() || r.ptr != part.data() + part.size()) return false;
    s = i < 2 ? s.substr(dot + 1) : std::string_view();
  }
  return true;
}

}  // namespace

const VhloOpInfo* find_vhlo_op(std::string_view name) {
  for (const auto& op : table())
    if (name == op.name) return &op;
  return nullptr;
}

const char* newest_known_stablehlo_version() {
  return "1.20.0";  // StableHLO's Version::getCurrentVersion() at the commit vhlo_ops.inc is from
}

bool version_less(std::string_view a, std::string_view b) {
  int x[3], y[3];
  if (!parse_version(a, x) || !parse_version(b, y)) return false;
  for (int i = 0; i < 3; ++i)
    if (x[i] != y[i]) return x[i] < y[i];
  return false;
}

}  // namespace cujax::ir::bytecode
