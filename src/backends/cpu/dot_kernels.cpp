// Matrix products: dot_general and the legacy dot. The accumulator types and the GEMM, which
// convolution and triangular_solve use too, are in product_common.h.
//
// Operands are copied into a [batch, rows, depth] layout only when their own layout cannot be
// handed to the GEMM as it is (a transpose folds into the GEMM's trans flags).
#include <algorithm>
#include <memory>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/linalg_kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/product_common.h"

namespace cujax::cpu {

namespace {

using namespace products;

constexpr int64_t kBlasMinFlops = 1 << 12;  // smaller batched products skip CBLAS

// ------------------------------------------------------------------ dot_general

// An operand the GEMM reads where it is stored: batch element i is the matrix at offsets[i]
// with rows ld apart and contiguous columns (or, when trans, its transpose). The batch may
// sit between the rows and the columns, as attention's (batch, seq, heads, head_dim) does.
struct InPlace {
  bool ok = false, trans = false;
  int64_t ld = 1;
  std::vector<int64_t> offsets;
};

struct DotPlan {
  DType lhs_dtype, rhs_dtype, out_dtype;
  Shape out_shape;
  AccKind acc;
  int64_t B = 1, M = 1, N = 1, K = 1;
  View lhs_view, rhs_view;  // into [B, M, K] and [B, K, N]
  // How the GEMM reads an operand as stored (when its dtype is the accumulator's).
  InPlace lhs_place, rhs_place;
  bool blas_ok = true;  // every extent fits CBLAS's int
};

// The stride of `dims` read as one index in order (the last fastest), 0 when all have size 1,
// -1 when they do not merge; `extent` is their product.
int64_t merged_stride(const Shape& shape, const std::vector<int64_t>& strides,
                      const std::vector<int64_t>& dims, int64_t& extent) {
  int64_t stride = 0, expected = 0;
  extent = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    const int64_t d = dims[i];
    if (shape[d] == 1) continue;
    if (stride == 0)
      stride = strides[d];
    else if (strides[d] != expected)
      return -1;
    expected = strides[d] * shape[d];
    extent *= shape[d];
  }
  return stride;
}

// `rows` and `cols` are the operand's dimensions that make op(X)'s rows and columns, in order.
InPlace in_place(const Shape& shape, const std::vector<int64_t>& batch,
                 const std::vector<int64_t>& rows, const std::vector<int64_t>& cols) {
  const std::vector<int64_t> st = row_major_strides(shape);
  int64_t nr = 1, nc = 1;
  const int64_t rs = merged_stride(shape, st, rows, nr), cs = merged_stride(shape, st, cols, nc);
  InPlace p;
  if (rs < 0 || cs < 0) return p;
  if (cs <= 1 && (nr == 1 || rs >= nc)) {
    p.ok = true;
    p.ld = nr == 1 ? std::max<int64_t>(1, nc) : rs;
  } else if (rs <= 1 && (nc == 1 || cs >= nr)) {
    p.ok = p.trans = true;
    p.ld = nc == 1 ? std::max<int64_t>(1, nr) : cs;
  } else {
    return p;
  }
  int64_t count = 1;
  for (int64_t d : batch) count *= shape[d];
  p.offsets.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    int64_t rem = i, off = 0;
    for (size_t j = batch.size(); j-- > 0;) {
      off += (rem % shape[batch[j]]) * st[batch[j]];
      rem /= shape[batch[j]];
    }
    p.offsets[static_cast<size_t>(i)] = off;
  }
  return p;
}

std::vector<int64_t> concat(std::initializer_list<const std::vector<int64_t>*> parts) {
  std::vector<int64_t> out;
  for (const auto* p : parts) out.insert(out.end(), p->begin(), p->end());
  return out;
}

// Dimensions of `rank` not in `a` or `b`, ascending.
std::vector<int64_t> free_dims(int64_t rank, const std::vector<int64_t>& a,
                               const std::vector<int64_t>& b) {
  std::vector<int64_t> out;
  for (int64_t d = 0; d < rank; ++d)
    if (std::find(a.begin(), a.end(), d) == a.end() && std::find(b.begin(), b.end(), d) == b.end())
      out.push_back(d);
  return out;
}

template <class A>
std::vector<HostTensor> run_dot(const DotPlan& p, const HostTensor& lhs, const HostTensor& rhs) {
  if (num_elements(p.out_shape) == 0 || p.K == 0) return {HostTensor(p.out_dtype, p.out_shape)};
  // Every path below writes all of C, so it needs no zero fill.
  HostTensor out = HostTensor::uninitialized(p.out_dtype, p.out_shape);
  const int64_t B = p.B, M = p.M, N = p.N, K = p.K;
  constexpr bool kFloat = std::is_floating_point_v<A>;
  const bool blas = kFloat && p.blas_ok && (B == 1 || M * N * K >= kBlasMinFlops);

  const A* a;
  bool ta = false;
  int64_t lda = K;
  const int64_t* a_at = nullptr;  // per batch element, when read in place
  std::unique_ptr<A[]> abuf;
  if (blas && p.lhs_place.ok && lhs.dtype() == dtype_of<A>()) {
    a = lhs.data_as<A>();
    ta = p.lhs_place.trans;
    lda = p.lhs_place.ld;
    a_at = p.lhs_place.offsets.data();
  } else if (lhs.dtype() == dtype_of<A>() && p.lhs_view.contiguous() && p.lhs_view.offset == 0) {
    a = lhs.data_as<A>();
  } else {
    abuf = uninitialized<A>(B * M * K);
    load_as(lhs, p.lhs_view, abuf.get());
    a = abuf.get();
  }
  const A* b;
  bool tb = false;
  int64_t ldb = N;
  const int64_t* b_at = nullptr;
  std::unique_ptr<A[]> bbuf;
  if (blas && p.rhs_place.ok && rhs.dtype() == dtype_of<A>()) {
    b = rhs.data_as<A>();
    tb = p.rhs_place.trans;
    ldb = p.rhs_place.ld;
    b_at = p.rhs_place.offsets.data();
  } else if (rhs.dtype() == dtype_of<A>() && p.rhs_view.contiguous() && p.rhs_view.offset == 0) {
    b = rhs.data_as<A>();
  } else {
    bbuf = uninitialized<A>(B * K * N);
    load_as(rhs, p.rhs_view, bbuf.get());
    b = bbuf.get();
  }
  A* c;
  std::unique_ptr<A[]> cbuf;
  if (out.dtype() == dtype_of<A>()) {
    c = out.data_as<A>();
  } else {
    cbuf = uninitialized<A>(B * M * N);
    c = cbuf.get();
  }

  const int64_t grain = std::max<int64_t>(1, kGemmGrainFlops / std::max<int64_t>(1, M * N * K));
  // Batches of small products, or enough products to keep every thread busy (attention's 64
  // of 128 x 32 x 128 per layer), spread whole products over the threads.
  const bool by_product =
      B > 1 && (M * N * K <= kBlasSingleThreadFlops || B >= kGemmBlocksPerThread * num_threads());
  auto product = [&](int64_t i) {
    matmul<A>(M, N, K, a + (a_at ? a_at[i] : i * M * K), lda, ta, b + (b_at ? b_at[i] : i * K * N),
              ldb, tb, c + i * M * N, N);
  };
  if (blas && by_product) {
    parallel_for(B, grain, [&](int64_t b0, int64_t b1) {
      for (int64_t i = b0; i < b1; ++i) product(i);
    });
  } else if (blas) {
    for (int64_t i = 0; i < B; ++i) product(i);
  } else if (B > 1) {
    // Many small products: several per task.
    parallel_for(B, grain, [&](int64_t b0, int64_t b1) {
      for (int64_t i = b0; i < b1; ++i)
        gemm_rows<A>(0, M, N, K, a + i * M * K, K, b + i * K * N, N, c + i * M * N, N);
    });
  } else {
    gemm_loops<A>(M, N, K, a, K, b, N, c, N);
  }

  if (cbuf) store_from(c, View::flat(B * M * N), out);
  return {out};
}

struct DotDims {
  std::vector<int64_t> lb, rb, lc, rc;
};

Kernel dot_kernel_for(const ir::Operation& op, const DotDims& dims) {
  if (op.operands.size() != 2 || op.results.size() != 1) unsupported(op, "takes two operands");
  const ir::Type& lt = op.operands[0]->type;
  const ir::Type& rt = op.operands[1]->type;
  const ir::Type& ot = op.result(0)->type;
  if (lt.is_token || rt.is_token || ot.is_token) unsupported(op, "needs tensor operands");
  const int64_t lr = lt.rank(), rr = rt.rank();
  if (dims.lb.size() != dims.rb.size()) unsupported(op, "batching dimension lists differ in size");
  if (dims.lc.size() != dims.rc.size())
    unsupported(op, "contracting dimension lists differ in size");
  auto check_side = [&](const std::vector<int64_t>& batch, const std::vector<int64_t>& contract,
                        int64_t rank, const char* side) {
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    for (const auto* list : {&batch, &contract})
      for (int64_t d : *list) {
        if (d < 0 || d >= rank || seen[d])
          unsupported(
              op, std::string("invalid or repeated ") + side + " dimension " + std::to_string(d));
        seen[d] = true;
      }
  };
  check_side(dims.lb, dims.lc, lr, "lhs");
  check_side(dims.rb, dims.rc, rr, "rhs");
  for (size_t i = 0; i < dims.lb.size(); ++i)
    if (lt.shape[dims.lb[i]] != rt.shape[dims.rb[i]])
      unsupported(op, "batching dimension sizes differ");
  for (size_t i = 0; i < dims.lc.size(); ++i)
    if (lt.shape[dims.lc[i]] != rt.shape[dims.rc[i]])
      unsupported(op, "contracting dimension sizes differ");

  const auto lf = free_dims(lr, dims.lb, dims.lc);
  const auto rf = free_dims(rr, dims.rb, dims.rc);
  auto p = std::make_shared<DotPlan>();
  p->lhs_dtype = lt.dtype;
  p->rhs_dtype = rt.dtype;
  p->out_dtype = ot.dtype;
  p->out_shape = ot.shape;
  p->acc = choose_acc(lt.dtype, rt.dtype, ot.dtype);
  Shape expect;
  for (int64_t d : dims.lb) {
    expect.push_back(lt.shape[d]);
    p->B *= lt.shape[d];
  }
  for (int64_t d : lf) {
    expect.push_back(lt.shape[d]);
    p->M *= lt.shape[d];
  }
  for (int64_t d : rf) {
    expect.push_back(rt.shape[d]);
    p->N *= rt.shape[d];
  }
  for (int64_t d : dims.lc) p->K *= lt.shape[d];
  if (expect != ot.shape)
    unsupported(op, "result shape " + shape_to_string(ot.shape) + " does not match " +
                        shape_to_string(expect));

  // Any pairing order of the contracting dimensions is valid; prefer one that lets both
  // operands go to the GEMM as they are.
  std::vector<size_t> order(dims.lc.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<std::vector<size_t>> candidates = {order};
  auto by_lhs = order, by_rhs = order;
  std::sort(by_lhs.begin(), by_lhs.end(),
            [&](size_t x, size_t y) { return dims.lc[x] < dims.lc[y]; });
  std::sort(by_rhs.begin(), by_rhs.end(),
            [&](size_t x, size_t y) { return dims.rc[x] < dims.rc[y]; });
  candidates.push_back(by_lhs);
  candidates.push_back(by_rhs);
  int best_score = -1;
  for (const auto& ord : candidates) {
    std::vector<int64_t> lc, rc;
    for (size_t i : ord) {
      lc.push_back(dims.lc[i]);
      rc.push_back(dims.rc[i]);
    }
    InPlace lp = in_place(lt.shape, dims.lb, lf, lc), rp = in_place(rt.shape, dims.rb, rc, rf);
    const int score = lp.ok + rp.ok;
    if (score > best_score) {
      best_score = score;
      p->lhs_place = std::move(lp);
      p->rhs_place = std::move(rp);
      p->lhs_view = View::permuted(lt.shape, concat({&dims.lb, &lf, &lc}));
      p->rhs_view = View::permuted(rt.shape, concat({&dims.rb, &rc, &rf}));
    }
  }
  p->blas_ok = fits_blas_int(p->M) && fits_blas_int(p->N) && fits_blas_int(p->K);

  return [p](std::span<const HostTensor> in, ExecContext&) {
    return visit_acc(p->acc, [&](auto tag) {
      using A = typename decltype(tag)::type;
      return run_dot<A>(*p, in[0], in[1]);
    });
  };
}

Kernel dot_general_kernel(const ir::Operation& op, Compiler&) {
  const ir::Attribute* dn = op.attr("dot_dimension_numbers");
  if (dn && dn->kind != ir::Attribute::Kind::Struct && dn->kind != ir::Attribute::Kind::Dictionary)
    unsupported(op, "dot_dimension_numbers must be a #stablehlo.dot attribute");
  DotDims d;
  try {
    d.lb = struct_ints(dn, "lhs_batching_dimensions");
    d.rb = struct_ints(dn, "rhs_batching_dimensions");
    d.lc = struct_ints(dn, "lhs_contracting_dimensions");
    d.rc = struct_ints(dn, "rhs_contracting_dimensions");
  } catch (const Error& e) {
    unsupported(op, std::string("bad dot_dimension_numbers: ") + e.what());
  }
  return dot_kernel_for(op, d);
}

// The legacy stablehlo.dot: vector/matrix products contracting lhs's last and rhs's first dim.
Kernel dot_kernel(const ir::Operation& op, Compiler&) {
  if (op.operands.size() != 2) unsupported(op, "takes two operands");
  const int64_t lr = op.operands[0]->type.rank(), rr = op.operands[1]->type.rank();
  if (lr < 1 || lr > 2 || rr < 1 || rr > 2) unsupported(op, "needs rank 1 or 2 operands");
  DotDims d;
  d.lc = {lr - 1};
  d.rc = {0};
  return dot_kernel_for(op, d);
}

}  // namespace

void register_dot_kernels(KernelRegistry& r) {
  r.add("stablehlo.dot_general", dot_general_kernel);
  r.add("stablehlo.dot", dot_kernel);
}

}  // namespace cujax::cpu
