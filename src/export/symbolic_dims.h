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

// sum of coefficient * product of factors; a monomial is its sorted factors ({} a constant). A
// factor is a variable or one of JAX's operators on expressions, named by its canonical text
// ("floordiv(b, 2)") and described in `factors`.
struct DimExpr {
  struct Factor {
    std::string op;                 // "floordiv", "mod", "max", "min", "non_negative"
    std::vector<DimExpr> operands;  // 2 (1 for non_negative)
  };
  std::map<std::vector<std::string>, int64_t> terms;
  std::map<std::string, Factor> factors;
  // The value for `vars`; every variable must be bound. floordiv and mod round as Python's // and
  // % do (toward negative infinity); a zero divisor throws Error.
  int64_t evaluate(const std::map<std::string, int64_t>& vars) const;
  // The variables, those inside operators included.
  std::vector<std::string> variables() const;
  std::string str() const;  // canonical text: "2*b + floordiv(b, 2) + 1"
};

// Parses JAX's text of a dimension: integers, variables (identifiers), +, -, *, // and %
// (floordiv, mod), parentheses and JAX's operators floordiv(e, e), mod(e, e), max(e, e),
// min(e, e) and non_negative(e). Throws Error naming the text and the position (an unknown
// operator by its name).
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
