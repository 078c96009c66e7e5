// Contractions: dot_general, dot and convolutions.
#include <algorithm>

#include "lax/util.h"

namespace cujax::lax {

using namespace detail;

namespace {

void check_dims(const std::string& op, const char* what, const std::vector<int64_t>& dims,
                const Array& a) {
  std::vector<bool> seen(static_cast<size_t>(a.ndim()), false);
  for (int64_t d : dims) {
    if (d < 0 || d >= a.ndim() || seen[d])
      fail(op, std::string(what) + " " + list_str(dims) + " must be distinct dimensions of " +
                   type_str(a));
    seen[d] = true;
  }
}

}  // namespace

Array dot_general(const Array& lhs, const Array& rhs, const DotDimensionNumbers& dims,
                  std::optional<DType> preferred_element_type) {
  const std::string op = "dot_general";
  check_valid(op, lhs);
  check_valid(op, rhs);
  if (lhs.dtype() != rhs.dtype())
    fail(op, "operands must have the same dtype, got " + type_str(lhs) + " and " + type_str(rhs));
  const auto& lc = dims.lhs_contracting_dimensions;
  const auto& rc = dims.rhs_contracting_dimensions;
  const auto& lb = dims.lhs_batch_dimensions;
  const auto& rb = dims.rhs_batch_dimensions;
  check_dims(op, "lhs_contracting_dimensions", lc, lhs);
  check_dims(op, "rhs_contracting_dimensions", rc, rhs);
  check_dims(op, "lhs_batch_dimensions", lb, lhs);
  check_dims(op, "rhs_batch_dimensions", rb, rhs);
  if (lc.size() != rc.size() || lb.size() != rb.size())
    fail(op, "lhs and rhs need as many contracting dimensions (" + list_str(lc) + " and " +
                 list_str(rc) + ") and batch dimensions (" + list_str(lb) + " and " + list_str(rb) +
                 ")");
  for (int64_t d : lb)
    if (contains(lc, d))
      fail(op,
           "lhs dimension " + std::to_string(d) + " is both a batch and a contracting dimension");
  for (int64_t d : rb)
    if (contains(rc, d))
      fail(op,
           "rhs dimension " + std::to_string(d) + " is both a batch and a contracting dimension");
  for (size_t i = 0; i < lb.size(); ++i)
    if (lhs.shape()[lb[i]] != rhs.shape()[rb[i]])
      fail(op, "batch dimensions " + list_str(lb) + " and " + list_str(rb) +
                   " have different sizes in " + type_str(lhs) + " and " + type_str(rhs));
  for (size_t i = 0; i < lc.size(); ++i)
    if (lhs.shape()[lc[i]] != rhs.shape()[rc[i]])
      fail(op, "contracting dimensions " + list_str(lc) + " and " + list_str(rc) +
                   " have different sizes in " + type_str(lhs) + " and " + type_str(rhs));
  Shape shape;
  for (int64_t d : lb) shape.push_back(lhs.shape()[d]);
  for (int64_t d = 0; d < lhs.ndim(); ++d)
    if (!contains(lb, d) && !contains(lc, d)) shape.push_back(lhs.shape()[d]);
  for (int64_t d = 0; d < rhs.ndim(); ++d)
    if (!contains(rb, d) && !contains(rc, d)) shape.push_back(rhs.shape()[d]);
  std::vector<ir::NamedAttribute> fields;
  auto field = [&](const char* name, const std::vector<int64_t>& v) {
    if (!v.empty()) fields.push_back({name, ir::Attribute::int_list(v)});
  };
  field("lhs_batching_dimensions", lb);
  field("rhs_batching_dimensions", rb);
  field("lhs_contracting_dimensions", lc);
  field("rhs_contracting_dimensions", rc);
  const DType out = preferred_element_type.value_or(lhs.dtype());
  return trace::bind1(
      spec("stablehlo.dot_general", shape, out,
           {{"dot_dimension_numbers", ir::Attribute::struct_attr("stablehlo.dot", fields)}}),
      {lhs, rhs});
}

Array dot(const Array& lhs, const Array& rhs, std::optional<DType> preferred_element_type) {
  check_valid("dot", lhs);
  check_valid("dot", rhs);
  if (lhs.ndim() < 1 || lhs.ndim() > 2 || rhs.ndim() < 1 || rhs.ndim() > 2)
    fail("dot",
         "operands must be vectors or matrices, got " + type_str(lhs) + " and " + type_str(rhs));
  if (lhs.shape().back() != rhs.shape()[0])
    fail("dot", "incompatible shapes " + type_str(lhs) + " and " + type_str(rhs));
  DotDimensionNumbers d;
  d.lhs_contracting_dimensions = {lhs.ndim() - 1};
  d.rhs_contracting_dimensions = {0};
  return dot_general(lhs, rhs, d, preferred_element_type);
}

Padding padtype_to_pads(const std::vector<int64_t>& in_shape,
                        const std::vector<int64_t>& window_shape,
                        const std::vector<int64_t>& window_strides, const std::string& padding) {
  if (in_shape.size() != window_shape.size() || in_shape.size() != window_strides.size())
    fail("padtype_to_pads", "in_shape " + list_str(in_shape) + ", window_shape " +
                                list_str(window_shape) + " and window_strides " +
                                list_str(window_strides) + " must have the same length");
  Padding pads;
  if (padding == "VALID") return Padding(in_shape.size(), {0, 0});
  if (padding != "SAME" && padding != "SAME_LOWER")
    fail("padtype_to_pads", "unknown padding '" + padding + "' (use SAME, SAME_LOWER or VALID)");
  for (size_t i = 0; i < in_shape.size(); ++i) {
    if (window_strides[i] < 1) fail("padtype_to_pads", "strides must be positive");
    const int64_t out = (in_shape[i] + window_strides[i] - 1) / window_strides[i];
    const int64_t total =
        std::max<int64_t>((out - 1) * window_strides[i] + window_shape[i] - in_shape[i], 0);
    if (padding == "SAME")
      pads.push_back({total / 2, total - total / 2});
    else
      pads.push_back({total - total / 2, total / 2});
  }
  return pads;
}

Array conv_general_dilated(const Array& lhs, const Array& rhs,
                           const std::vector<int64_t>& window_strides, const Padding& padding,
                           const std::vector<int64_t>& lhs_dilation,
                           const std::vector<int64_t>& rhs_dilation,
                           const ConvDimensionNumbers& dimension_numbers,
                           int64_t feature_group_count, int64_t batch_group_count,
                           std::optional<DType> preferred_element_type) {
  const std::string op = "conv_general_dilated";
  check_valid(op, lhs);
  check_valid(op, rhs);
  if (lhs.dtype() != rhs.dtype())
    fail(op, "operands must have the same dtype, got " + type_str(lhs) + " and " + type_str(rhs));
  const int64_t n = lhs.ndim();
  if (n < 2 || rhs.ndim() != n)
    fail(op, "lhs and rhs must have the same rank >= 2, got " + type_str(lhs) + " and " +
                 type_str(rhs));
  const size_t ns = static_cast<size_t>(n - 2);
  // Default specs: NC01..., OI01..., NC01...
  auto default_spec = [&](char a, char b) {
    std::string s{a, b};
    for (size_t i = 0; i < ns; ++i) s += static_cast<char>('0' + i);
    return s;
  };
  const std::string ls =
      dimension_numbers.lhs_spec.empty() ? default_spec('N', 'C') : dimension_numbers.lhs_spec;
  const std::string rs =
      dimension_numbers.rhs_spec.empty() ? default_spec('O', 'I') : dimension_numbers.rhs_spec;
  const std::string os = dimension_numbers.out_spec.empty() ? ls : dimension_numbers.out_spec;
  if (static_cast<int64_t>(ls.size()) != n || static_cast<int64_t>(rs.size()) != n ||
      static_cast<int64_t>(os.size()) != n)
    fail(op, "dimension specs " + ls + ", " + rs + ", " + os + " must have " + std::to_string(n) +
                 " letters for operands " + type_str(lhs) + " and " + type_str(rhs));
  auto index_of = [&](const std::string& s, char c, const char* which) -> int64_t {
    const auto p = s.find(c);
    if (p == std::string::npos || s.find(c, p + 1) != std::string::npos)
      fail(op, std::string(which) + " spec " + s + " must name '" + c + "' exactly once");
    return static_cast<int64_t>(p);
  };
  const int64_t in_b = index_of(ls, 'N', "lhs"), in_f = index_of(ls, 'C', "lhs");
  const int64_t k_o = index_of(rs, 'O', "rhs"), k_i = index_of(rs, 'I', "rhs");
  const int64_t out_b = index_of(os, 'N', "out"), out_f = index_of(os, 'C', "out");
  // Spatial dimensions in the rhs spec's order.
  std::vector<int64_t> in_sp, k_sp, out_sp;
  for (int64_t i = 0; i < n; ++i) {
    const char c = rs[i];
    if (c == 'O' || c == 'I') continue;
    k_sp.push_back(i);
    in_sp.push_back(index_of(ls, c, "lhs"));
    out_sp.push_back(index_of(os, c, "out"));
  }
  auto or_ones = [&](const std::vector<int64_t>& v, const char* what) {
    if (v.empty()) return std::vector<int64_t>(ns, 1);
    if (v.size() != ns)
      fail(op, std::string(what) + " " + list_str(v) + " needs one entry per spatial dimension");
    for (int64_t x : v)
      if (x < 1) fail(op, std::string(what) + " " + list_str(v) + " must be positive");
    return v;
  };
  const auto strides = or_ones(window_strides, "window_strides");
  const auto ldil = or_ones(lhs_dilation, "lhs_dilation");
  const auto rdil = or_ones(rhs_dilation, "rhs_dilation");
  const Padding pads = padding.empty() ? Padding(ns, {0, 0}) : padding;
  if (pads.size() != ns) fail(op, "padding needs one (low, high) pair per spatial dimension");
  if (feature_group_count < 1 || batch_group_count < 1)
    fail(op, "feature_group_count and batch_group_count must be positive");
  if (feature_group_count > 1 && batch_group_count > 1)
    fail(op, "feature_group_count and batch_group_count cannot both be above 1");
  const int64_t batch = lhs.shape()[in_b], in_features = lhs.shape()[in_f];
  const int64_t k_in = rhs.shape()[k_i], k_out = rhs.shape()[k_o];
  if (in_features != k_in * feature_group_count)
    fail(op, "lhs feature dimension (" + std::to_string(in_features) +
                 ") must equal the rhs input feature dimension (" + std::to_string(k_in) +
                 ") times feature_group_count (" + std::to_string(feature_group_count) + "), got " +
                 type_str(lhs) + " and " + type_str(rhs));
  if (k_out % feature_group_count != 0 || k_out % batch_group_count != 0)
    fail(op, "the rhs output feature dimension (" + std::to_string(k_out) +
                 ") must be a multiple of the group counts");
  if (batch % batch_group_count != 0)
    fail(op, "the lhs batch dimension must be a multiple of batch_group_count");
  Shape shape(static_cast<size_t>(n), 0);
  shape[out_b] = batch / batch_group_count;
  shape[out_f] = k_out;
  for (size_t i = 0; i < ns; ++i) {
    const int64_t in = lhs.shape()[in_sp[i]], k = rhs.shape()[k_sp[i]];
    const int64_t din = in == 0 ? 0 : (in - 1) * ldil[i] + 1;
    const int64_t padded = din + pads[i].first + pads[i].second;
    const int64_t dk = k == 0 ? 0 : (k - 1) * rdil[i] + 1;
    shape[out_sp[i]] = padded < dk ? 0 : (padded - dk) / strides[i] + 1;
  }
  auto I = [](int64_t v) { return ir::Attribute::integer_attr(v, std::nullopt); };
  std::vector<ir::NamedAttribute> attrs;
  auto all_one = [](const std::vector<int64_t>& v) {
    return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 1; });
  };
  if (!all_one(strides)) attrs.push_back({"window_strides", dense(strides)});
  bool padded = false;
  HostTensor pad_t(DType::I64, {static_cast<int64_t>(ns), 2});
  for (size_t i = 0; i < ns; ++i) {
    pad_t.data_as<int64_t>()[2 * i] = pads[i].first;
    pad_t.data_as<int64_t>()[2 * i + 1] = pads[i].second;
    padded = padded || pads[i].first != 0 || pads[i].second != 0;
  }
  if (padded) attrs.push_back({"padding", ir::Attribute::dense_elements(pad_t)});
  if (!all_one(ldil)) attrs.push_back({"lhs_dilation", dense(ldil)});
  if (!all_one(rdil)) attrs.push_back({"rhs_dilation", dense(rdil)});
  attrs.push_back(
      {"dimension_numbers",
       ir::Attribute::struct_attr(
           "stablehlo.conv", {{"input_batch_dimension", I(in_b)},
                              {"input_feature_dimension", I(in_f)},
                              {"input_spatial_dimensions", ir::Attribute::int_list(in_sp)},
                              {"kernel_input_feature_dimension", I(k_i)},
                              {"kernel_output_feature_dimension", I(k_o)},
                              {"kernel_spatial_dimensions", ir::Attribute::int_list(k_sp)},
                              {"output_batch_dimension", I(out_b)},
                              {"output_feature_dimension", I(out_f)},
                              {"output_spatial_dimensions", ir::Attribute::int_list(out_sp)}})});
  attrs.push_back({"feature_group_count", i64_attr(feature_group_count)});
  attrs.push_back({"batch_group_count", i64_attr(batch_group_count)});
  return trace::bind1(
      spec("stablehlo.convolution", shape, preferred_element_type.value_or(lhs.dtype()), attrs),
      {lhs, rhs});
}

Array conv_transpose(const Array& lhs, const Array& rhs, const std::vector<int64_t>& strides,
                     const std::variant<std::string, Padding>& padding,
                     const std::vector<int64_t>& rhs_dilation,
                     const ConvDimensionNumbers& dimension_numbers, bool transpose_kernel,
                     std::optional<DType> preferred_element_type) {
  const std::string op = "conv_transpose";
  check_valid(op, lhs);
  check_valid(op, rhs);
  const int64_t n = lhs.ndim();
  if (n < 3 || n > 5 || rhs.ndim() != n)
    fail(op, "lhs and rhs must have the same rank, 3 to 5, got " + type_str(lhs) + " and " +
                 type_str(rhs));
  const size_t ns = static_cast<size_t>(n - 2);
  ConvDimensionNumbers dn = dimension_numbers;
  const bool none = dn.lhs_spec.empty() && dn.rhs_spec.empty() && dn.out_spec.empty();
  if (none) {
    static const char* spatial[] = {"H", "HW", "HWD"};  // JAX's defaults, channels last
    dn = {std::string("N") + spatial[ns - 1] + "C", std::string(spatial[ns - 1]) + "IO",
          std::string("N") + spatial[ns - 1] + "C"};
  } else if (dn.lhs_spec.empty() || dn.rhs_spec.empty() || dn.out_spec.empty()) {
    fail(op, "give all three dimension specs or none");
  }
  const std::string& rs = dn.rhs_spec;
  if (static_cast<int64_t>(rs.size()) != n)
    fail(op, "rhs spec " + rs + " must have " + std::to_string(n) + " letters");
  const auto o_at = rs.find('O'), i_at = rs.find('I');
  if (o_at == std::string::npos || i_at == std::string::npos)
    fail(op, "rhs spec " + rs + " must name 'O' and 'I'");
  // Spatial dimensions in the rhs spec's order, as conv_general_dilated takes them.
  std::vector<int64_t> k_sp;
  for (int64_t i = 0; i < n; ++i)
    if (rs[i] != 'O' && rs[i] != 'I') k_sp.push_back(i);
  if (strides.size() != ns)
    fail(op, "strides " + list_str(strides) + " needs one entry per spatial dimension");
  for (int64_t s : strides)
    if (s < 1) fail(op, "strides " + list_str(strides) + " must be positive");
  const std::vector<int64_t> rdil =
      rhs_dilation.empty() ? std::vector<int64_t>(ns, 1) : rhs_dilation;
  if (rdil.size() != ns)
    fail(op, "rhs_dilation " + list_str(rhs_dilation) + " needs one entry per spatial dimension");
  Padding pads;
  if (const auto* s = std::get_if<std::string>(&padding)) {
    if (*s != "SAME" && *s != "VALID")
      fail(op, "padding must be SAME, VALID or (low, high) pairs, got '" + *s + "'");
    for (size_t i = 0; i < ns; ++i) {
      // The dilated kernel's extent k: SAME gives input * stride outputs, VALID the full
      // extent of every window touching the input.
      const int64_t k = (rhs.shape()[k_sp[i]] - 1) * rdil[i] + 1, st = strides[i];
      int64_t total, low;
      if (*s == "SAME") {
        total = k + st - 2;
        low = st > k - 1 ? k - 1 : (total + 1) / 2;
      } else {
        total = k + st - 2 + std::max<int64_t>(k - st, 0);
        low = k - 1;
      }
      pads.emplace_back(low, total - low);
    }
  } else {
    pads = std::get<Padding>(padding);
  }
  Array kernel = rhs;
  if (transpose_kernel) {
    kernel = rev(kernel, k_sp);
    std::vector<int64_t> perm(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) perm[i] = i;
    std::swap(perm[o_at], perm[i_at]);
    kernel = transpose(kernel, perm);
  }
  return conv_general_dilated(lhs, kernel, std::vector<int64_t>(ns, 1), pads, strides, rdil, dn, 1,
                              1, preferred_element_type);
}

}  // namespace cujax::lax
