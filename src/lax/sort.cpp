// Sorting: lax.sort with JAX's comparator (floats in total order after canonicalizing -0 and
// NaN, complex numbers by their real then imaginary parts), sort_key_val and top_k.
#include <cmath>

#include "lax/util.h"

namespace cujax::lax {

using namespace detail;

namespace {

using Comparator = std::function<Array(const std::vector<Array>&)>;

std::vector<Array> sort_with(const std::string& op, const std::vector<Array>& operands,
                             int64_t dimension, bool is_stable, const Comparator& comparator) {
  if (operands.empty()) fail(op, "needs at least one operand");
  for (const auto& a : operands) {
    check_valid(op, a);
    if (a.shape() != operands[0].shape())
      fail(op, "operands must have the same shape, got " + type_str(operands[0]) + " and " +
                   type_str(a));
  }
  if (operands[0].ndim() == 0) fail(op, "cannot sort a scalar, got " + type_str(operands[0]));
  const int64_t d = canonical_axis(op, dimension, operands[0].ndim());
  trace::OpSpec s;
  s.name = "stablehlo.sort";
  s.attributes.push_back({"dimension", i64_attr(d)});
  if (is_stable) s.attributes.push_back({"is_stable", ir::Attribute::boolean_attr(true)});
  std::vector<DType> args;
  for (const auto& a : operands) {
    s.result_types.push_back(trace::ir_type(a.aval()));
    args.push_back(a.dtype());
    args.push_back(a.dtype());
  }
  s.regions.push_back([=](trace::TraceContext& tc, ir::Block& block) {
    trace_computation(op, tc, block, args, {DType::Bool}, [&](const std::vector<Array>& v) {
      return std::vector<Array>{comparator(v)};
    });
  });
  return trace::bind(s, operands);
}

// -0 -> 0 and every NaN -> the canonical NaN, so that the total order puts them where users
// expect (jax.lax._canonicalize_float_for_sort).
Array canonicalize_for_sort(const Array& x) {
  if (!is_float(x.dtype())) return x;
  const Array zero = constant(0, x.dtype());
  const Array r = select(eq(x, zero), constant(0, x.dtype()), x);
  return select(ne(x, x), constant(NAN, x.dtype()), r);
}

Array sort_lt(const Array& x, const Array& y) {
  return is_float(x.dtype()) ? compare("sort", x, y, "LT", true) : lt(x, y);
}

Array sort_gt(const Array& x, const Array& y) {
  return is_float(x.dtype()) ? compare("top_k", x, y, "GT", true) : gt(x, y);
}

}  // namespace

std::vector<Array> sort(const std::vector<Array>& operands, int64_t dimension, bool is_stable,
                        int num_keys) {
  if (num_keys < 1 || num_keys > static_cast<int>(operands.size()))
    fail("sort", "num_keys must be between 1 and the number of operands (" +
                     std::to_string(operands.size()) + "), got " + std::to_string(num_keys));
  Comparator lexicographic = [num_keys](const std::vector<Array>& v) {
    // Per key: x < y and x == y in the sort order.
    std::vector<std::pair<Array, Array>> keys;
    for (int k = 0; k < num_keys; ++k) {
      const Array &x = v[2 * k], &y = v[2 * k + 1];
      if (is_complex(x.dtype())) {
        // By real part, then imaginary part, as JAX and NumPy. The complex CPU sort runs its
        // comparator without captured constants, so the parts are compared without
        // canonicalizing: IEEE order (-0 == 0), NaNs equal and after every number.
        const Array parts[2][2] = {{real(x), real(y)}, {imag(x), imag(y)}};
        for (const auto& part : parts) {
          const Array &a = part[0], &b = part[1];
          const Array a_nan = ne(a, a), b_nan = ne(b, b);
          keys.push_back({bitwise_or(lt(a, b), bitwise_and(bitwise_not(a_nan), b_nan)),
                          bitwise_or(eq(a, b), bitwise_and(a_nan, b_nan))});
        }
      } else {
        const Array cx = canonicalize_for_sort(x), cy = canonicalize_for_sort(y);
        keys.push_back({sort_lt(cx, cy), eq(cx, cy)});
      }
    }
    // From the last key to the first: lt_k or (eq_k and p).
    Array p;
    for (size_t k = keys.size(); k-- > 0;) {
      const auto& [l, e] = keys[k];
      p = p.valid() ? bitwise_or(l, bitwise_and(e, p)) : l;
    }
    return p;
  };
  return sort_with("sort", operands, dimension, is_stable, lexicographic);
}

Array sort(const Array& operand, int64_t dimension, bool is_stable) {
  return sort(std::vector<Array>{operand}, dimension, is_stable, 1)[0];
}

std::pair<Array, Array> sort_key_val(const Array& keys, const Array& values, int64_t dimension,
                                     bool is_stable) {
  auto r = sort(std::vector<Array>{keys, values}, dimension, is_stable, 1);
  return {r[0], r[1]};
}

std::pair<Array, Array> top_k(const Array& operand, int64_t k) {
  check_valid("top_k", operand);
  if (operand.ndim() == 0) fail("top_k", "needs an operand of rank >= 1, got " + type_str(operand));
  const int64_t n = operand.shape().back();
  if (k < 0 || k > n)
    fail("top_k", "k = " + std::to_string(k) + " is out of range for " + type_str(operand));
  const int64_t axis = operand.ndim() - 1;
  const Array indices = broadcasted_iota(DType::I32, operand.shape(), axis);
  // Descending and stable: among equal values the lower index comes first.
  Comparator descending = [](const std::vector<Array>& v) {
    return sort_gt(canonicalize_for_sort(v[0]), canonicalize_for_sort(v[1]));
  };
  auto r = sort_with("top_k", {operand, indices}, axis, true, descending);
  return {slice_in_dim(r[0], 0, k, 1, axis), slice_in_dim(r[1], 0, k, 1, axis)};
}

}  // namespace cujax::lax
