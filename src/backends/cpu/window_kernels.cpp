// Windows: reduce_window and select_and_scatter. Their regions run in one of the three ways
// region_scalars.h describes; each window takes its elements in ascending lexicographic order
// of their index.
#include <algorithm>
#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/region_scalars.h"

namespace cujax::cpu {

namespace {

using namespace regions;

std::vector<int64_t> opt_ints(const ir::Operation& op, std::string_view name, size_t rank,
                              int64_t fill) {
  const ir::Attribute* a = op.attr(name);
  if (!a) return std::vector<int64_t>(rank, fill);
  std::vector<int64_t> v;
  try {
    v = ir::as_ints(*a);
  } catch (const Error& e) {
    unsupported(op, "attribute '" + std::string(name) + "': " + e.what());
  }
  if (v.size() != rank)
    unsupported(op, "attribute '" + std::string(name) + "' has " + std::to_string(v.size()) +
                        " values, expected " + std::to_string(rank));
  return v;
}

// Applies a BinOp to two bit patterns of `dtype` (for the variadic and window paths).
uint64_t apply_binop(BinOp op, DType dtype, uint64_t a, uint64_t b) {
  return visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return visit_binop(op, [&](auto fn) { return to_bits(fn(from_bits<T>(a), from_bits<T>(b))); });
  });
}

// ---------------------------------------------------------------------------------------------
// Windows (reduce_window, select_and_scatter)

struct WindowPlan {
  size_t rank = 0;
  Shape out_shape, window;
  std::vector<int64_t> in_strides;
  // coord[d][o * window[d] + w]: the input coordinate that window position w of output
  // coordinate o reads along dimension d, or -1 for padding and base-dilation holes.
  std::vector<std::vector<int64_t>> coord;
  int64_t num_out = 0, window_size = 1;
};

// Output size of one dimension (spec C15 of reduce_window).
int64_t window_count(int64_t in, int64_t win, int64_t stride, int64_t bdil, int64_t wdil,
                     int64_t lo, int64_t hi) {
  const int64_t dilated = in == 0 ? 0 : (in - 1) * bdil + 1;
  const int64_t padded = lo + dilated + hi;
  const int64_t dwin = win == 0 ? 0 : (win - 1) * wdil + 1;
  if (padded <= 0 || dwin > padded) return 0;
  return (padded - dwin) / stride + 1;
}

WindowPlan make_window_plan(const ir::Operation& op, const Shape& in_shape, const Shape& window,
                            const std::vector<int64_t>& strides, const std::vector<int64_t>& bdil,
                            const std::vector<int64_t>& wdil, const std::vector<int64_t>& padding) {
  WindowPlan p;
  p.rank = in_shape.size();
  p.window = window;
  p.in_strides = row_major_strides(in_shape);
  for (size_t d = 0; d < p.rank; ++d) {
    if (window[d] <= 0 || strides[d] <= 0 || bdil[d] <= 0 || wdil[d] <= 0)
      unsupported(op, "window dimensions, strides and dilations must be positive");
    const int64_t lo = padding[2 * d], hi = padding[2 * d + 1];
    const int64_t o_n = window_count(in_shape[d], window[d], strides[d], bdil[d], wdil[d], lo, hi);
    p.out_shape.push_back(o_n);
    std::vector<int64_t> c(o_n * window[d], -1);
    const int64_t dilated = in_shape[d] == 0 ? 0 : (in_shape[d] - 1) * bdil[d] + 1;
    for (int64_t o = 0; o < o_n; ++o)
      for (int64_t w = 0; w < window[d]; ++w) {
        const int64_t q = o * strides[d] + w * wdil[d] - lo;
        if (q >= 0 && q < dilated && q % bdil[d] == 0) c[o * window[d] + w] = q / bdil[d];
      }
    p.coord.push_back(std::move(c));
    p.window_size *= window[d];
  }
  p.num_out = num_elements(p.out_shape);
  return p;
}

// Calls f(valid, offset) for every position of the window of output `o` in lexicographic order.
template <class F>
void for_each_window_element(const WindowPlan& p, int64_t o, F&& f) {
  const size_t r = p.rank;
  if (r == 0) {
    f(true, int64_t{0});
    return;
  }
  std::array<const int64_t*, kMaxRank> tab;
  for (size_t d = r; d-- > 0;) {
    const int64_t od = o % p.out_shape[d];
    o /= p.out_shape[d];
    tab[d] = p.coord[d].data() + od * p.window[d];
  }
  std::array<int64_t, kMaxRank> w{};
  const int64_t inner_w = p.window[r - 1], inner_stride = p.in_strides[r - 1];
  const int64_t* inner = tab[r - 1];
  for (;;) {
    bool ok = true;
    int64_t off = 0;
    for (size_t d = 0; d + 1 < r; ++d) {
      const int64_t c = tab[d][w[d]];
      if (c < 0) ok = false;
      off += c * p.in_strides[d];
    }
    for (int64_t j = 0; j < inner_w; ++j) {
      const int64_t c = inner[j];
      if (ok && c >= 0)
        f(true, off + c * inner_stride);
      else
        f(false, int64_t{0});
    }
    size_t d = r - 1;
    for (;;) {
      if (d == 0) return;
      --d;
      if (++w[d] < p.window[d]) break;
      w[d] = 0;
    }
  }
}

template <class T, class Op>
void reduce_window_fast(const T* in, T* out, T init, const WindowPlan& p, Op op) {
  using Acc = Accum<T, kHalfAccumulateInFloat>;
  using A = typename Acc::A;
  const A a0 = Acc::load(init);
  parallel_for(p.num_out, grain_for(p.window_size), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      A acc = a0;
      for_each_window_element(p, o, [&](bool valid, int64_t off) {
        acc = Acc::round(op(acc, valid ? Acc::load(in[off]) : a0));
      });
      out[o] = Acc::store(acc);
    }
  });
}

Kernel reduce_window_kernel(const ir::Operation& op, Compiler& cc) {
  const std::vector<ir::Type> types = reduction_operand_types(op);
  const Shape in_shape = types[0].shape;
  const size_t rank = in_shape.size();
  const auto window = required_ints(op, "window_dimensions");
  if (window.size() != rank)
    unsupported(op, "`window_dimensions` must have one value per dimension");
  const auto strides = opt_ints(op, "window_strides", rank, 1);
  const auto bdil = opt_ints(op, "base_dilations", rank, 1);
  const auto wdil = opt_ints(op, "window_dilations", rank, 1);
  const auto padding = opt_ints(op, "padding", 2 * rank, 0);
  const WindowPlan plan = make_window_plan(op, in_shape, window, strides, bdil, wdil, padding);
  check_result_shapes(op, plan.out_shape);

  if (types.size() == 2)  // one input
    if (auto bop = simple_binop(*op.regions[0], types[0].dtype))
      return binop_reduction_kernel(op, types, plan.out_shape, *bop,
                                    [plan](const auto* x, auto* y, auto init, auto fn) {
                                      reduce_window_fast(x, y, init, plan, fn);
                                    });

  return region_reduction_kernel(
      op, cc, types, plan.out_shape, plan.num_out, plan.window_size,
      [plan](int64_t o, const auto& visit) { for_each_window_element(plan, o, visit); });
}

// select_and_scatter: each source element goes to the operand element its window selects
// (positions in the padding are never selected; the first valid position starts the selection
// and a later one replaces it when select(current, candidate) is false), combined with the
// init value and earlier source elements in source order by `scatter`.
Kernel select_and_scatter_kernel(const ir::Operation& op, Compiler& cc) {
  if (op.operands.size() != 3) unsupported(op, "takes operand, source and init_value");
  if (op.results.size() != 1) unsupported(op, "has one result");
  if (op.regions.size() != 2) unsupported(op, "needs select and scatter regions");
  const std::vector<ir::Type> types = operand_types(op);
  const Shape shape = types[0].shape;
  const size_t rank = shape.size();
  if (rank > static_cast<size_t>(kMaxRank)) unsupported(op, "rank is too large");
  const DType dtype = types[0].dtype;
  if (types[1].dtype != dtype || types[2].dtype != dtype || types[2].rank() != 0 ||
      op.result()->type != types[0])
    unsupported(op, "operand, source, init value and result must have the same element type");
  const auto window = required_ints(op, "window_dimensions");
  if (window.size() != rank)
    unsupported(op, "`window_dimensions` must have one value per dimension");
  const auto strides = opt_ints(op, "window_strides", rank, 1);
  const auto padding = opt_ints(op, "padding", 2 * rank, 0);
  const std::vector<int64_t> ones(rank, 1);
  const WindowPlan plan = make_window_plan(op, shape, window, strides, ones, ones, padding);
  if (plan.out_shape != types[1].shape)
    unsupported(
        op, "source is " + types[1].str() + ", expected shape " + shape_to_string(plan.out_shape));
  const auto captures = captured_values(op);
  auto select = std::make_shared<const RegionFn>(op, *op.regions[0], cc, captures);
  if (select->arg_types() != std::vector<DType>{dtype, dtype} ||
      select->result_types() != std::vector<DType>{DType::Bool})
    unsupported(op, "select must map two operand elements to an i1");
  const std::optional<BinOp> scatter_op = simple_binop(*op.regions[1], dtype);
  std::shared_ptr<const RegionFn> scatter;
  if (!scatter_op) {
    scatter = std::make_shared<const RegionFn>(op, *op.regions[1], cc, captures);
    if (scatter->arg_types() != std::vector<DType>{dtype, dtype} ||
        scatter->result_types() != std::vector<DType>{dtype})
      unsupported(op, "scatter must map two elements to one of the same type");
  }
  const std::string where = op.where();
  return [=](std::span<const HostTensor> in, ExecContext& ctx) {
    check_inputs(where, in, types);
    const auto caps = in.subspan(3);
    const size_t esz = size_of(dtype);
    const auto* operand = static_cast<const std::byte*>(in[0].data());
    const auto* source = static_cast<const std::byte*>(in[1].data());
    const uint64_t init = load_bits(static_cast<const std::byte*>(in[2].data()), 0, esz);
    // 1. The selected operand offset of every window (-1 when the window holds only padding).
    std::vector<int64_t> selected(plan.num_out, -1);
    auto choose = [&](int64_t b, int64_t e) {
      uint64_t args[2];
      for (int64_t s = b; s < e; ++s) {
        int64_t best = -1;
        uint64_t best_bits = 0;
        for_each_window_element(plan, s, [&](bool valid, int64_t off) {
          if (!valid) return;
          const uint64_t v = load_bits(operand, off, esz);
          if (best >= 0) {
            args[0] = best_bits;
            args[1] = v;
            uint64_t keep = 0;
            select->call(args, &keep, ctx, caps);
            if (keep & 1) return;
          }
          best = off;
          best_bits = v;
        });
        selected[s] = best;
      }
    };
    if (select->thread_safe())
      parallel_for(plan.num_out, grain_for(plan.window_size * 8), choose);
    else
      choose(0, plan.num_out);
    // 2. Scatter in source order.
    HostTensor out(dtype, shape);
    auto* res = static_cast<std::byte*>(out.data());
    for (int64_t i = 0; i < out.size(); ++i) store_bits(res, i, esz, init);
    for (int64_t s = 0; s < plan.num_out; ++s) {
      const int64_t t = selected[s];
      if (t < 0) continue;
      const uint64_t cur = load_bits(res, t, esz), src = load_bits(source, s, esz);
      uint64_t r;
      if (scatter_op) {
        r = apply_binop(*scatter_op, dtype, cur, src);
      } else {
        const uint64_t args[2] = {cur, src};
        scatter->call(args, &r, ctx, caps);
      }
      store_bits(res, t, esz, r);
    }
    return std::vector<HostTensor>{out};
  };
}

}  // namespace

void register_window_kernels(KernelRegistry& r) {
  r.add("stablehlo.reduce_window", reduce_window_kernel);
  r.add("stablehlo.select_and_scatter", select_and_scatter_kernel);
}

}  // namespace cujax::cpu
