// stablehlo.convolution on the CPU backend.
//
// Convolution gathers input windows into rows (im2col, in bounded chunks) and multiplies them
// with the kernel (the GEMM of product_common.h); 1x1 convolutions without padding or dilation
// use the input directly.
#include <algorithm>
#include <memory>
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

constexpr int64_t kIm2colBudget = 1 << 20;  // elements of one im2col chunk

struct ConvPlan {
  DType out_dtype;
  Shape out_shape;
  AccKind acc;
  int64_t nsp = 0;              // spatial dimensions
  int64_t N = 0, C = 0, O = 0;  // input batch, input features, kernel output features
  int64_t Nout = 0, G = 1, Cg = 0, Og = 0;
  int64_t fgc = 1, bgc = 1;
  Shape in_sp, k_sp, out_sp;
  int64_t S = 1, Wk = 1, P = 1;            // products of the spatial extents
  std::vector<int64_t> in_sp_stride;       // stride of each spatial dim in the canonical input
  std::vector<std::vector<int64_t>> taps;  // [d][p * k_sp[d] + k] -> input index, or -1
  bool pointwise = false;
  View in_view;   // lhs -> [N, S..., C]
  View k_view;    // rhs -> [G, Wk..., Cg, Og], window reversal applied
  View out_view;  // [Nout, P..., O] -> result layout
};

// One im2col row: the windows of output row `row` (reading input batch group `bg`), laid out
// [feature group][kernel position][feature in group], zero where a window leaves the input.
template <class A>
void im2col_row(const ConvPlan& p, const A* x, int64_t bg, int64_t row, A* dst) {
  const int64_t np = row / p.P;
  int64_t pflat = row % p.P;
  int64_t pos[8];
  std::vector<int64_t> pos_big;
  int64_t* pidx = pos;
  if (p.nsp > 8) {
    pos_big.resize(p.nsp);
    pidx = pos_big.data();
  }
  for (int64_t d = p.nsp - 1; d >= 0; --d) {
    pidx[d] = pflat % p.out_sp[d];
    pflat /= p.out_sp[d];
  }
  const A* xb = x + (bg * p.Nout + np) * p.S * p.C;
  const int64_t cg = p.Cg, wk = p.Wk;
  for (int64_t kflat = 0; kflat < wk; ++kflat) {
    int64_t rem = kflat, off = 0;
    bool valid = true;
    for (int64_t d = p.nsp - 1; d >= 0; --d) {
      const int64_t k = rem % p.k_sp[d];
      rem /= p.k_sp[d];
      const int64_t t = p.taps[d][pidx[d] * p.k_sp[d] + k];
      if (t < 0) {
        valid = false;
        break;
      }
      off += t * p.in_sp_stride[d];
    }
    for (int64_t g = 0; g < p.fgc; ++g) {
      A* o = dst + (g * wk + kflat) * cg;
      if (cg == 1) {
        o[0] = valid ? xb[off + g] : A(0);
      } else if (valid) {
        std::copy_n(xb + off + g * cg, cg, o);
      } else {
        std::fill_n(o, cg, A(0));
      }
    }
  }
}

template <class A>
std::vector<HostTensor> run_conv(const ConvPlan& p, const HostTensor& lhs, const HostTensor& rhs) {
  HostTensor out(p.out_dtype, p.out_shape);
  if (out.size() == 0) return {out};
  const int64_t depth = p.Wk * p.Cg;  // one group's share of an im2col row
  const int64_t width = depth * p.fgc;
  auto y = uninitialized<A>(out.size());
  if (depth == 0 || lhs.size() == 0) {
    std::fill_n(y.get(), out.size(), A(0));
  } else {
    auto x = uninitialized<A>(lhs.size());
    load_as(lhs, p.in_view, x.get());
    auto kc = uninitialized<A>(rhs.size());
    load_as(rhs, p.k_view, kc.get());
    const int64_t rows = p.Nout * p.P;
    // Batch groups read different input rows; feature groups share one im2col row each.
    // Products of many narrow groups (depthwise) run in our loops, a block of rows per task,
    // rather than as one BLAS call per group.
    constexpr bool kBlas = std::is_floating_point_v<A>;
    const bool loops = !kBlas || p.Og * depth <= 1024;
    for (int64_t bg = 0; bg < p.bgc; ++bg) {
      const int64_t yoff = p.bgc > 1 ? bg * p.Og : 0;
      const A* kb = kc.get() + (p.bgc > 1 ? bg * depth * p.Og : 0);
      auto kernel_of = [&](int64_t g) { return kb + g * depth * p.Og; };
      if (p.pointwise) {
        const A* a = x.get() + bg * p.Nout * p.S * p.C;
        for (int64_t g = 0; g < p.fgc; ++g)
          matmul<A>(rows, p.Og, depth, a + g * depth, p.C, false, kernel_of(g), p.Og, false,
                    y.get() + yoff + g * p.Og, p.O);
        continue;
      }
      if (loops) {
        constexpr int64_t kRows = 64;
        const int64_t blocks = (rows + kRows - 1) / kRows;
        const int64_t flops = kRows * width * p.Og;
        parallel_for(
            blocks, std::max<int64_t>(1, kGemmGrainFlops / flops), [&](int64_t b0, int64_t b1) {
              auto col = uninitialized<A>(kRows * width);
              for (int64_t blk = b0; blk < b1; ++blk) {
                const int64_t r0 = blk * kRows, nr = std::min(kRows, rows - r0);
                for (int64_t i = 0; i < nr; ++i)
                  im2col_row(p, x.get(), bg, r0 + i, col.get() + i * width);
                for (int64_t g = 0; g < p.fgc; ++g)
                  gemm_rows<A>(0, nr, p.Og, depth, col.get() + g * depth, width, kernel_of(g), p.Og,
                               y.get() + r0 * p.O + yoff + g * p.Og, p.O);
              }
            });
        continue;
      }
      const int64_t chunk = std::clamp<int64_t>(kIm2colBudget / width, 1, rows);
      auto col = uninitialized<A>(chunk * width);
      for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t nr = std::min(chunk, rows - r0);
        parallel_for(nr, std::max<int64_t>(1, kCopyGrain / width), [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) im2col_row(p, x.get(), bg, r0 + i, col.get() + i * width);
        });
        for (int64_t g = 0; g < p.fgc; ++g)
          matmul<A>(nr, p.Og, depth, col.get() + g * depth, width, false, kernel_of(g), p.Og, false,
                    y.get() + r0 * p.O + yoff + g * p.Og, p.O);
      }
    }
  }
  store_from(y.get(), p.out_view, out);
  return {out};
}

int64_t struct_int(const ir::Operation& op, const ir::Attribute& s, const char* name) {
  const ir::Attribute* f = s.field(name);
  if (!f) unsupported(op, std::string("dimension_numbers lacks ") + name);
  if (f->kind == ir::Attribute::Kind::Integer) return f->integer;
  const auto v = ir::as_ints(*f);
  if (v.size() != 1)
    unsupported(op, std::string("dimension_numbers field ") + name + " is not one integer");
  return v[0];
}

int64_t int_attr_or(const ir::Operation& op, const char* name, int64_t dflt) {
  const ir::Attribute* a = op.attr(name);
  if (!a) return dflt;
  if (a->kind == ir::Attribute::Kind::Integer) return a->integer;
  const auto v = ir::as_ints(*a);
  if (v.size() != 1) unsupported(op, std::string(name) + " must be an integer");
  return v[0];
}

Kernel convolution_kernel(const ir::Operation& op, Compiler&) {
  if (op.operands.size() != 2 || op.results.size() != 1) unsupported(op, "takes two operands");
  const ir::Type& lt = op.operands[0]->type;
  const ir::Type& rt = op.operands[1]->type;
  const ir::Type& ot = op.result(0)->type;
  const ir::Attribute* dn = op.attr("dimension_numbers");
  if (!dn ||
      (dn->kind != ir::Attribute::Kind::Struct && dn->kind != ir::Attribute::Kind::Dictionary))
    unsupported(op, "needs a #stablehlo.conv dimension_numbers attribute");
  auto p = std::make_shared<ConvPlan>();
  try {
    const int64_t rank = lt.rank();
    if (rank < 2 || rt.rank() != rank || ot.rank() != rank)
      unsupported(op, "operands and result must have the same rank >= 2");
    const int64_t nsp = rank - 2;
    p->nsp = nsp;
    const int64_t ib = struct_int(op, *dn, "input_batch_dimension");
    const int64_t ifd = struct_int(op, *dn, "input_feature_dimension");
    const auto is = struct_ints(dn, "input_spatial_dimensions");
    const int64_t kid = struct_int(op, *dn, "kernel_input_feature_dimension");
    const int64_t kod = struct_int(op, *dn, "kernel_output_feature_dimension");
    const auto ks = struct_ints(dn, "kernel_spatial_dimensions");
    const int64_t ob = struct_int(op, *dn, "output_batch_dimension");
    const int64_t ofd = struct_int(op, *dn, "output_feature_dimension");
    const auto os = struct_ints(dn, "output_spatial_dimensions");
    if (static_cast<int64_t>(is.size()) != nsp || static_cast<int64_t>(ks.size()) != nsp ||
        static_cast<int64_t>(os.size()) != nsp)
      unsupported(op, "spatial dimension lists must have rank - 2 entries");
    auto check_perm = [&](std::vector<int64_t> dims, const char* what) {
      std::vector<bool> seen(rank, false);
      for (int64_t d : dims) {
        if (d < 0 || d >= rank || seen[d])
          unsupported(op, std::string("invalid ") + what + " dimensions");
        seen[d] = true;
      }
    };
    std::vector<int64_t> in_perm = {ib};
    in_perm.insert(in_perm.end(), is.begin(), is.end());
    in_perm.push_back(ifd);
    check_perm(in_perm, "input");
    std::vector<int64_t> k_dims = ks;
    k_dims.push_back(kid);
    k_dims.push_back(kod);
    check_perm(k_dims, "kernel");
    std::vector<int64_t> o_dims = {ob};
    o_dims.insert(o_dims.end(), os.begin(), os.end());
    o_dims.push_back(ofd);
    check_perm(o_dims, "output");

    auto ints_or = [&](const char* name, int64_t dflt, size_t n) {
      auto v = op.ints_if_present(name);
      if (!v) return std::vector<int64_t>(n, dflt);
      if (v->size() != n) unsupported(op, std::string(name) + " has the wrong length");
      return *v;
    };
    const auto stride = ints_or("window_strides", 1, nsp);
    const auto pad = ints_or("padding", 0, 2 * nsp);
    const auto ldil = ints_or("lhs_dilation", 1, nsp);
    const auto rdil = ints_or("rhs_dilation", 1, nsp);
    const auto rev = ints_or("window_reversal", 0, nsp);
    p->fgc = int_attr_or(op, "feature_group_count", 1);
    p->bgc = int_attr_or(op, "batch_group_count", 1);
    for (int64_t d = 0; d < nsp; ++d)
      if (stride[d] <= 0 || ldil[d] <= 0 || rdil[d] <= 0)
        unsupported(op, "strides and dilations must be positive");
    if (p->fgc < 1 || p->bgc < 1 || (p->fgc > 1 && p->bgc > 1))
      unsupported(op, "invalid feature_group_count / batch_group_count");

    p->N = lt.shape[ib];
    p->C = lt.shape[ifd];
    p->O = rt.shape[kod];
    p->G = p->fgc * p->bgc;
    if (p->C % p->fgc != 0 || rt.shape[kid] * p->fgc != p->C)
      unsupported(op, "kernel input features must be input features / feature_group_count");
    if (p->O % p->G != 0)
      unsupported(op, "kernel output features are not divisible by the group count");
    if (p->N % p->bgc != 0) unsupported(op, "input batch is not divisible by batch_group_count");
    p->Cg = p->C / p->fgc;
    p->Og = p->O / p->G;
    p->Nout = p->N / p->bgc;

    Shape expect(rank);
    expect[ob] = p->Nout;
    expect[ofd] = p->O;
    for (int64_t d = 0; d < nsp; ++d) {
      const int64_t s = lt.shape[is[d]], k = rt.shape[ks[d]];
      const int64_t dil_in = s == 0 ? 0 : (s - 1) * ldil[d] + 1;
      const int64_t padded = pad[2 * d] + dil_in + pad[2 * d + 1];
      const int64_t dil_win = k == 0 ? 0 : (k - 1) * rdil[d] + 1;
      const int64_t windows =
          (padded <= 0 || dil_win > padded) ? 0 : (padded - dil_win) / stride[d] + 1;
      expect[os[d]] = windows;
      p->in_sp.push_back(s);
      p->k_sp.push_back(k);
      p->out_sp.push_back(windows);
    }
    if (expect != ot.shape)
      unsupported(op, "result shape " + shape_to_string(ot.shape) + " does not match " +
                          shape_to_string(expect));
    p->out_dtype = ot.dtype;
    p->out_shape = ot.shape;
    p->acc = choose_acc(lt.dtype, rt.dtype, ot.dtype);
    p->S = num_elements(p->in_sp);
    p->Wk = num_elements(p->k_sp);
    p->P = num_elements(p->out_sp);
    p->in_sp_stride.assign(nsp, p->C);
    for (int64_t d = nsp - 2; d >= 0; --d)
      p->in_sp_stride[d] = p->in_sp_stride[d + 1] * p->in_sp[d + 1];

    p->taps.resize(nsp);
    bool pointwise = p->Wk == 1;
    for (int64_t d = 0; d < nsp; ++d) {
      const int64_t k_n = p->k_sp[d];
      auto& t = p->taps[d];
      t.assign(p->out_sp[d] * k_n, -1);
      for (int64_t o = 0; o < p->out_sp[d]; ++o)
        for (int64_t k = 0; k < k_n; ++k) {
          const int64_t q = o * stride[d] + k * rdil[d] - pad[2 * d];  // in dilated input
          if (q < 0 || q % ldil[d] != 0 || q / ldil[d] >= p->in_sp[d]) continue;
          t[o * k_n + k] = q / ldil[d];
        }
      if (stride[d] != 1 || ldil[d] != 1 || pad[2 * d] != 0 || pad[2 * d + 1] != 0)
        pointwise = false;
    }
    p->pointwise = pointwise;

    p->in_view = View::permuted(lt.shape, in_perm);
    // Kernel view [G, k..., Cg, Og]: the output feature dim splits into (G, Og); reversed
    // spatial dims read backwards.
    {
      const auto st = row_major_strides(rt.shape);
      View v;
      v.dims.push_back(p->G);
      v.strides.push_back(st[kod] * p->Og);
      for (int64_t d = 0; d < nsp; ++d) {
        const int64_t k_n = p->k_sp[d];
        v.dims.push_back(k_n);
        if (rev[d] && k_n > 0) {
          v.strides.push_back(-st[ks[d]]);
          v.offset += (k_n - 1) * st[ks[d]];
        } else {
          v.strides.push_back(st[ks[d]]);
        }
      }
      v.dims.push_back(p->Cg);
      v.strides.push_back(st[kid]);
      v.dims.push_back(p->Og);
      v.strides.push_back(st[kod]);
      v.coalesce();
      p->k_view = v;
    }
    // Result dim r reads canonical dim c where o_dims[c] = r.
    {
      Shape canon = {p->Nout};
      canon.insert(canon.end(), p->out_sp.begin(), p->out_sp.end());
      canon.push_back(p->O);
      const auto cst = row_major_strides(canon);
      View v;
      v.dims = ot.shape;
      v.strides.assign(rank, 0);
      for (int64_t c = 0; c < rank; ++c) v.strides[o_dims[c]] = cst[c];
      v.coalesce();
      p->out_view = v;
    }
    if (p->acc == AccKind::F32 || p->acc == AccKind::F64) {
      const int64_t max_rows = p->pointwise ? p->Nout * p->P : kIm2colBudget;
      if (!fits_blas_int(max_rows) || !fits_blas_int(p->Wk * p->C) || !fits_blas_int(p->O))
        unsupported(op, "convolution too large for the BLAS interface");
    }
  } catch (const UnsupportedError&) {
    throw;
  } catch (const Error& e) {
    unsupported(op, e.what());
  }
  return [p](std::span<const HostTensor> in, ExecContext&) {
    return visit_acc(p->acc, [&](auto tag) {
      using A = typename decltype(tag)::type;
      return run_conv<A>(*p, in[0], in[1]);
    });
  };
}

}  // namespace

void register_convolution_kernels(KernelRegistry& r) {
  r.add("stablehlo.convolution", convolution_kernel);
}

}  // namespace cujax::cpu
