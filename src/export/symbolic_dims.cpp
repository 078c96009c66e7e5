#include "export/symbolic_dims.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>

#include "cujax/core/error.h"

namespace cujax::jax_export {

namespace {

using Terms = std::map<std::vector<std::string>, int64_t>;

DimExpr add(DimExpr a, const DimExpr& b, int64_t sign) {
  a.factors.insert(b.factors.begin(), b.factors.end());
  for (const auto& [m, c] : b.terms) a.terms[m] += sign * c;
  std::erase_if(a.terms, [](const auto& t) { return t.second == 0; });
  return a;
}

DimExpr mul(const DimExpr& a, const DimExpr& b) {
  DimExpr r;
  r.factors = a.factors;
  r.factors.insert(b.factors.begin(), b.factors.end());
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

std::optional<int64_t> constant_of(const DimExpr& e) {
  if (e.terms.empty()) return 0;
  if (e.terms.size() == 1 && e.terms.begin()->first.empty()) return e.terms.begin()->second;
  return std::nullopt;
}

int64_t apply(const std::string& op, const std::vector<int64_t>& x, const std::string& text) {
  if (op == "non_negative") return std::max<int64_t>(x[0], 0);
  if (op == "max") return std::max(x[0], x[1]);
  if (op == "min") return std::min(x[0], x[1]);
  if (x[1] == 0) throw Error("symbolic dimension " + text + ": division by zero");
  int64_t q = x[0] / x[1], r = x[0] % x[1];
  if (r != 0 && ((r < 0) != (x[1] < 0))) {  // Python rounds toward negative infinity
    --q;
    r += x[1];
  }
  return op == "floordiv" ? q : r;
}

// op(operands) as a factor, or its value when the operands are constants.
DimExpr factor(const std::string& op, std::vector<DimExpr> operands) {
  std::vector<int64_t> values;
  std::string text = op + "(";
  for (size_t i = 0; i < operands.size(); ++i) {
    text += (i ? ", " : "") + operands[i].str();
    if (auto c = constant_of(operands[i])) values.push_back(*c);
  }
  text += ")";
  DimExpr e;
  if (values.size() == operands.size()) {
    if (const int64_t v = apply(op, values, text)) e.terms[{}] = v;
    return e;
  }
  e.terms[{text}] = 1;
  e.factors[text] = DimExpr::Factor{op, std::move(operands)};
  return e;
}

// Recursive descent: sum := product (('+'|'-') product)*; product := unary (('*'|'//'|'%')
// unary)*; unary := '-' unary | integer | identifier | op '(' sum (',' sum)* ')' | '(' sum ')'.
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
    for (;;) {
      ws();
      if (text_.substr(pos_, 2) == "//") {
        pos_ += 2;
        e = factor("floordiv", {e, unary()});
      } else if (eat('%')) {
        e = factor("mod", {e, unary()});
      } else if (eat('*')) {
        e = mul(e, unary());
      } else {
        return e;
      }
    }
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
    if (eat('(')) {
      const size_t arity = name == "non_negative" ? 1
                           : name == "floordiv" || name == "mod" || name == "max" || name == "min"
                               ? 2
                               : 0;
      if (arity == 0) fail("unknown operator " + name + "(...)");
      std::vector<DimExpr> operands{sum()};
      while (eat(',')) operands.push_back(sum());
      if (!eat(')')) fail("expected ')'");
      if (operands.size() != arity)
        fail(name + " takes " + std::to_string(arity) + " operands, not " +
             std::to_string(operands.size()));
      return factor(name, std::move(operands));
    }
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
    for (const auto& v : m) {
      if (auto f = factors.find(v); f != factors.end()) {
        std::vector<int64_t> x;
        for (const DimExpr& o : f->second.operands) x.push_back(o.evaluate(vars));
        p *= apply(f->second.op, x, v);
      } else {
        p *= vars.at(v);
      }
    }
    r += p;
  }
  return r;
}

std::vector<std::string> DimExpr::variables() const {
  std::set<std::string> s;
  for (const auto& [m, c] : terms)
    for (const auto& v : m) {
      if (auto f = factors.find(v); f != factors.end()) {
        for (const DimExpr& o : f->second.operands)
          for (const auto& inner : o.variables()) s.insert(inner);
      } else {
        s.insert(v);
      }
    }
  return {s.begin(), s.end()};
}

std::string DimExpr::str() const {
  std::string s;
  for (const auto& [m, c] : terms) {
    std::string t;
    for (const auto& v : m) t += (t.empty() ? "" : "*") + v;
    if (t.empty())
      t = std::to_string(c < 0 ? -c : c);
    else if (c != 1 && c != -1)
      t = std::to_string(c < 0 ? -c : c) + "*" + t;
    s += s.empty() ? (c < 0 ? "-" + t : t) : (c < 0 ? " - " : " + ") + t;
  }
  return s.empty() ? "0" : s;
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
          if (auto f = d.expr.factors.find(v); f != d.expr.factors.end()) {
            // An operator's value once its variables are known; never solved for (as in JAX).
            bool known_operands = true;
            for (const DimExpr& o : f->second.operands)
              for (const auto& x : o.variables()) known_operands = known_operands && vars.count(x);
            if (known_operands) {
              DimExpr one;
              one.terms[{v}] = 1;
              one.factors[v] = f->second;
              p *= one.evaluate(vars);
            } else {
              free.push_back(v);
              linear = false;
            }
          } else if (auto it = vars.find(v); it != vars.end()) {
            p *= it->second;
          } else {
            free.push_back(v);
          }
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
