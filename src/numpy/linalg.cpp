// Products: matmul, dot, tensordot, outer, einsum; diagonal and trace.
#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include "numpy/internal.h"

namespace cujax::numpy {

using detail::fail;
using detail::normalize_axis;
using detail::reshape_keep_weak;
using detail::set_weak;

namespace {

std::vector<int64_t> range(int64_t a, int64_t b) {
  std::vector<int64_t> r;
  for (int64_t i = a; i < b; ++i) r.push_back(i);
  return r;
}

Array dot_general(const Array& a, const Array& b, const lax::DotDimensionNumbers& dims, bool weak) {
  return set_weak(lax::dot_general(a, b, dims), weak);
}

}  // namespace

Array matmul(const Array& a_in, const Array& b_in) {
  if (a_in.ndim() == 0 || b_in.ndim() == 0)
    fail("matmul", "inputs must be at least 1-D, got shapes " +
                       detail::shapes_str({a_in.shape(), b_in.shape()}));
  auto p = detail::promote("matmul", {a_in, b_in}, false);
  Array a = p.args[0], b = p.args[1];
  const bool a_vec = a.ndim() == 1, b_vec = b.ndim() == 1;
  if (a_vec) a = reshape_keep_weak(a, {1, a.shape()[0]});
  if (b_vec) b = reshape_keep_weak(b, {b.shape()[0], 1});
  const int64_t ar = a.ndim(), br = b.ndim();
  const int64_t k = a.shape()[ar - 1];
  if (b.shape()[br - 2] != k)
    fail("matmul", "shapes " + detail::shapes_str({a_in.shape(), b_in.shape()}) +
                       " are not aligned: " + std::to_string(k) +
                       " (last dimension of the first) != " + std::to_string(b.shape()[br - 2]) +
                       (b_vec ? " (the vector)" : " (second-to-last dimension of the second)"));
  const int64_t m = a.shape()[ar - 2], n = b.shape()[br - 1];
  Shape out;
  if (br == 2) {
    // Fold a's batch dimensions into its rows: one matrix product.
    Shape batch(a.shape().begin(), a.shape().end() - 2);
    Array a2 = reshape_keep_weak(a, {num_elements(batch) * m, k});
    Array r = dot_general(a2, b, {{1}, {0}, {}, {}}, p.type.weak_type);
    out = batch;
    out.push_back(m);
    out.push_back(n);
    Array res = reshape_keep_weak(r, out);
    Shape final_shape = batch;
    if (!a_vec) final_shape.push_back(m);
    if (!b_vec) final_shape.push_back(n);
    return reshape_keep_weak(res, final_shape);
  }
  Shape ab(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  Shape batch;
  {
    const size_t r = std::max(ab.size(), bb.size());
    batch.assign(r, 1);
    for (size_t i = 0; i < r; ++i) {
      const int64_t x = i + ab.size() >= r ? ab[i + ab.size() - r] : 1;
      const int64_t y = i + bb.size() >= r ? bb[i + bb.size() - r] : 1;
      if (x != y && x != 1 && y != 1)
        fail("matmul", "batch dimensions of shapes " +
                           detail::shapes_str({a_in.shape(), b_in.shape()}) +
                           " cannot be broadcast");
      batch[i] = x == 1 ? y : x;
    }
  }
  Shape as = batch, bs = batch;
  as.push_back(m);
  as.push_back(k);
  bs.push_back(k);
  bs.push_back(n);
  a = detail::broadcast_to_shape(a, as);
  b = detail::broadcast_to_shape(b, bs);
  const int64_t nb = static_cast<int64_t>(batch.size());
  Array r = dot_general(a, b, {{nb + 1}, {nb}, range(0, nb), range(0, nb)}, p.type.weak_type);
  Shape final_shape = batch;
  if (!a_vec) final_shape.push_back(m);
  if (!b_vec) final_shape.push_back(n);
  return reshape_keep_weak(r, final_shape);
}

Array dot(const Array& a_in, const Array& b_in) {
  if (a_in.ndim() == 0 || b_in.ndim() == 0) return multiply(a_in, b_in);
  auto p = detail::promote("dot", {a_in, b_in}, false);
  const Array& a = p.args[0];
  const Array& b = p.args[1];
  const int64_t ca = a.ndim() - 1;
  const int64_t cb = b.ndim() == 1 ? 0 : b.ndim() - 2;
  if (a.shape()[ca] != b.shape()[cb])
    fail("dot", "shapes " + detail::shapes_str({a.shape(), b.shape()}) + " are not aligned: " +
                    std::to_string(a.shape()[ca]) + " (dim " + std::to_string(ca) +
                    ") != " + std::to_string(b.shape()[cb]) + " (dim " + std::to_string(cb) + ")");
  return dot_general(a, b, {{ca}, {cb}, {}, {}}, p.type.weak_type);
}

Array vdot(const Array& a, const Array& b) {
  if (a.size() != b.size())
    fail("vdot", "arrays of shapes " + detail::shapes_str({a.shape(), b.shape()}) +
                     " have different sizes");
  return dot(conj(ravel(a)), ravel(b));  // the first operand conjugated, as NumPy
}

Array inner(const Array& a_in, const Array& b_in) {
  if (a_in.ndim() == 0 || b_in.ndim() == 0) return multiply(a_in, b_in);
  auto p = detail::promote("inner", {a_in, b_in}, false);
  const Array& a = p.args[0];
  const Array& b = p.args[1];
  if (a.shape().back() != b.shape().back())
    fail("inner", "shapes " + detail::shapes_str({a.shape(), b.shape()}) +
                      " are not aligned in their last dimension");
  return dot_general(a, b, {{a.ndim() - 1}, {b.ndim() - 1}, {}, {}}, p.type.weak_type);
}

Array outer(const Array& a, const Array& b) {
  return multiply(reshape(a, {a.size(), 1}), reshape(b, {1, b.size()}));
}

Array tensordot(const Array& a, const Array& b, int64_t axes) {
  if (axes < 0 || axes > a.ndim() || axes > b.ndim())
    fail("tensordot", "axes=" + std::to_string(axes) + " is out of range for shapes " +
                          detail::shapes_str({a.shape(), b.shape()}));
  return tensordot(a, b, range(a.ndim() - axes, a.ndim()), range(0, axes));
}

Array tensordot(const Array& a_in, const Array& b_in, const std::vector<int64_t>& a_axes,
                const std::vector<int64_t>& b_axes) {
  if (a_axes.size() != b_axes.size()) fail("tensordot", "the axes lists have different lengths");
  auto p = detail::promote("tensordot", {a_in, b_in}, false);
  const Array& a = p.args[0];
  const Array& b = p.args[1];
  lax::DotDimensionNumbers dims;
  for (size_t i = 0; i < a_axes.size(); ++i) {
    const int64_t x = normalize_axis("tensordot", a_axes[i], a.ndim());
    const int64_t y = normalize_axis("tensordot", b_axes[i], b.ndim());
    if (a.shape()[x] != b.shape()[y])
      fail("tensordot", "shape mismatch for sum: axis " + std::to_string(x) + " of " +
                            shape_to_string(a.shape()) + " and axis " + std::to_string(y) + " of " +
                            shape_to_string(b.shape()));
    dims.lhs_contracting_dimensions.push_back(x);
    dims.rhs_contracting_dimensions.push_back(y);
  }
  return dot_general(a, b, dims, p.type.weak_type);
}

Array diagonal(const Array& x, int64_t offset, int64_t axis1, int64_t axis2) {
  if (x.ndim() < 2)
    fail("diagonal", "input must be at least 2-D, got shape " + shape_to_string(x.shape()));
  const int64_t a1 = normalize_axis("diagonal", axis1, x.ndim());
  const int64_t a2 = normalize_axis("diagonal", axis2, x.ndim());
  if (a1 == a2) fail("diagonal", "axis1 and axis2 cannot be the same");
  Array y = moveaxis(x, std::vector<int64_t>{a1, a2}, std::vector<int64_t>{-2, -1});
  const int64_t n = y.shape()[y.ndim() - 2], m = y.shape()[y.ndim() - 1];
  const int64_t len =
      std::max<int64_t>(0, offset >= 0 ? std::min(n, m - offset) : std::min(n + offset, m));
  Array rows = lax::iota(DType::I32, len);
  Array cols = lax::iota(DType::I32, len);
  if (offset < 0) rows = add(rows, -offset);
  if (offset > 0) cols = add(cols, offset);
  return at(y, {Ellipsis, rows, cols});
}

Array trace(const Array& x, int64_t offset, int64_t axis1, int64_t axis2) {
  return sum(diagonal(x, offset, axis1, axis2), -1);
}

// ----- einsum ---------------------------------------------------------------------------

namespace {

constexpr int kEllipsisBase = 1000;  // labels of the broadcast ("...") dimensions

struct Term {
  Array x;
  std::vector<int> labels;
};

std::string label_name(int l) {
  if (l >= kEllipsisBase) return "..." + std::to_string(l - kEllipsisBase);
  return std::string(1, static_cast<char>(l));
}

// Parses one term's letters; "..." becomes -1 (expanded later).
std::vector<int> parse_term(const std::string& t) {
  std::vector<int> out;
  bool ellipsis = false;
  for (size_t i = 0; i < t.size(); ++i) {
    const char ch = t[i];
    if (ch == '.') {
      if (t.compare(i, 3, "...") != 0) fail("einsum", "invalid subscripts '" + t + "'");
      if (ellipsis) fail("einsum", "more than one ellipsis in subscripts '" + t + "'");
      ellipsis = true;
      out.push_back(-1);
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(ch))) {
      out.push_back(ch);
    } else {
      fail("einsum", std::string("invalid subscript '") + ch + "' in '" + t + "'");
    }
  }
  return out;
}

// Sums `x` over the positions of labels for which keep(label) is false.
Term sum_out(Term t, const std::function<bool(int)>& keep) {
  std::vector<int64_t> axes;
  std::vector<int> labels;
  for (size_t i = 0; i < t.labels.size(); ++i) {
    if (keep(t.labels[i]))
      labels.push_back(t.labels[i]);
    else
      axes.push_back(static_cast<int64_t>(i));
  }
  if (axes.empty()) return t;
  Array r = set_weak(lax::reduce_sum(t.x, axes), t.x.weak_type());
  return {r, labels};
}

// Takes the diagonal of repeated labels within one term.
Term take_diagonals(Term t) {
  while (true) {
    int p = -1, q = -1;
    for (size_t i = 0; i < t.labels.size() && p < 0; ++i)
      for (size_t j = i + 1; j < t.labels.size(); ++j)
        if (t.labels[i] == t.labels[j]) {
          p = static_cast<int>(i);
          q = static_cast<int>(j);
          break;
        }
    if (p < 0) return t;
    if (t.x.shape()[p] != t.x.shape()[q])
      fail("einsum", "label '" + label_name(t.labels[p]) + "' has sizes " +
                         std::to_string(t.x.shape()[p]) + " and " + std::to_string(t.x.shape()[q]) +
                         " in one operand");
    const int l = t.labels[p];
    Array d = diagonal(t.x, 0, p, q);
    std::vector<int> labels;
    for (size_t i = 0; i < t.labels.size(); ++i)
      if (static_cast<int>(i) != p && static_cast<int>(i) != q) labels.push_back(t.labels[i]);
    labels.push_back(l);
    t = {d, labels};
  }
}

Array broadcast_label(const Array& x, size_t pos, int64_t size) {
  Shape s = x.shape();
  s[pos] = size;
  return detail::broadcast_to_shape(x, s);
}

Term contract(Term a, Term b, const std::set<int>& needed_later) {
  lax::DotDimensionNumbers dims;
  std::vector<int> batch, a_free, b_free;
  for (size_t i = 0; i < a.labels.size(); ++i) {
    const int l = a.labels[i];
    auto it = std::find(b.labels.begin(), b.labels.end(), l);
    if (it == b.labels.end()) {
      a_free.push_back(l);
      continue;
    }
    const size_t j = static_cast<size_t>(it - b.labels.begin());
    const int64_t sa = a.x.shape()[i], sb = b.x.shape()[j];
    if (sa != sb) {
      if (sa == 1)
        a.x = broadcast_label(a.x, i, sb);
      else if (sb == 1)
        b.x = broadcast_label(b.x, j, sa);
      else
        fail("einsum", "label '" + label_name(l) + "' has sizes " + std::to_string(sa) + " and " +
                           std::to_string(sb) + " in different operands");
    }
    if (needed_later.count(l)) {
      batch.push_back(l);
      dims.lhs_batch_dimensions.push_back(static_cast<int64_t>(i));
      dims.rhs_batch_dimensions.push_back(static_cast<int64_t>(j));
    } else {
      dims.lhs_contracting_dimensions.push_back(static_cast<int64_t>(i));
      dims.rhs_contracting_dimensions.push_back(static_cast<int64_t>(j));
    }
  }
  for (int l : b.labels)
    if (std::find(a.labels.begin(), a.labels.end(), l) == a.labels.end()) b_free.push_back(l);
  Array r = set_weak(lax::dot_general(a.x, b.x, dims), a.x.weak_type() && b.x.weak_type());
  std::vector<int> labels = batch;
  labels.insert(labels.end(), a_free.begin(), a_free.end());
  labels.insert(labels.end(), b_free.begin(), b_free.end());
  return {r, labels};
}

}  // namespace

Array einsum(const std::string& subscripts_in, const std::vector<Array>& operands) {
  std::string subscripts;
  for (char ch : subscripts_in)
    if (!std::isspace(static_cast<unsigned char>(ch))) subscripts += ch;
  if (operands.empty()) fail("einsum", "at least one operand is required");
  const size_t arrow = subscripts.find("->");
  const std::string lhs = subscripts.substr(0, arrow);
  std::vector<std::string> term_strs;
  {
    size_t start = 0;
    while (true) {
      const size_t comma = lhs.find(',', start);
      term_strs.push_back(lhs.substr(start, comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  if (term_strs.size() != operands.size())
    fail("einsum", std::to_string(operands.size()) + " operands given but the subscripts '" +
                       subscripts_in + "' name " + std::to_string(term_strs.size()));
  // Promote to one dtype.
  std::vector<ArrayLike> like(operands.begin(), operands.end());
  auto p = detail::promote("einsum", like, false);

  // Expand "..." to ellipsis labels, right-aligned across operands.
  std::vector<std::vector<int>> raw;
  int64_t ell_rank = 0;
  for (size_t i = 0; i < term_strs.size(); ++i) {
    raw.push_back(parse_term(term_strs[i]));
    const int64_t named = static_cast<int64_t>(
        std::count_if(raw[i].begin(), raw[i].end(), [](int l) { return l >= 0; }));
    const bool has_ell = named != static_cast<int64_t>(raw[i].size());
    const int64_t nd = p.args[i].ndim();
    if ((!has_ell && named != nd) || named > nd)
      fail("einsum", "operand " + std::to_string(i) + " has " + std::to_string(nd) +
                         " dimensions (shape " + shape_to_string(p.args[i].shape()) +
                         ") but its subscripts '" + term_strs[i] + "' name " +
                         std::to_string(named));
    if (has_ell) ell_rank = std::max(ell_rank, nd - named);
  }
  std::vector<Term> terms;
  std::map<int, int> count;
  for (size_t i = 0; i < raw.size(); ++i) {
    std::vector<int> labels;
    const int64_t named = static_cast<int64_t>(
        std::count_if(raw[i].begin(), raw[i].end(), [](int l) { return l >= 0; }));
    const int64_t e = p.args[i].ndim() - named;
    for (int l : raw[i]) {
      if (l >= 0) {
        labels.push_back(l);
      } else {
        for (int64_t j = ell_rank - e; j < ell_rank; ++j)
          labels.push_back(kEllipsisBase + static_cast<int>(j));
      }
    }
    for (int l : labels) ++count[l];
    terms.push_back({p.args[i], labels});
  }
  std::vector<int> out_labels;
  if (arrow != std::string::npos) {
    for (int l : parse_term(subscripts.substr(arrow + 2))) {
      if (l < 0) {
        for (int64_t j = 0; j < ell_rank; ++j)
          out_labels.push_back(kEllipsisBase + static_cast<int>(j));
        continue;
      }
      if (!count.count(l))
        fail("einsum", "output subscript '" + label_name(l) + "' does not appear in the inputs");
      if (std::find(out_labels.begin(), out_labels.end(), l) != out_labels.end())
        fail("einsum", "output subscript '" + label_name(l) + "' appears more than once");
      out_labels.push_back(l);
    }
  } else {
    for (int64_t j = 0; j < ell_rank; ++j)
      out_labels.push_back(kEllipsisBase + static_cast<int>(j));
    for (auto [l, n] : count)  // std::map: alphabetical (ASCII: upper case first)
      if (l < kEllipsisBase && n == 1) out_labels.push_back(l);
  }
  for (int l : out_labels)
    if (l >= kEllipsisBase && !count.count(l)) {
      // An ellipsis dimension that no operand has: cannot happen (ell_rank is the maximum).
      fail("einsum", "internal error: missing ellipsis dimension");
    }
  const std::set<int> out_set(out_labels.begin(), out_labels.end());

  // Diagonals, then labels that only one operand has and the output lacks.
  for (size_t i = 0; i < terms.size(); ++i) {
    terms[i] = take_diagonals(terms[i]);
    terms[i] = sum_out(terms[i], [&](int l) {
      if (out_set.count(l)) return true;
      for (size_t j = 0; j < terms.size(); ++j)
        if (j != i &&
            std::find(terms[j].labels.begin(), terms[j].labels.end(), l) != terms[j].labels.end())
          return true;
      return false;
    });
  }
  Term acc = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) {
    std::set<int> needed = out_set;
    for (size_t j = i + 1; j < terms.size(); ++j)
      needed.insert(terms[j].labels.begin(), terms[j].labels.end());
    acc = contract(acc, terms[i], needed);
  }
  acc = sum_out(acc, [&](int l) { return out_set.count(l) > 0; });
  std::vector<int64_t> perm;
  for (int l : out_labels) {
    auto it = std::find(acc.labels.begin(), acc.labels.end(), l);
    perm.push_back(static_cast<int64_t>(it - acc.labels.begin()));
  }
  return set_weak(transpose(acc.x, perm), p.type.weak_type);
}

}  // namespace cujax::numpy
