#include "lax/util.h"

#include <cmath>
#include <limits>
#include <type_traits>

namespace cujax::lax {
namespace detail {

std::string type_str(DType dtype, const Shape& shape) {
  return std::string(mlir_name(dtype)) + shape_to_string(shape);
}

std::string type_str(const Array& a) {
  return type_str(a.dtype(), a.shape());
}

std::string list_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

void fail(const std::string& op, const std::string& message) {
  throw Error("lax." + op + ": " + message);
}

void check_valid(const std::string& op, const Array& a) {
  if (!a.valid()) fail(op, "an operand is an uninitialized Array");
}

int64_t canonical_axis(const std::string& op, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    fail(op, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> canonical_axes(const std::string& op, const std::vector<int64_t>& axes,
                                    int64_t rank) {
  std::vector<int64_t> out;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    const int64_t c = canonical_axis(op, a, rank);
    if (seen[c]) fail(op, "axis " + std::to_string(a) + " appears twice in " + list_str(axes));
    seen[c] = true;
    out.push_back(c);
  }
  return out;
}

bool dtype_in(DType t, Kinds kinds) {
  const unsigned k = static_cast<unsigned>(kinds);
  if (t == DType::Bool) return k & static_cast<unsigned>(Kinds::Bool);
  if (is_signed_int(t)) return k & static_cast<unsigned>(Kinds::Signed);
  if (is_unsigned_int(t)) return k & static_cast<unsigned>(Kinds::Unsigned);
  if (is_complex(t)) return k & static_cast<unsigned>(Kinds::Complex);
  return k & static_cast<unsigned>(Kinds::Float);
}

namespace {
std::string kinds_str(Kinds kinds) {
  switch (kinds) {
    case Kinds::Bool:
      return "bool";
    case Kinds::Float:
      return "floating-point";
    case Kinds::Int:
      return "integer";
    case Kinds::Num:
      return "a number (integer, floating-point or complex, not bool)";
    case Kinds::RealNum:
      return "a real number (integer or floating-point)";
    case Kinds::Inexact:
      return "floating-point or complex";
    case Kinds::SignedOrInexact:
      return "signed integer, floating-point or complex";
    case Kinds::Real:
      return "bool, integer or floating-point (not complex)";
    case Kinds::IntOrBool:
      return "integer or bool";
    case Kinds::SignedOrFloat:
      return "signed integer or floating-point";
    default:
      break;
  }
  std::string s;
  auto add = [&](Kinds k, const char* name) {
    if (static_cast<unsigned>(kinds) & static_cast<unsigned>(k))
      s += (s.empty() ? "" : " or ") + std::string(name);
  };
  add(Kinds::Bool, "bool");
  add(Kinds::Signed, "signed integer");
  add(Kinds::Unsigned, "unsigned integer");
  add(Kinds::Float, "floating-point");
  add(Kinds::Complex, "complex");
  return s;
}
}  // namespace

void check_dtype(const std::string& op, const Array& a, Kinds kinds, const std::string& what) {
  check_valid(op, a);
  if (!dtype_in(a.dtype(), kinds))
    fail(op, (what.empty() ? std::string("operand") : what) + " must be " + kinds_str(kinds) +
                 ", got " + type_str(a));
}

trace::OpSpec spec(std::string name, const Shape& shape, DType dtype,
                   std::vector<ir::NamedAttribute> attrs) {
  trace::OpSpec s;
  s.name = std::move(name);
  s.attributes = std::move(attrs);
  s.result_types = {ir::Type::tensor(shape, dtype)};
  return s;
}

ir::AttrRef i64_attr(int64_t v) {
  return ir::Attribute::integer_attr(v, DType::I64);
}

ir::AttrRef dense(const std::vector<int64_t>& v) {
  return ir::Attribute::dense_array(v, DType::I64);
}

std::string compare_type(DType t) {
  if (is_float(t) || is_complex(t)) return "FLOAT";
  if (is_signed_int(t)) return "SIGNED";
  return "UNSIGNED";
}

Array compare(const std::string& op, const Array& x, const Array& y, const std::string& direction,
              bool total_order) {
  check_valid(op, x);
  check_valid(op, y);
  if (x.shape() != y.shape() || x.dtype() != y.dtype())
    fail(op,
         "operands must have the same shape and dtype, got " + type_str(x) + " and " + type_str(y));
  if (is_complex(x.dtype()) && direction != "EQ" && direction != "NE")
    fail(op, "complex numbers compare only for (in)equality, got " + type_str(x) +
                 " (numpy's ordered comparisons order them by real, then imaginary part)");
  if (total_order && !is_float(x.dtype()))
    fail(op, "a total-order comparison needs floating-point operands, got " + type_str(x));
  const std::string ct = total_order ? "TOTALORDER" : compare_type(x.dtype());
  return trace::bind1(
      spec("stablehlo.compare", x.shape(), DType::Bool,
           {{"comparison_direction", ir::Attribute::enum_attr("comparison_direction", direction)},
            {"compare_type", ir::Attribute::enum_attr("comparison_type", ct)}}),
      {x, y});
}

namespace {
template <class T>
T saturating_cast(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else if constexpr (std::is_integral_v<T>) {
    if (std::isnan(v)) return T(0);
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest()))
      return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

HostTensor scalar_tensor(double value, DType dtype, const Shape& shape = {}) {
  HostTensor t(dtype, shape);
  visit_dtype_with_complex(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v;
    if constexpr (is_complex_v<T>)
      v = T(static_cast<typename T::value_type>(value), 0);  // the real axis
    else
      v = saturating_cast<T>(value);
    T* p = t.data_as<T>();
    for (int64_t i = 0; i < t.size(); ++i) p[i] = v;
  });
  return t;
}
}  // namespace

Array constant(double value, DType dtype) {
  return array(scalar_tensor(value, dtype));
}

Array lowest(DType dtype) {
  if (is_float(dtype)) return constant(-INFINITY, dtype);
  HostTensor t(dtype, {});
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) t.data_as<T>()[0] = std::numeric_limits<T>::lowest();
  });
  return array(t);
}

Array highest(DType dtype) {
  if (is_float(dtype)) return constant(INFINITY, dtype);
  HostTensor t(dtype, {});
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) t.data_as<T>()[0] = std::numeric_limits<T>::max();
  });
  return array(t);
}

Array all_ones(DType dtype) {
  if (dtype == DType::Bool) return constant(1, dtype);
  HostTensor t(dtype, {});
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
      t.data_as<T>()[0] = static_cast<T>(~T(0));
  });
  return array(t);
}

Array broadcast_scalar(const Array& s, const Shape& shape) {
  if (shape.empty()) return s;
  return broadcast_in_dim(s, shape, {});
}

Array like(const Array& x, double value) {
  return full(x.shape(), value, x.dtype());
}

void trace_computation(const std::string& op, trace::TraceContext& tc, ir::Block& block,
                       const std::vector<DType>& arg_dtypes,
                       const std::vector<DType>& result_dtypes, const Computation& computation) {
  std::vector<ShapeDtype> avals;
  for (DType t : arg_dtypes) avals.push_back(ShapeDtype{{}, t, false});
  tc.trace_region(block, avals, [&](const std::vector<Array>& args) {
    std::vector<Array> out = computation(args);
    std::string want, got;
    for (DType t : result_dtypes) want += (want.empty() ? "" : ", ") + type_str(t, {});
    for (const auto& r : out) got += (got.empty() ? "" : ", ") + (r.valid() ? type_str(r) : "?");
    bool ok = out.size() == result_dtypes.size();
    for (size_t i = 0; ok && i < out.size(); ++i)
      ok = out[i].valid() && out[i].shape().empty() && out[i].dtype() == result_dtypes[i];
    if (!ok) fail(op, "the computation must return (" + want + "), got (" + got + ")");
    return out;
  });
}

}  // namespace detail

Array full(const Shape& shape, double value, DType dtype) {
  for (int64_t d : shape)
    if (d < 0) detail::fail("full", "negative dimension in shape " + shape_to_string(shape));
  if (shape.empty() || !trace::current_trace())
    return array(detail::scalar_tensor(value, dtype, shape));
  return broadcast_in_dim(detail::constant(value, dtype), shape, {});
}

Array full_like(const Array& x, double value) {
  detail::check_valid("full_like", x);
  return full(x.shape(), value, x.dtype());
}

}  // namespace cujax::lax
