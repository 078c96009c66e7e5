// Batching rules of convolution (JAX's _conv_general_dilated_batch_rule: the batch is merged
// into the lhs batch dimension, the rhs output features, or, with both batched, into feature
// groups) and select_and_scatter (the batch is one more window dimension of size 1).
#include "lax/util.h"
#include "trace/batching_rules.h"
#include "trace/vjp_rules.h"

namespace cujax::trace::batching {

using namespace cujax::lax;

namespace {

// JAX's _reshape_axis_into: merges axis src into dst (dst counted without src), src major.
Array axis_into(int64_t src, int64_t dst, const Array& x) {
  std::vector<int64_t> perm;
  Shape s;
  for (int64_t i = 0; i < x.ndim(); ++i)
    if (i != src) {
      perm.push_back(i);
      s.push_back(x.shape()[i]);
    }
  perm.insert(perm.begin() + dst, src);
  s[dst] *= x.shape()[src];
  return reshape(transpose(x, perm), s);
}

// JAX's _reshape_axis_out_of: splits axis src into (size1, rest).
Array axis_out_of(int64_t src, int64_t size1, const Array& x) {
  Shape s = x.shape();
  s[src] /= size1;
  s.insert(s.begin() + src, size1);
  return reshape(x, s);
}

}  // namespace

void register_window_rules(Rules& r) {
  r["stablehlo.convolution"] = [](const BatchArgs& a) {
    const ir::Attribute* dn = a.op.attr("dimension_numbers");
    const int64_t lb = vjp::struct_int(dn, "input_batch_dimension", 0);
    const int64_t lf = vjp::struct_int(dn, "input_feature_dimension", 1);
    const int64_t ko = vjp::struct_int(dn, "kernel_output_feature_dimension", 0);
    const int64_t ob = vjp::struct_int(dn, "output_batch_dimension", 0);
    const int64_t of = vjp::struct_int(dn, "output_feature_dimension", 1);
    const int64_t fgc = a.op.attr("feature_group_count") ? a.op.int_attr("feature_group_count") : 1;
    const int64_t bgc = a.op.attr("batch_group_count") ? a.op.int_attr("batch_group_count") : 1;
    if (bgc != 1) unsupported(a.op, "batch_group_count > 1");
    const Array &lhs = a.operands[0], &rhs = a.operands[1];
    Array l = lhs, k = rhs;
    int64_t groups = fgc, out_dim;
    if (a.bdims[0] && a.bdims[1]) {
      l = axis_into(*a.bdims[0], lf, lhs);
      k = axis_into(*a.bdims[1], ko, rhs);
      groups = fgc * a.size;
      out_dim = of;
    } else if (a.bdims[0]) {
      l = axis_into(*a.bdims[0], lb, lhs);
      out_dim = ob;
    } else {
      if (fgc != 1) unsupported(a.op, "a batched rhs and feature_group_count > 1");
      k = axis_into(*a.bdims[1], ko, rhs);
      out_dim = of;
    }
    Shape s = a.op.result(0)->type.shape;
    s[out_dim] *= a.size;
    const Array out = rebind(a.op, {l, k}, {ir::Type::tensor(s, a.op.result(0)->type.dtype)},
                             {{"feature_group_count", lax::detail::i64_attr(groups)}})[0];
    return std::vector<Batched>{{axis_out_of(out_dim, a.size, out), out_dim}};
  };

  // Operands: (operand, source, init_value).
  r["stablehlo.select_and_scatter"] = [](const BatchArgs& a) {
    if (a.bdims[2]) unsupported(a.op, "a batched init value");
    const size_t rank = a.op.operands[0]->type.shape.size();
    std::vector<int64_t> wd{1}, ws{1};
    for (int64_t d : a.op.ints("window_dimensions")) wd.push_back(d);
    for (int64_t d : vjp::ints_or(a.op, "window_strides", std::vector<int64_t>(rank, 1)))
      ws.push_back(d);
    const auto p = vjp::ints_or(a.op, "padding", std::vector<int64_t>(2 * rank, 0));
    HostTensor pads(DType::I64, {static_cast<int64_t>(rank + 1), 2});
    pads.data_as<int64_t>()[0] = pads.data_as<int64_t>()[1] = 0;
    for (size_t i = 0; i < 2 * rank; ++i) pads.data_as<int64_t>()[i + 2] = p[i];
    const std::vector<Array> ops{batch_at(a.operands[0], a.bdims[0], a.size),
                                 batch_at(a.operands[1], a.bdims[1], a.size), a.operands[2]};
    return at_front(rebind(a.op, ops, batched_types(a.op, a.size),
                           {{"window_dimensions", lax::detail::dense(wd)},
                            {"window_strides", lax::detail::dense(ws)},
                            {"padding", ir::Attribute::dense_elements(pads)}}));
  };
}

}  // namespace cujax::trace::batching
