// The verifier's type rules for contractions and linear algebra (families of op_table.h).
#include <algorithm>
#include <string>
#include <vector>

#include "ir/verify_op.h"

namespace cujax::ir::rules {
namespace {

void check_dot_general(OpCheck& c) {
  c.all_tensors();
  const Type& lhs = c.operand(0);
  const Type& rhs = c.operand(1);
  const Attribute& dn = c.struct_attr("dot_dimension_numbers", "stablehlo.dot");
  const Dims lb = c.field_ints(dn, "lhs_batching_dimensions");
  const Dims rb = c.field_ints(dn, "rhs_batching_dimensions");
  const Dims lc = c.field_ints(dn, "lhs_contracting_dimensions");
  const Dims rc = c.field_ints(dn, "rhs_contracting_dimensions");
  if (lb.size() != rb.size())
    c.fail("lhs_batching_dimensions = " + list_str(lb) +
           " and rhs_batching_dimensions = " + list_str(rb) + " differ in length");
  if (lc.size() != rc.size())
    c.fail("lhs_contracting_dimensions = " + list_str(lc) +
           " and rhs_contracting_dimensions = " + list_str(rc) + " differ in length");
  c.in_range("lhs_batching_dimensions", lb, 0, lhs.rank());
  c.in_range("lhs_contracting_dimensions", lc, 0, lhs.rank());
  c.in_range("rhs_batching_dimensions", rb, 0, rhs.rank());
  c.in_range("rhs_contracting_dimensions", rc, 0, rhs.rank());
  Dims l_all = lb, r_all = rb;
  l_all.insert(l_all.end(), lc.begin(), lc.end());
  r_all.insert(r_all.end(), rc.begin(), rc.end());
  c.unique("lhs batching and contracting dimensions", l_all);
  c.unique("rhs batching and contracting dimensions", r_all);
  auto size = [](const Type& t, int64_t d) { return t.shape[static_cast<size_t>(d)]; };
  for (size_t i = 0; i < lb.size(); ++i)
    if (size(lhs, lb[i]) != size(rhs, rb[i]))
      c.fail("batching dimension " + std::to_string(lb[i]) + " of lhs " + lhs.str() + " has size " +
             std::to_string(size(lhs, lb[i])) + " but dimension " + std::to_string(rb[i]) +
             " of rhs " + rhs.str() + " has size " + std::to_string(size(rhs, rb[i])));
  for (size_t i = 0; i < lc.size(); ++i)
    if (size(lhs, lc[i]) != size(rhs, rc[i]))
      c.fail("contracting dimension " + std::to_string(lc[i]) + " of lhs " + lhs.str() +
             " has size " + std::to_string(size(lhs, lc[i])) + " but dimension " +
             std::to_string(rc[i]) + " of rhs " + rhs.str() + " has size " +
             std::to_string(size(rhs, rc[i])));
  if (const Attribute* p = c.attr("precision_config");
      p && p->kind == Attribute::Kind::Array && !p->elements.empty() && p->elements.size() != 2)
    c.fail("precision_config has " + std::to_string(p->elements.size()) +
           " entries, expected 2 (lhs and rhs)");
  Shape s;
  for (int64_t d : lb) s.push_back(size(lhs, d));
  for (int64_t d = 0; d < lhs.rank(); ++d)
    if (std::find(l_all.begin(), l_all.end(), d) == l_all.end()) s.push_back(size(lhs, d));
  for (int64_t d = 0; d < rhs.rank(); ++d)
    if (std::find(r_all.begin(), r_all.end(), d) == r_all.end()) s.push_back(size(rhs, d));
  // The result element type may differ from the operands' (preferred_element_type).
  c.result_is(0, Type::tensor(s, c.result(0).dtype),
              "batch dimensions, then the free dimensions of lhs, then of rhs");
}

// Convolution dimension numbers, from #stablehlo.conv<raw ...> fields or the compact
// "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]" form.
struct ConvDims {
  int64_t in_batch = -1, in_feature = -1, k_in = -1, k_out = -1, out_batch = -1, out_feature = -1;
  Dims in_spatial, k_spatial, out_spatial;
};

bool parse_conv_list(std::string_view& s, char a, char b, int64_t& da, int64_t& db, Dims& spatial) {
  size_t p = s.find('[');
  if (p == std::string_view::npos) return false;
  s.remove_prefix(p + 1);
  std::vector<std::pair<int64_t, int64_t>> sp;  // (spatial index, dimension)
  int64_t dim = 0;
  while (!s.empty() && s.front() != ']') {
    const char ch = s.front();
    if (ch == ' ' || ch == ',') {
      s.remove_prefix(1);
      continue;
    }
    if (ch == a) {
      da = dim++;
      s.remove_prefix(1);
    } else if (ch == b) {
      db = dim++;
      s.remove_prefix(1);
    } else if (ch >= '0' && ch <= '9') {
      int64_t v = 0;
      while (!s.empty() && s.front() >= '0' && s.front() <= '9') {
        v = v * 10 + (s.front() - '0');
        s.remove_prefix(1);
      }
      sp.emplace_back(v, dim++);
    } else {
      return false;
    }
  }
  if (s.empty()) return false;
  s.remove_prefix(1);
  std::sort(sp.begin(), sp.end());
  spatial.clear();
  for (size_t i = 0; i < sp.size(); ++i) {
    if (sp[i].first != static_cast<int64_t>(i)) return false;
    spatial.push_back(sp[i].second);
  }
  return true;
}

ConvDims conv_dims(const OpCheck& c) {
  const Attribute& a = c.required("dimension_numbers");
  ConvDims d;
  if (a.kind == Attribute::Kind::Struct || a.kind == Attribute::Kind::Dictionary) {
    d.in_batch = c.field_int(a, "input_batch_dimension", std::nullopt);
    d.in_feature = c.field_int(a, "input_feature_dimension", std::nullopt);
    d.in_spatial = c.field_ints(a, "input_spatial_dimensions");
    d.k_in = c.field_int(a, "kernel_input_feature_dimension", std::nullopt);
    d.k_out = c.field_int(a, "kernel_output_feature_dimension", std::nullopt);
    d.k_spatial = c.field_ints(a, "kernel_spatial_dimensions");
    d.out_batch = c.field_int(a, "output_batch_dimension", std::nullopt);
    d.out_feature = c.field_int(a, "output_feature_dimension", std::nullopt);
    d.out_spatial = c.field_ints(a, "output_spatial_dimensions");
    return d;
  }
  if (a.kind == Attribute::Kind::Opaque) {
    std::string_view s = a.text;
    if (parse_conv_list(s, 'b', 'f', d.in_batch, d.in_feature, d.in_spatial) &&
        parse_conv_list(s, 'i', 'o', d.k_in, d.k_out, d.k_spatial) &&
        parse_conv_list(s, 'b', 'f', d.out_batch, d.out_feature, d.out_spatial) &&
        d.in_batch >= 0 && d.in_feature >= 0 && d.k_in >= 0 && d.k_out >= 0 && d.out_batch >= 0 &&
        d.out_feature >= 0)
      return d;
  }
  c.fail("attribute 'dimension_numbers' must be #stablehlo.conv<...>");
}

void check_convolution(OpCheck& c) {
  c.all_tensors();
  const Type& lhs = c.operand(0);
  const Type& rhs = c.operand(1);
  const Type& out = c.result(0);
  const int64_t n = lhs.rank();
  if (rhs.rank() != n)
    c.fail("operand 1 has type " + rhs.str() + ", expected the rank of operand 0, " + lhs.str());
  if (n < 2) c.fail("operand 0 has type " + lhs.str() + ", expected rank >= 2");
  if (out.rank() != n)
    c.fail("result 0 has type " + out.str() + ", expected rank " + std::to_string(n));
  const size_t ns = static_cast<size_t>(n - 2);
  const Dims ones(ns, 1);
  const Dims strides = c.ints_or("window_strides", ones);
  const Dims lhs_dil = c.ints_or("lhs_dilation", ones);
  const Dims rhs_dil = c.ints_or("rhs_dilation", ones);
  const std::string why = "one per spatial dimension";
  c.size_is("window_strides", strides, n - 2, why);
  c.size_is("lhs_dilation", lhs_dil, n - 2, why);
  c.size_is("rhs_dilation", rhs_dil, n - 2, why);
  c.all_positive("window_strides", strides);
  c.all_positive("lhs_dilation", lhs_dil);
  c.all_positive("rhs_dilation", rhs_dil);
  if (c.attr("window_reversal"))
    c.size_is("window_reversal", c.ints("window_reversal"), n - 2, why);
  const Dims pad = c.padding("padding", n - 2);
  const ConvDims d = conv_dims(c);
  const std::string spatial_why = "the rank of the operands minus 2";
  c.size_is("input_spatial_dimensions", d.in_spatial, n - 2, spatial_why);
  c.size_is("kernel_spatial_dimensions", d.k_spatial, n - 2, spatial_why);
  c.size_is("output_spatial_dimensions", d.out_spatial, n - 2, spatial_why);
  Dims in_all = {d.in_batch, d.in_feature}, k_all = {d.k_in, d.k_out},
       out_all = {d.out_batch, d.out_feature};
  in_all.insert(in_all.end(), d.in_spatial.begin(), d.in_spatial.end());
  k_all.insert(k_all.end(), d.k_spatial.begin(), d.k_spatial.end());
  out_all.insert(out_all.end(), d.out_spatial.begin(), d.out_spatial.end());
  c.in_range("input dimension numbers", in_all, 0, n);
  c.unique("input dimension numbers", in_all);
  c.in_range("kernel dimension numbers", k_all, 0, n);
  c.unique("kernel dimension numbers", k_all);
  c.in_range("output dimension numbers", out_all, 0, n);
  c.unique("output dimension numbers", out_all);
  const int64_t fgc = c.integer_or("feature_group_count", 1);
  const int64_t bgc = c.integer_or("batch_group_count", 1);
  if (fgc <= 0 || bgc <= 0 || (fgc != 1 && bgc != 1))
    c.fail("feature_group_count = " + std::to_string(fgc) + " and batch_group_count = " +
           std::to_string(bgc) + ": both must be positive and one of them 1");
  auto dim = [](const Type& t, int64_t i) { return t.shape[static_cast<size_t>(i)]; };
  const int64_t batch = dim(lhs, d.in_batch), features = dim(lhs, d.in_feature);
  const int64_t k_in = dim(rhs, d.k_in), k_out = dim(rhs, d.k_out);
  if (batch % bgc)
    c.fail("the lhs batch size " + std::to_string(batch) +
           " is not a multiple of batch_group_count = " + std::to_string(bgc));
  if (features % fgc)
    c.fail("the lhs feature size " + std::to_string(features) +
           " is not a multiple of feature_group_count = " + std::to_string(fgc));
  if (k_in != features / fgc)
    c.fail("kernel input feature dimension " + std::to_string(d.k_in) + " of " + rhs.str() +
           " has size " + std::to_string(k_in) + ", expected " + std::to_string(features / fgc) +
           " (lhs features " + std::to_string(features) + " / feature_group_count " +
           std::to_string(fgc) + ")");
  if (k_out % bgc || k_out % fgc)
    c.fail("kernel output feature size " + std::to_string(k_out) +
           " is not a multiple of the group counts");
  if (const Attribute* p = c.attr("precision_config");
      p && p->kind == Attribute::Kind::Array && !p->elements.empty() && p->elements.size() != 2)
    c.fail("precision_config has " + std::to_string(p->elements.size()) +
           " entries, expected 2 (lhs and rhs)");
  Shape s(static_cast<size_t>(n), 0);
  s[static_cast<size_t>(d.out_batch)] = batch / bgc;
  s[static_cast<size_t>(d.out_feature)] = k_out;
  for (size_t i = 0; i < ns; ++i)
    s[static_cast<size_t>(d.out_spatial[i])] =
        num_windows(dim(lhs, d.in_spatial[i]), lhs_dil[i], pad[2 * i], pad[2 * i + 1],
                    dim(rhs, d.k_spatial[i]), rhs_dil[i], strides[i]);
  // The result element type may differ from the operands' (preferred_element_type).
  c.result_is(0, Type::tensor(s, out.dtype), "the convolution's window count per dimension");
}

void check_triangular_solve(OpCheck& c) {
  c.all_tensors();
  const Type& a = c.operand(0);
  const Type& b = c.operand(1);
  c.operand_kind(0, Kinds::FloatOrComplex);
  if (a.rank() < 2) c.fail("operand 0 has type " + a.str() + ", expected rank >= 2");
  const int64_t r = a.rank();
  if (a.shape[r - 1] != a.shape[r - 2])
    c.fail("operand 0 has type " + a.str() + ", expected square matrices");
  if (b.rank() != r || b.dtype != a.dtype)
    c.fail("operand 1 has type " + b.str() + ", expected the rank and element type of operand 0, " +
           a.str());
  for (int64_t i = 0; i < r - 2; ++i)
    if (a.shape[i] != b.shape[i])
      c.fail("operand 1 has type " + b.str() + ", expected the batch dimensions of operand 0, " +
             a.str());
  const bool left = c.attr("left_side") && c.attr("left_side")->boolean;
  const int64_t k = left ? b.shape[r - 2] : b.shape[r - 1];
  if (k != a.shape[r - 1])
    c.fail("operand 1 has type " + b.str() + ", whose " + (left ? "rows" : "columns") +
           " do not match the order " + std::to_string(a.shape[r - 1]) + " of operand 0");
  c.enum_value("transpose_a", {"NO_TRANSPOSE", "TRANSPOSE", "ADJOINT", "TRANSPOSE_INVALID"}, false);
  c.result_is(0, b, "same as operand 1");
}

void check_cholesky(OpCheck& c) {
  c.all_tensors();
  const Type& a = c.operand(0);
  c.operand_kind(0, Kinds::FloatOrComplex);
  if (a.rank() < 2 || a.shape[a.rank() - 1] != a.shape[a.rank() - 2])
    c.fail("operand 0 has type " + a.str() + ", expected square matrices");
  c.result_is(0, a, "same as operand 0");
}

}  // namespace

void add_contraction_rules(Checkers& m) {
  m["stablehlo.dot_general"] = check_dot_general;
  m["stablehlo.convolution"] = check_convolution;
  m["stablehlo.triangular_solve"] = check_triangular_solve;
  m["stablehlo.cholesky"] = check_cholesky;
}

}  // namespace cujax::ir::rules
