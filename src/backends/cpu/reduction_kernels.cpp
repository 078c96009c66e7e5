// stablehlo.reduce: folds the reduced dimensions of N inputs with the body region, run in one of
// the ways region_scalars.h describes. The accumulator starts at the init value and takes the
// elements in ascending lexicographic order of their index (the spec's semantics).
// Large reductions with few outputs are split into fixed-size chunks (independent of the
// number of threads, so results are deterministic) whose partial results are combined in order.
#include <algorithm>
#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/region_scalars.h"

namespace cujax::cpu {

namespace {

using namespace regions;

// ---------------------------------------------------------------------------------------------
// Index helpers.

// Calls f(offset) for the linear indices [begin, end) of the row-major index space `sizes`, in
// order, where offset = sum(index[d] * strides[d]).
template <class F>
void walk(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, int64_t begin,
          int64_t end, F&& f) {
  if (begin >= end) return;
  const size_t r = sizes.size();
  if (r == 0) {
    f(int64_t{0});
    return;
  }
  std::array<int64_t, kMaxRank> idx{};
  int64_t rem = begin, off = 0;
  for (size_t d = r; d-- > 0;) {
    idx[d] = rem % sizes[d];
    rem /= sizes[d];
    off += idx[d] * strides[d];
  }
  int64_t n = end - begin;
  const int64_t inner = sizes[r - 1], istride = strides[r - 1];
  for (;;) {
    const int64_t run = std::min(inner - idx[r - 1], n);
    for (int64_t i = 0; i < run; ++i) f(off + i * istride);
    n -= run;
    if (n == 0) return;
    off += run * istride;
    idx[r - 1] += run;
    // carry
    size_t d = r - 1;
    while (idx[d] == sizes[d]) {
      off -= sizes[d] * strides[d];
      idx[d] = 0;
      if (d == 0) return;
      --d;
      ++idx[d];
      off += strides[d];
    }
  }
}

int64_t offset_of(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                  int64_t linear) {
  int64_t off = 0;
  for (size_t d = sizes.size(); d-- > 0;) {
    off += (linear % sizes[d]) * strides[d];
    linear /= sizes[d];
  }
  return off;
}

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// ---------------------------------------------------------------------------------------------
// reduce

struct ReducePlan {
  // Dimensions of size 1 dropped and neighbours of the same kind merged, outermost first.
  std::vector<int64_t> kept_sizes, kept_strides;
  std::vector<int64_t> red_sizes, red_strides;
  int64_t num_out = 1, num_red = 1;
  bool inner_kept = false;  // the innermost merged dimension is kept (contiguous outputs)
};

ReducePlan make_reduce_plan(const Shape& shape, const std::vector<bool>& reduced) {
  ReducePlan p;
  const auto strides = row_major_strides(shape);
  int last_kind = -1;  // 0 kept, 1 reduced
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    const int kind = reduced[d] ? 1 : 0;
    auto& sizes = kind ? p.red_sizes : p.kept_sizes;
    auto& strs = kind ? p.red_strides : p.kept_strides;
    if (kind == last_kind) {
      sizes.back() *= shape[d];
      strs.back() = strides[d];
    } else {
      sizes.push_back(shape[d]);
      strs.push_back(strides[d]);
    }
    last_kind = kind;
  }
  p.inner_kept = last_kind == 0;
  p.num_out = product(p.kept_sizes);
  p.num_red = product(p.red_sizes);
  return p;
}

template <class T, class Op>
void reduce_fast(const T* in, T* out, T init, const ReducePlan& p, Op op) {
  using Acc = Accum<T, kHalfAccumulateInFloat>;
  using A = typename Acc::A;
  const A a0 = Acc::load(init);
  if (p.num_out == 0) return;
  if (p.num_red == 0) {
    std::fill(out, out + p.num_out, init);
    return;
  }
  if (p.inner_kept) {
    // Rows of K contiguous outputs: acc[k] folds in[base + roff + k] over the reduced offsets.
    const int64_t K = p.kept_sizes.back();
    const std::vector<int64_t> outer_sizes(p.kept_sizes.begin(), p.kept_sizes.end() - 1);
    const std::vector<int64_t> outer_strides(p.kept_strides.begin(), p.kept_strides.end() - 1);
    const int64_t KC = std::min<int64_t>(K, 1024);
    const int64_t nkb = (K + KC - 1) / KC;
    const int64_t blocks = (p.num_out / K) * nkb;
    // At most 64 chunks, so the partial results stay small (<= 16 * 64 * 1024 values).
    const int64_t rows = std::max({int64_t{1}, kChunk / KC, (p.num_red + 63) / 64});
    const int64_t nc = (blocks < 16 && p.num_red > 2 * rows) ? (p.num_red + rows - 1) / rows : 1;
    // Not std::vector: vector<bool> packs bits, and threads write neighbouring partials.
    std::unique_ptr<A[]> partial(new A[nc > 1 ? blocks * nc * KC : 1]);
    parallel_for(blocks * nc, grain_for(std::min(p.num_red, rows) * KC), [&](int64_t b, int64_t e) {
      std::array<A, 1024> acc;
      for (int64_t t = b; t < e; ++t) {
        const int64_t blk = t / nc, c = t % nc;
        const int64_t ob = blk / nkb, k0 = (blk % nkb) * KC, kn = std::min(KC, K - k0);
        const int64_t base = offset_of(outer_sizes, outer_strides, ob) + k0;
        int64_t rb = nc > 1 ? c * rows : 0;
        const int64_t re = nc > 1 ? std::min(p.num_red, rb + rows) : p.num_red;
        if (c == 0) {
          std::fill(acc.begin(), acc.begin() + kn, a0);
        } else {
          const T* q = in + base + offset_of(p.red_sizes, p.red_strides, rb);
          for (int64_t k = 0; k < kn; ++k) acc[k] = Acc::load(q[k]);
          ++rb;
        }
        walk(p.red_sizes, p.red_strides, rb, re, [&](int64_t roff) {
          const T* q = in + base + roff;
          for (int64_t k = 0; k < kn; ++k) acc[k] = Acc::round(op(acc[k], Acc::load(q[k])));
        });
        if (nc == 1) {
          T* o = out + ob * K + k0;
          for (int64_t k = 0; k < kn; ++k) o[k] = Acc::store(acc[k]);
        } else {
          std::copy(acc.begin(), acc.begin() + kn, partial.get() + (blk * nc + c) * KC);
        }
      }
    });
    if (nc > 1) {
      for (int64_t blk = 0; blk < blocks; ++blk) {
        const int64_t ob = blk / nkb, k0 = (blk % nkb) * KC, kn = std::min(KC, K - k0);
        for (int64_t k = 0; k < kn; ++k) {
          A a = partial[(blk * nc) * KC + k];
          for (int64_t c = 1; c < nc; ++c) a = Acc::round(op(a, partial[(blk * nc + c) * KC + k]));
          out[ob * K + k0 + k] = Acc::store(a);
        }
      }
    }
    return;
  }
  // One accumulator per output, folding along the (contiguous innermost) reduced elements.
  const int64_t nc =
      (p.num_out < 64 && p.num_red > 2 * kChunk) ? (p.num_red + kChunk - 1) / kChunk : 1;
  if (nc == 1 && p.red_sizes.size() == 1 && p.red_strides[0] == 1) {
    // Rows of contiguous elements, eight at a time: each row still folds in order (the same
    // result), but the eight chains of dependent adds overlap instead of waiting on each other.
    constexpr int64_t kRows = 8;
    const int64_t R = p.num_red;
    parallel_for((p.num_out + kRows - 1) / kRows, grain_for(kRows * R), [&](int64_t b, int64_t e) {
      for (int64_t g = b; g < e; ++g) {
        const int64_t o0 = g * kRows, count = std::min(kRows, p.num_out - o0);
        const T* q[kRows];
        A acc[kRows];
        for (int64_t r = 0; r < kRows; ++r) {
          // A short last group repeats its last row rather than branching in the loop.
          q[r] = in + offset_of(p.kept_sizes, p.kept_strides, o0 + std::min(r, count - 1));
          acc[r] = a0;
        }
        for (int64_t i = 0; i < R; ++i)
          for (int64_t r = 0; r < kRows; ++r) acc[r] = Acc::round(op(acc[r], Acc::load(q[r][i])));
        for (int64_t r = 0; r < count; ++r) out[o0 + r] = Acc::store(acc[r]);
      }
    });
    return;
  }
  std::unique_ptr<A[]> partial(new A[nc > 1 ? p.num_out * nc : 1]);
  parallel_for(p.num_out * nc, grain_for(std::min(p.num_red, kChunk)), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t / nc, c = t % nc;
      const int64_t base = offset_of(p.kept_sizes, p.kept_strides, o);
      int64_t rb = nc > 1 ? c * kChunk : 0;
      const int64_t re = nc > 1 ? std::min(p.num_red, rb + kChunk) : p.num_red;
      A acc = a0;
      if (c > 0) acc = Acc::load(in[base + offset_of(p.red_sizes, p.red_strides, rb++)]);
      const T* q = in + base;
      walk(p.red_sizes, p.red_strides, rb, re,
           [&](int64_t roff) { acc = Acc::round(op(acc, Acc::load(q[roff]))); });
      if (nc == 1)
        out[o] = Acc::store(acc);
      else
        partial[o * nc + c] = acc;
    }
  });
  if (nc > 1) {
    for (int64_t o = 0; o < p.num_out; ++o) {
      A a = partial[o * nc];
      for (int64_t c = 1; c < nc; ++c) a = Acc::round(op(a, partial[o * nc + c]));
      out[o] = Acc::store(a);
    }
  }
}

Kernel reduce_kernel(const ir::Operation& op, Compiler& cc) {
  const std::vector<ir::Type> types = reduction_operand_types(op);
  const Shape in_shape = types[0].shape;
  const std::vector<int64_t> dims = required_ints(op, "dimensions");
  std::vector<bool> reduced(in_shape.size(), false);
  for (int64_t d : dims) {
    if (d < 0 || d >= static_cast<int64_t>(in_shape.size()) || reduced[d])
      unsupported(op, "invalid or repeated dimension " + std::to_string(d));
    reduced[d] = true;
  }
  Shape out_shape;
  for (size_t d = 0; d < in_shape.size(); ++d)
    if (!reduced[d]) out_shape.push_back(in_shape[d]);
  check_result_shapes(op, out_shape);
  const ReducePlan plan = make_reduce_plan(in_shape, reduced);

  if (types.size() == 2)  // one input
    if (auto bop = simple_binop(*op.regions[0], types[0].dtype))
      return binop_reduction_kernel(op, types, out_shape, *bop,
                                    [plan](const auto* x, auto* y, auto init, auto fn) {
                                      reduce_fast(x, y, init, plan, fn);
                                    });

  return region_reduction_kernel(
      op, cc, types, out_shape, plan.num_out, plan.num_red, [plan](int64_t o, const auto& visit) {
        const int64_t base = offset_of(plan.kept_sizes, plan.kept_strides, o);
        walk(plan.red_sizes, plan.red_strides, 0, plan.num_red,
             [&](int64_t roff) { visit(true, base + roff); });
      });
}

}  // namespace

void register_reduction_kernels(KernelRegistry& r) {
  r.add("stablehlo.reduce", reduce_kernel);
}

}  // namespace cujax::cpu
