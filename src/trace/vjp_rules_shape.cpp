// VJP rules of the shape ops: reshape, broadcast_in_dim, transpose, reverse, slice, pad,
// concatenate, dynamic_slice and dynamic_update_slice.
#include <numeric>

#include "trace/vjp_rules.h"

namespace cujax::trace::vjp {

using namespace cujax::lax;

void register_shape_rules(Rules& r) {
  r["stablehlo.reshape"] = [](const VjpArgs& a) -> Cts {
    return {reshape(a.cts[0], a.operands[0].shape())};
  };
  r["stablehlo.broadcast_in_dim"] = [](const VjpArgs& a) -> Cts {
    return {unbroadcast(a.cts[0], a.operands[0].shape(), a.op.ints("broadcast_dimensions"))};
  };
  r["stablehlo.transpose"] = [](const VjpArgs& a) -> Cts {
    const auto perm = a.op.ints("permutation");
    std::vector<int64_t> inv(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
    return {transpose(a.cts[0], inv)};
  };
  r["stablehlo.reverse"] = [](const VjpArgs& a) -> Cts {
    return {rev(a.cts[0], a.op.ints("dimensions"))};
  };
  r["stablehlo.slice"] = [](const VjpArgs& a) -> Cts {
    const Array &x = a.operands[0], &g = a.cts[0];
    const auto start = a.op.ints("start_indices");
    const auto strides = ints_or(a.op, "strides", std::vector<int64_t>(x.ndim(), 1));
    std::vector<PadConfig> cfg;
    for (int64_t d = 0; d < x.ndim(); ++d) {
      const int64_t n = g.shape()[d];
      if (n == 0) return {like(x, 0.0)};
      const int64_t end = start[d] + (n - 1) * strides[d] + 1;
      cfg.push_back({start[d], x.shape()[d] - end, strides[d] - 1});
    }
    return {pad(g, full({}, 0.0, g.dtype()), cfg)};
  };
  r["stablehlo.pad"] = [](const VjpArgs& a) -> Cts {
    const Array &x = a.operands[0], &g = a.cts[0];
    const auto lo = a.op.ints("edge_padding_low");
    const auto hi = a.op.ints("edge_padding_high");
    const auto interior = a.op.ints("interior_padding");
    std::vector<PadConfig> unpad;
    for (size_t d = 0; d < lo.size(); ++d) unpad.push_back({-lo[d], -hi[d], 0});
    Cts out(2);
    const Array unpadded = pad(g, full({}, 0.0, g.dtype()), unpad);
    std::vector<int64_t> zeros_v(lo.size(), 0), steps;
    for (int64_t i : interior) steps.push_back(i + 1);
    const Array gx = slice(unpadded, zeros_v, unpadded.shape(), steps);
    if (a.needed[0]) out[0] = gx;
    if (a.needed[1]) {
      std::vector<int64_t> all_g(g.ndim()), all_x(x.ndim());
      std::iota(all_g.begin(), all_g.end(), 0);
      std::iota(all_x.begin(), all_x.end(), 0);
      out[1] = sub(reduce_sum(g, all_g), reduce_sum(gx, all_x));
    }
    return out;
  };
  r["stablehlo.concatenate"] = [](const VjpArgs& a) -> Cts {
    const int64_t dim = a.op.int_attr("dimension");
    const Array& g = a.cts[0];
    Cts out;
    int64_t offset = 0;
    for (size_t i = 0; i < a.operands.size(); ++i) {
      const Array& x = a.operands[i];
      std::vector<int64_t> start(g.ndim(), 0), limit = g.shape();
      start[dim] = offset;
      limit[dim] = offset + x.shape()[dim];
      offset += x.shape()[dim];
      out.push_back(a.needed[i] ? std::optional<Array>(slice(g, start, limit)) : std::nullopt);
    }
    return out;
  };
  r["stablehlo.dynamic_slice"] = [](const VjpArgs& a) -> Cts {
    const Array& x = a.operands[0];
    std::vector<Array> starts(a.operands.begin() + 1, a.operands.end());
    return {dynamic_update_slice(like(x, 0.0), a.cts[0], starts)};
  };
  r["stablehlo.dynamic_update_slice"] = [](const VjpArgs& a) -> Cts {
    const Array &u = a.operands[1], &g = a.cts[0];
    std::vector<Array> starts(a.operands.begin() + 2, a.operands.end());
    Cts out(a.operands.size());
    if (a.needed[0]) out[0] = dynamic_update_slice(g, like(u, 0.0), starts);
    if (a.needed[1]) out[1] = dynamic_slice(g, starts, u.shape());
    return out;
  };
}

}  // namespace cujax::trace::vjp
