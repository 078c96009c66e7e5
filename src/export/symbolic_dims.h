// The symbolic dimensions of a shape-polymorphic JAX export ("b", "2*b", "b + 1", "a*b - 2"),
// read as polynomials with integer coefficients, and the dimension variables solved from the
// shapes a call passes, as jax.export checks them (shape_poly's solve of the dimension
// equations): a variable is found from a dimension that is linear in it once the others are
// known; then every dimension must equal its expression, and every variable be >= 1.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace cujax::jax_export {

// sum of coefficient * product of variables; a monomial is its sorted variables ({} a constant).
struct DimExpr {
  std::map<std::vector<std::string>, int64_t> terms;
  // The value for `vars`; every variable must be bound.
  int64_t evaluate(const std::map<std::string, int64_t>& vars) const;
  std::vector<std::string> variables() const;
};

// Parses JAX's text of a dimension: integers, variables (identifiers), +, -, * and parentheses.
// JAX's other operators (floordiv, mod, max, min, non_negative) are refused naming them. Throws
// Error naming the text and the position.
DimExpr parse_dim_expr(std::string_view text);

// One input's symbolic shape (as in_avals writes it) and the shape the call passes.
struct ShapeSpec {
  std::string path;               // "args[0]"
  std::vector<std::string> dims;  // "b", "4", "2*b"
  std::vector<int64_t> actual;    // same rank (the caller checks ranks)
};

// The dimension variables' values. Throws Error with JAX's message for a call that does not fit
// ("Input shapes do not match the polymorphic shapes specification. Division had remainder 1 when
// computing the value of 'b'. ...", "Found inconsistency between dimension size args[1].shape[0]
// (= 5) and the specification 'b' (= 4)", "Expected value >= 1 for dimension variable 'b'",
// "Cannot solve for values of dimension variables 'b'").
std::map<std::string, int64_t> solve_dimension_vars(const std::vector<ShapeSpec>& specs);

}  // namespace cujax::jax_export
