// VJP rules of the windowed ops: convolution (JAX's _conv_general_dilated_transpose_lhs/rhs)
// and reduce_window with max or min (max pooling, cummax). The pooling rule is written with
// slices, comparisons and pads rather than select_and_scatter, so that it is differentiable
// again: each window offset takes its strided slice of the padded input, and the cotangent of a
// window goes to the first element (in window order) equal to the window's extreme, as
// select_and_scatter with `ge` does in JAX.
#include "trace/vjp_rules.h"

namespace cujax::trace::vjp {

using namespace cujax::lax;

namespace {

// A conv dimension spec string ("NC01") for a value of rank n whose first/second named
// dimensions (batch and feature, or output and input features) are at a and b.
std::string spec(size_t n, int64_t a, int64_t b, const std::vector<int64_t>& spatial,
                 const char* letters) {
  std::string s(n, '?');
  s[static_cast<size_t>(a)] = letters[0];
  s[static_cast<size_t>(b)] = letters[1];
  for (size_t k = 0; k < spatial.size(); ++k)
    s[static_cast<size_t>(spatial[k])] = static_cast<char>('0' + k);
  return s;
}

// JAX's _reshape_axis_out_of: splits axis src into (size1, rest).
Array axis_out_of(int64_t src, int64_t size1, const Array& x) {
  Shape s = x.shape();
  const int64_t size2 = s[src] / size1;
  s[src] = size2;
  s.insert(s.begin() + src, size1);
  return reshape(x, s);
}

// JAX's _reshape_axis_into: merges axis src into dst (dst counted without src), src major.
Array axis_into(int64_t src, int64_t dst, const Array& x) {
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < x.ndim(); ++i)
    if (i != src) perm.push_back(i);
  perm.insert(perm.begin() + dst, src);
  Shape s;
  for (int64_t i = 0; i < x.ndim(); ++i)
    if (i != src) s.push_back(x.shape()[i]);
  s[dst] *= x.shape()[src];
  return reshape(transpose(x, perm), s);
}

struct Conv {
  int64_t lb, lf, ko, ki, ob, of;
  std::vector<int64_t> ls, ks, os;
  std::vector<int64_t> strides, ldil, rdil;
  Padding pads;
  int64_t fgc, bgc;
};

Conv conv_of(const ir::Operation& op, size_t ns) {
  const ir::Attribute* dn = op.attr("dimension_numbers");
  Conv c;
  c.lb = struct_int(dn, "input_batch_dimension", 0);
  c.lf = struct_int(dn, "input_feature_dimension", 1);
  c.ko = struct_int(dn, "kernel_output_feature_dimension", 0);
  c.ki = struct_int(dn, "kernel_input_feature_dimension", 1);
  c.ob = struct_int(dn, "output_batch_dimension", 0);
  c.of = struct_int(dn, "output_feature_dimension", 1);
  c.ls = struct_ints(dn, "input_spatial_dimensions");
  c.ks = struct_ints(dn, "kernel_spatial_dimensions");
  c.os = struct_ints(dn, "output_spatial_dimensions");
  c.strides = ints_or(op, "window_strides", std::vector<int64_t>(ns, 1));
  c.ldil = ints_or(op, "lhs_dilation", std::vector<int64_t>(ns, 1));
  c.rdil = ints_or(op, "rhs_dilation", std::vector<int64_t>(ns, 1));
  const auto p = ints_or(op, "padding", std::vector<int64_t>(2 * ns, 0));
  for (size_t i = 0; i < ns; ++i) c.pads.push_back({p[2 * i], p[2 * i + 1]});
  c.fgc = op.attr("feature_group_count") ? op.int_attr("feature_group_count") : 1;
  c.bgc = op.attr("batch_group_count") ? op.int_attr("batch_group_count") : 1;
  return c;
}

Array conv_transpose_lhs(const Array& g, const Array& lhs, Array rhs, const Conv& c) {
  const size_t n = static_cast<size_t>(lhs.ndim()), ns = n - 2;
  if (c.fgc > 1) {
    rhs = axis_out_of(c.ko, c.fgc, rhs);
    rhs = axis_into(c.ko, c.ki, rhs);
  }
  ConvDimensionNumbers dn{spec(n, c.ob, c.of, c.os, "NC"), spec(n, c.ki, c.ko, c.ks, "OI"),
                          spec(n, c.lb, c.lf, c.ls, "NC")};
  Padding pads;
  for (size_t i = 0; i < ns; ++i) {
    const int64_t lhs_d = dilate(lhs.shape()[c.ls[i]], c.ldil[i]);
    const int64_t rhs_d = dilate(rhs.shape()[c.ks[i]], c.rdil[i]);
    const int64_t out_d = dilate(g.shape()[c.os[i]], c.strides[i]);
    const int64_t before = rhs_d - c.pads[i].first - 1;
    pads.push_back({before, lhs_d + rhs_d - 1 - out_d - before});
  }
  const Array out = conv_general_dilated(g, rev(rhs, c.ks), c.ldil, pads, c.strides, c.rdil, dn,
                                         c.fgc, 1, lhs.dtype());
  return out;
}

Array conv_transpose_rhs(const Array& g, const Array& lhs, const Array& rhs, const Conv& c) {
  const size_t n = static_cast<size_t>(lhs.ndim()), ns = n - 2;
  // The transposed specs: lhs's batch and feature swap roles, and so on.
  ConvDimensionNumbers dn{spec(n, c.lf, c.lb, c.ls, "NC"), spec(n, c.of, c.ob, c.os, "OI"),
                          spec(n, c.ki, c.ko, c.ks, "NC")};
  Padding pads;
  for (size_t i = 0; i < ns; ++i) {
    const int64_t lhs_d = dilate(lhs.shape()[c.ls[i]], c.ldil[i]);
    const int64_t rhs_d = dilate(rhs.shape()[c.ks[i]], c.rdil[i]);
    const int64_t out_d = dilate(g.shape()[c.os[i]], c.strides[i]);
    const int64_t lo = c.pads[i].first;
    pads.push_back({lo, (out_d - lhs_d) + (rhs_d - lo - 1)});
  }
  return conv_general_dilated(lhs, g, c.rdil, pads, c.ldil, c.strides, dn, 1, c.fgc, rhs.dtype());
}

}  // namespace

void register_window_rules(Rules& r) {
  r["stablehlo.convolution"] = [](const VjpArgs& a) -> Cts {
    const Array &lhs = a.operands[0], &rhs = a.operands[1];
    const size_t ns = static_cast<size_t>(lhs.ndim() - 2);
    const Conv c = conv_of(a.op, ns);
    if (c.bgc != 1)
      throw Error("grad of stablehlo.convolution with batch_group_count " + std::to_string(c.bgc) +
                  " is not supported yet");
    Array g = a.cts[0];
    if (g.dtype() != lhs.dtype()) g = convert_element_type(g, lhs.dtype());
    Cts out(2);
    if (a.needed[0]) out[0] = conv_transpose_lhs(g, lhs, rhs, c);
    if (a.needed[1]) out[1] = conv_transpose_rhs(g, lhs, rhs, c);
    return out;
  };

  // reduce_window with max or min (reduce_window add is in vjp_rules_reduce.cpp).
  const VjpRule add_rule = r.at("stablehlo.reduce_window");
  r["stablehlo.reduce_window"] = [add_rule](const VjpArgs& a) -> Cts {
    const std::string kind = body_kind(a.op);
    if (a.operands.size() != 2 || (kind != "stablehlo.maximum" && kind != "stablehlo.minimum"))
      return add_rule(a);
    const Array &x = a.operands[0], &init = a.operands[1], &y = a.results[0], &g = a.cts[0];
    const size_t n = static_cast<size_t>(x.ndim());
    const auto wdims = a.op.ints("window_dimensions");
    const auto strides = ints_or(a.op, "window_strides", std::vector<int64_t>(n, 1));
    const auto bdil = ints_or(a.op, "base_dilations", std::vector<int64_t>(n, 1));
    const auto wdil = ints_or(a.op, "window_dilations", std::vector<int64_t>(n, 1));
    const auto p = ints_or(a.op, "padding", std::vector<int64_t>(2 * n, 0));
    for (size_t i = 0; i < n; ++i)
      if (bdil[i] != 1 || p[2 * i] < 0 || p[2 * i + 1] < 0)
        throw Error("grad of stablehlo.reduce_window " + kind.substr(10) +
                    " with base dilation or negative padding is not supported yet");
    std::vector<PadConfig> cfg;
    for (size_t i = 0; i < n; ++i) cfg.push_back({p[2 * i], p[2 * i + 1], 0});
    const Array xp = pad(x, init, cfg);
    const Array zero = like(g, 0.0);
    Array taken = full(y.shape(), 0.0, DType::Bool);
    Array acc = like(xp, 0.0);
    // Window offsets in row-major order.
    std::vector<int64_t> off(n, 0);
    for (bool more = true; more;) {
      std::vector<int64_t> start, limit;
      std::vector<PadConfig> back;
      for (size_t i = 0; i < n; ++i) {
        start.push_back(off[i] * wdil[i]);
        limit.push_back(start[i] + dilate(y.shape()[i], strides[i]));
        back.push_back({start[i], xp.shape()[i] - limit[i], strides[i] - 1});
      }
      const Array hit = bitwise_and(eq(slice(xp, start, limit, strides), y), bitwise_not(taken));
      taken = bitwise_or(taken, hit);
      acc = add(acc, pad(select(hit, g, zero), full({}, 0.0, g.dtype()), back));
      more = false;
      for (size_t i = n; i-- > 0;) {
        if (++off[i] < wdims[i]) {
          more = true;
          break;
        }
        off[i] = 0;
      }
    }
    std::vector<int64_t> lo, hi;
    for (size_t i = 0; i < n; ++i) {
      lo.push_back(p[2 * i]);
      hi.push_back(p[2 * i] + x.shape()[i]);
    }
    return {slice(acc, lo, hi), std::nullopt};
  };
}

}  // namespace cujax::trace::vjp
