#include "export/symbolic_dims.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "cujax/core/error.h"

namespace cujax::jax_export {

namespace {

using Terms = std::map<std::vector<std::string>, int64_t>;

DimExpr add(DimExpr a, const DimExpr& b, int64_t sign) {
  for (const auto& [m, c] : b.terms) a.terms[m] += sign * c;
  std::erase_if(a.terms, [](const auto& t) { return t.second == 0; });
  return a;
}

DimExpr mul(const DimExpr& a, const DimExpr& b) {
  DimExpr r;
  for (const auto& [ma, ca] : a.terms)
    for (const auto& [mb, cb] : b.terms) {
      std::vector<std::string> m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      std::sort(m.begin(), m.end());
      r.terms[m] += ca * cb;
    }
  std::erase_if(r.terms, [](const auto& t) { return t.second == 0; });
  return r;
}

// Recursive descent: sum := product (('+'|'-') product)*; product := unary ('*' unary)*;
// unary := '-' unary | integer | identifier | '(' sum ')'.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  DimExpr parse() {
    DimExpr e = sum();
    ws();
    if (pos_ != text_.size()) fail("unexpected '" + std::string(1, text_[pos_]) + "'");
    return e;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("symbolic dimension '" + std::string(text_) + "': " + what + " at position " +
                std::to_string(pos_));
  }
  void ws() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    ws();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  DimExpr sum() {
    DimExpr e = product();
    for (;;) {
      if (eat('+'))
        e = add(e, product(), 1);
      else if (eat('-'))
        e = add(e, product(), -1);
      else
        return e;
    }
  }
  DimExpr product() {
    DimExpr e = unary();
    while (eat('*')) e = mul(e, unary());
    return e;
  }
  DimExpr unary() {
    if (eat('-')) return add(DimExpr{}, unary(), -1);
    if (eat('(')) {
      DimExpr e = sum();
      if (!eat(')')) fail("expected ')'");
      return e;
    }
    ws();
    const size_t start = pos_;
    if (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      int64_t v = 0;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        if (v > (INT64_MAX - 9) / 10) fail("integer too large");
        v = v * 10 + (text_[pos_++] - '0');
      }
      DimExpr e;
      if (v != 0) e.terms[{}] = v;
      return e;
    }
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
      ++pos_;
    if (pos_ == start)
      fail(pos_ < text_.size() ? "unexpected '" + std::string(1, text_[pos_]) + "'"
                               : "unexpected end");
    std::string name(text_.substr(start, pos_ - start));
    ws();
    if (pos_ < text_.size() && text_[pos_] == '(')
      fail("the operator " + name + "(...) is not supported (cujax solves sums of products)");
    DimExpr e;
    e.terms[{name}] = 1;
    return e;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

std::string quoted_list(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "'" : ", '") + n + "'";
  return s;
}

}  // namespace

int64_t DimExpr::evaluate(const std::map<std::string, int64_t>& vars) const {
  int64_t r = 0;
  for (const auto& [m, c] : terms) {
    int64_t p = c;
    for (const auto& v : m) p *= vars.at(v);
    r += p;
  }
  return r;
}

std::vector<std::string> DimExpr::variables() const {
  std::set<std::string> s;
  for (const auto& [m, c] : terms) s.insert(m.begin(), m.end());
  return {s.begin(), s.end()};
}

DimExpr parse_dim_expr(std::string_view text) {
  return Parser(text).parse();
}

std::map<std::string, int64_t> solve_dimension_vars(const std::vector<ShapeSpec>& specs) {
  struct Dim {
    std::string spec, where;  // "2*b", "args[0].shape[1]"
    DimExpr expr;
    int64_t actual;
    bool used = false;
  };
  std::vector<Dim> dims;
  std::string specs_text;
  for (const auto& s : specs) {
    std::string shape;
    for (size_t j = 0; j < s.dims.size(); ++j) {
      shape += (j ? ", " : "") + s.dims[j];
      if (j < s.actual.size())
        dims.push_back({s.dims[j], s.path + ".shape[" + std::to_string(j) + "]",
                        parse_dim_expr(s.dims[j]), s.actual[j]});
    }
    if (s.dims.size() == 1) shape += ",";
    specs_text += (specs_text.empty() ? "" : ", ") + s.path + ".shape = (" + shape + ")";
  }
  std::map<std::string, int64_t> vars;
  std::string obtained;
  auto fail = [&](const std::string& what) {
    throw Error("Input shapes do not match the polymorphic shapes specification. " + what +
                " Using the following polymorphic shapes specifications: " + specs_text +
                ". Obtained dimension variables: " + obtained + ".");
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (Dim& d : dims) {
      if (d.used) continue;
      // Known part, and the one term with unknown variables (if linear in one of them).
      int64_t known = 0, coefficient = 0;
      std::string unknown;
      int unknown_terms = 0;
      bool linear = true;
      for (const auto& [m, c] : d.expr.terms) {
        int64_t p = c;
        std::vector<std::string> free;
        for (const auto& v : m) {
          if (auto it = vars.find(v); it != vars.end())
            p *= it->second;
          else
            free.push_back(v);
        }
        if (free.empty()) {
          known += p;
          continue;
        }
        ++unknown_terms;
        linear = linear && free.size() == 1;
        unknown = free[0];
        coefficient = p;
      }
      if (unknown_terms == 0) {
        d.used = true;
        continue;
      }
      if (unknown_terms != 1 || !linear || coefficient == 0) continue;
      const int64_t rest = d.actual - known;
      if (rest % coefficient != 0)
        fail("Division had remainder " + std::to_string(rest % coefficient) +
             " when computing the value of '" + unknown + "'.");
      const int64_t value = rest / coefficient;
      obtained += "'" + unknown + "' = " + std::to_string(value) + " from specification '" +
                  d.spec + "' for dimension " + d.where + " (= " + std::to_string(d.actual) + "), ";
      if (value < 1) fail("Expected value >= 1 for dimension variable '" + unknown + "'.");
      vars[unknown] = value;
      d.used = true;
      progress = true;
    }
  }
  std::vector<std::string> unsolved;
  for (const Dim& d : dims)
    for (const auto& v : d.expr.variables())
      if (!vars.count(v) && std::find(unsolved.begin(), unsolved.end(), v) == unsolved.end())
        unsolved.push_back(v);
  if (!unsolved.empty())
    fail("Cannot solve for values of dimension variables " + quoted_list(unsolved) +
         ": each must appear alone, times a constant, in some dimension.");
  for (const Dim& d : dims) {
    const int64_t want = d.expr.evaluate(vars);
    if (want != d.actual)
      fail("Found inconsistency between dimension size " + d.where +
           " (= " + std::to_string(d.actual) + ") and the specification '" + d.spec +
           "' (= " + std::to_string(want) + ").");
  }
  return vars;
}

}  // namespace cujax::jax_export
