// stablehlo.triangular_solve on the CPU backend.
//
// triangular_solve follows XLA's TriangularSolveExpander, which is what produced the expected
// values JAX programs are checked against: diagonal blocks (128 wide) are inverted row by row,
// then the solution is built block by block with matrix products; small matrices in large
// batches use direct substitution. Products use fused multiply-adds in a fixed order, so the
// results are the same on every machine.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/linalg_kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/product_common.h"

namespace cujax::cpu {

namespace {

using namespace products;

constexpr int64_t kTrsmBlock = 128;  // XLA's TriangularSolveExpander block size

// acc[i] = fma(a, x[i], acc[i]); one rounding per element, so every build gives the same bits.
__attribute__((target_clones("fma", "default"))) void fma_row(float* __restrict acc, float a,
                                                              const float* __restrict x,
                                                              int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] = std::fma(a, x[i], acc[i]);
}
__attribute__((target_clones("fma", "default"))) void fma_row(double* __restrict acc, double a,
                                                              const double* __restrict x,
                                                              int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] = std::fma(a, x[i], acc[i]);
}

struct TrsmPlan {
  DType dtype;
  Shape b_shape;
  int64_t batch = 1, n = 0, rows = 0, cols = 0;  // b is [batch, rows, cols]
  bool left = true, lower = true, unit = false, transpose = false;
  bool direct = false;  // substitution instead of inverted diagonal blocks
};

// Products of a row vector with a matrix: out[0..w) = sum_k coef[k] * mat[k * ld ..], summed in
// ascending k with fused multiply-adds, in one accumulator or (as XLA's matrix-matrix products
// do) two interleaved ones (even and odd k) added at the end.
template <class T>
struct RowProduct {
  std::vector<T> even, odd;
  void run(const T* coef, int64_t coef_stride, int64_t nk, const T* mat, int64_t ld, int64_t w,
           bool two_lanes, T* out) {
    even.assign(w, T(0));
    if (two_lanes) odd.assign(w, T(0));
    for (int64_t k = 0; k < nk; ++k) {
      T* acc = (two_lanes && (k & 1)) ? odd.data() : even.data();
      fma_row(acc, coef[k * coef_stride], mat + k * ld, w);
    }
    if (two_lanes) {
      for (int64_t i = 0; i < w; ++i) out[i] = even[i] + odd[i];
    } else {
      std::copy_n(even.data(), w, out);
    }
  }
};

// Solves one batch element in place: `x` holds b ([rows, cols]) on entry and the solution on
// exit; `a` is [n, n].
template <class T>
void trsm_one(const TrsmPlan& p, const T* a, T* x) {
  const int64_t n = p.n, rows = p.rows, cols = p.cols;
  if (rows * cols == 0) return;
  if (n == 1) {
    if (!p.unit)
      for (int64_t i = 0; i < rows * cols; ++i) x[i] = x[i] / a[0];
    return;
  }
  // op(a) with the ignored triangle zeroed and, for unit_diagonal, ones on the diagonal.
  std::vector<T> m(n * n, T(0));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const bool keep = p.lower ? (j < i || (j == i && !p.unit)) : (j > i || (j == i && !p.unit));
      T v = keep ? a[i * n + j] : T(0);
      if (i == j && p.unit) v = T(1);
      if (p.transpose) {
        m[j * n + i] = v;
      } else {
        m[i * n + j] = v;
      }
    }
  const bool t_lower = p.lower != p.transpose;  // op(a) is lower triangular
  // Left: op(a) x = b, rows of x independent of nothing, columns independent of each other.
  // Right: x op(a) = b, rows of x independent of each other.
  const bool forward = p.left ? t_lower : !t_lower;

  if (p.direct) {
    if (p.left) {
      parallel_for(cols, std::max<int64_t>(1, 4096 / (n * n)), [&](int64_t c0, int64_t c1) {
        const int64_t w = c1 - c0;
        RowProduct<T> rp;
        std::vector<T> dot(w);
        for (int64_t s = 0; s < n; ++s) {
          const int64_t j = forward ? s : n - 1 - s;
          const int64_t k0 = forward ? 0 : j + 1, k1 = forward ? j : n;
          T* xr = x + j * cols + c0;
          if (k1 > k0) {
            rp.run(m.data() + j * n + k0, 1, k1 - k0, x + k0 * cols + c0, cols, w, false,
                   dot.data());
            for (int64_t i = 0; i < w; ++i) xr[i] = xr[i] - dot[i];
          }
          if (!p.unit)
            for (int64_t i = 0; i < w; ++i) xr[i] = xr[i] / m[j * n + j];
        }
      });
    } else {
      parallel_for(rows, std::max<int64_t>(1, 4096 / (n * n)), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          T* xr = x + r * n;
          for (int64_t s = 0; s < n; ++s) {
            const int64_t j = forward ? s : n - 1 - s;
            const int64_t k0 = forward ? 0 : j + 1, k1 = forward ? j : n;
            T acc = T(0);
            for (int64_t k = k0; k < k1; ++k) acc = std::fma(xr[k], m[k * n + j], acc);
            T v = k1 > k0 ? xr[j] - acc : xr[j];
            if (!p.unit) v = v / m[j * n + j];
            xr[j] = v;
          }
        }
      });
    }
    return;
  }

  // Invert the diagonal blocks of the (untransposed, masked) matrix, then transpose the
  // inverses along with it.
  const int64_t bs = std::min(kTrsmBlock, n);
  const int64_t nb = (n + bs - 1) / bs;
  std::vector<std::vector<T>> inv(nb);
  for (int64_t blk = 0; blk < nb; ++blk) {
    const int64_t j0 = blk * bs, r = std::min(bs, n - j0);
    auto at = [&](int64_t i, int64_t j) {  // masked a (not transposed), block-local
      return p.transpose ? m[(j0 + j) * n + j0 + i] : m[(j0 + i) * n + j0 + j];
    };
    std::vector<T> d(r), sc(r * r), out(r * r, T(0)), acc(r);
    for (int64_t i = 0; i < r; ++i) d[i] = at(i, i) == T(0) ? T(1) : at(i, i);
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < r; ++j) sc[i * r + j] = at(i, j) / d[j];
    for (int64_t i = 0; i < r; ++i) out[i * r + i] = T(-1);
    const int64_t first = p.lower ? 0 : r - 1;
    out[first * r + first] = T(1);
    for (int64_t it = 1; it < r; ++it) {
      const int64_t j = p.lower ? it : r - 1 - it;
      std::fill(acc.begin(), acc.end(), T(0));
      for (int64_t k = 0; k < r; ++k) fma_row(acc.data(), sc[j * r + k], out.data() + k * r, r);
      for (int64_t c = 0; c < r; ++c) out[j * r + c] = -acc[c];
    }
    auto& iv = inv[blk];
    iv.resize(r * r);
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < r; ++j) {
        const T v = out[i * r + j] / d[i];
        if (p.transpose) {
          iv[j * r + i] = v;
        } else {
          iv[i * r + j] = v;
        }
      }
  }

  if (p.left) {
    // Columns of x are independent.
    parallel_for(cols, std::max<int64_t>(1, 4096 / (n * n)), [&](int64_t c0, int64_t c1) {
      const int64_t w = c1 - c0;
      RowProduct<T> rp;
      std::vector<T> rem(bs * w), dot(w);
      for (int64_t s = 0; s < nb; ++s) {
        const int64_t blk = forward ? s : nb - 1 - s;
        const int64_t j0 = blk * bs, r = std::min(bs, n - j0);
        const int64_t k0 = forward ? 0 : j0 + r, k1 = forward ? j0 : n;
        const bool lanes = r > 1 && cols > 1;
        for (int64_t i = 0; i < r; ++i) {
          std::copy_n(x + (j0 + i) * cols + c0, w, rem.data() + i * w);
          if (s > 0 && k1 > k0) {
            rp.run(m.data() + (j0 + i) * n + k0, 1, k1 - k0, x + k0 * cols + c0, cols, w, lanes,
                   dot.data());
            for (int64_t c = 0; c < w; ++c) rem[i * w + c] = rem[i * w + c] - dot[c];
          }
        }
        for (int64_t i = 0; i < r; ++i)
          rp.run(inv[blk].data() + i * r, 1, r, rem.data(), w, w, lanes, x + (j0 + i) * cols + c0);
      }
    });
  } else {
    // Rows of x are independent.
    parallel_for(rows, std::max<int64_t>(1, 4096 / (n * n)), [&](int64_t r0, int64_t r1) {
      RowProduct<T> rp;
      std::vector<T> rem(bs), dot(bs);
      for (int64_t q = r0; q < r1; ++q) {
        T* xr = x + q * n;
        for (int64_t s = 0; s < nb; ++s) {
          const int64_t blk = forward ? s : nb - 1 - s;
          const int64_t j0 = blk * bs, r = std::min(bs, n - j0);
          const int64_t k0 = forward ? 0 : j0 + r, k1 = forward ? j0 : n;
          const bool lanes = r > 1 && rows > 1;
          std::copy_n(xr + j0, r, rem.data());
          if (s > 0 && k1 > k0) {
            rp.run(xr + k0, 1, k1 - k0, m.data() + k0 * n + j0, n, r, lanes, dot.data());
            for (int64_t c = 0; c < r; ++c) rem[c] = rem[c] - dot[c];
          }
          rp.run(rem.data(), 1, r, inv[blk].data(), r, r, lanes, xr + j0);
        }
      }
    });
  }
}

template <class T>
void run_trsm(const TrsmPlan& p, const T* a, T* x) {
  const int64_t asz = p.n * p.n, bsz = p.rows * p.cols;
  parallel_for(p.batch, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t i = b0; i < b1; ++i) trsm_one(p, a + i * asz, x + i * bsz);
  });
}

bool bool_attr(const ir::Operation& op, const char* name) {
  const ir::Attribute* a = op.attr(name);
  if (!a) unsupported(op, std::string("needs the ") + name + " attribute");
  if (a->kind == ir::Attribute::Kind::Bool) return a->boolean;
  if (a->kind == ir::Attribute::Kind::Unit) return true;
  if (a->kind == ir::Attribute::Kind::Integer) return a->integer != 0;
  unsupported(op, std::string(name) + " must be a boolean");
}

Kernel triangular_solve_kernel(const ir::Operation& op, Compiler&) {
  if (op.operands.size() != 2 || op.results.size() != 1) unsupported(op, "takes two operands");
  const ir::Type& at = op.operands[0]->type;
  const ir::Type& bt = op.operands[1]->type;
  if (op.result(0)->type != bt) unsupported(op, "result type must equal b's type");
  if (!is_float(at.dtype) || at.dtype != bt.dtype)
    unsupported(op, "needs floating-point operands of one type");
  const int64_t rank = at.rank();
  if (rank < 2 || bt.rank() != rank) unsupported(op, "operands need the same rank >= 2");
  auto p = std::make_shared<TrsmPlan>();
  p->dtype = at.dtype;
  p->b_shape = bt.shape;
  p->left = bool_attr(op, "left_side");
  p->lower = bool_attr(op, "lower");
  p->unit = bool_attr(op, "unit_diagonal");
  const ir::Attribute* tr = op.attr("transpose_a");
  std::string t = "NO_TRANSPOSE";
  if (tr) {
    if (tr->kind == ir::Attribute::Kind::Enum) {
      t = tr->enum_value;
    } else if (tr->kind == ir::Attribute::Kind::String) {
      t = tr->text;
    } else {
      unsupported(op, "transpose_a must be a #stablehlo<transpose> enum");
    }
  }
  if (t == "NO_TRANSPOSE") {
    p->transpose = false;
  } else if (t == "TRANSPOSE" || t == "ADJOINT") {
    p->transpose = true;  // the adjoint of a real matrix is its transpose
  } else {
    unsupported(op, "unknown transpose_a value " + t);
  }
  p->n = at.shape[rank - 1];
  if (at.shape[rank - 2] != p->n) unsupported(op, "a must be square in its last two dims");
  for (int64_t d = 0; d < rank - 2; ++d) {
    if (at.shape[d] != bt.shape[d]) unsupported(op, "batch dimensions of a and b differ");
    p->batch *= at.shape[d];
  }
  p->rows = bt.shape[rank - 2];
  p->cols = bt.shape[rank - 1];
  if ((p->left ? p->rows : p->cols) != p->n)
    unsupported(op, "b's " + std::string(p->left ? "rows" : "columns") + " must match a");
  // XLA solves directly when the batch is large and the matrices small.
  p->direct = p->batch > kTrsmBlock / 16 && p->n < kTrsmBlock / 4;

  return [p](std::span<const HostTensor> in, ExecContext&) {
    const HostTensor& a = in[0];
    const HostTensor& b = in[1];
    HostTensor out(p->dtype, p->b_shape);
    if (out.size() == 0) return std::vector<HostTensor>{out};
    if (p->dtype == DType::F64) {
      std::memcpy(out.data(), b.data(), b.nbytes());
      run_trsm<double>(*p, a.data_as<double>(), out.data_as<double>());
      return std::vector<HostTensor>{out};
    }
    if (p->dtype == DType::F32) {
      std::memcpy(out.data(), b.data(), b.nbytes());
      run_trsm<float>(*p, a.data_as<float>(), out.data_as<float>());
      return std::vector<HostTensor>{out};
    }
    // f16 / bf16: solve in f32 and round once.
    const View va = View::flat(a.size()), vb = View::flat(b.size());
    auto af = uninitialized<float>(a.size());
    auto xf = uninitialized<float>(b.size());
    load_as(a, va, af.get());
    load_as(b, vb, xf.get());
    run_trsm<float>(*p, af.get(), xf.get());
    store_from(xf.get(), vb, out);
    return std::vector<HostTensor>{out};
  };
}

}  // namespace

void register_triangular_solve_kernels(KernelRegistry& r) {
  r.add("stablehlo.triangular_solve", triangular_solve_kernel);
}

}  // namespace cujax::cpu
