// sort: a stable sort of each slice along the dimension. A comparator that is one compare of
// the first operand pair runs as a typed compare; any other runs in one of the ways
// region_scalars.h describes.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/region_scalars.h"

namespace cujax::cpu {

namespace {

using namespace regions;

// ---------------------------------------------------------------------------------------------
// sort

// A comparator that is one strict compare of the first operand pair: (dir, kind, swapped).
struct SimpleComparator {
  CompareDirection dir;
  CmpKind kind;
};

std::optional<SimpleComparator> simple_comparator(const ir::Region& region, DType dtype) {
  if (region.blocks.size() != 1) return std::nullopt;
  const ir::Block& b = region.front();
  if (b.arguments.size() < 2 || b.ops.size() != 2) return std::nullopt;
  const ir::Operation& cmp = *b.ops[0];
  const ir::Operation& ret = *b.ops[1];
  if (cmp.name != "stablehlo.compare" || ret.name != "stablehlo.return" ||
      ret.operands.size() != 1 || ret.operands[0] != cmp.result() || cmp.operands.size() != 2)
    return std::nullopt;
  const ir::Value* lhs = b.arguments[0].get();
  const ir::Value* rhs = b.arguments[1].get();
  if (lhs->type != ir::Type::tensor({}, dtype) || rhs->type != lhs->type) return std::nullopt;
  auto attrs = compare_attrs(cmp, dtype);
  if (!attrs || (attrs->first != CompareDirection::LT && attrs->first != CompareDirection::GT))
    return std::nullopt;
  CompareDirection dir = attrs->first;
  if (cmp.operands[0] == rhs && cmp.operands[1] == lhs)
    dir = dir == CompareDirection::LT ? CompareDirection::GT : CompareDirection::LT;
  else if (cmp.operands[0] != lhs || cmp.operands[1] != rhs)
    return std::nullopt;
  return SimpleComparator{dir, attrs->second};
}

Kernel sort_kernel(const ir::Operation& op, Compiler& cc) {
  const size_t n = op.operands.size();
  if (n == 0) unsupported(op, "needs at least one input");
  if (op.results.size() != n) unsupported(op, "must have one result per input");
  if (op.regions.size() != 1) unsupported(op, "needs a comparator region");
  const std::vector<ir::Type> types = operand_types(op);
  const Shape shape = types[0].shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  for (size_t k = 0; k < n; ++k) {
    if (types[k].shape != shape) unsupported(op, "inputs must have the same shape");
    if (op.result(k)->type != types[k])
      unsupported(op, "results must have the types of the inputs");
  }
  int64_t dim = -1;
  if (const ir::Attribute* d = op.attr("dimension")) {
    if (d->kind != ir::Attribute::Kind::Integer) unsupported(op, "`dimension` must be an integer");
    dim = d->integer;
  }
  if (dim < 0) dim += rank;
  if (rank == 0)
    dim = 0;
  else if (dim < 0 || dim >= rank)
    unsupported(op, "dimension out of range");
  const int64_t len = rank == 0 ? 1 : shape[dim];
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < rank; ++d) inner *= shape[d];
  const int64_t slices = len == 0 ? 0 : num_elements(shape) / len;
  std::vector<DType> dtypes;
  for (size_t k = 0; k < n; ++k) dtypes.push_back(types[k].dtype);
  const std::string where = op.where();
  const auto simple = simple_comparator(*op.regions[0], dtypes[0]);
  std::shared_ptr<const RegionFn> fn;
  if (!simple) {
    fn = std::make_shared<const RegionFn>(op, *op.regions[0], cc, captured_values(op));
    std::vector<DType> want;
    for (DType t : dtypes) {
      want.push_back(t);
      want.push_back(t);
    }
    if (fn->arg_types() != want || fn->result_types() != std::vector<DType>{DType::Bool})
      unsupported(op, "comparator must take a pair of scalars per input and return an i1");
  }
  return [=](std::span<const HostTensor> in, ExecContext& ctx) {
    check_inputs(where, in, types);
    const auto caps = in.subspan(n);
    std::vector<HostTensor> outs;
    for (size_t k = 0; k < n; ++k) outs.emplace_back(dtypes[k], shape);
    auto body = [&](int64_t b, int64_t e) {
      std::vector<int64_t> perm(len);
      std::vector<uint64_t> vals(fn ? n * len : 0), args(2 * n);
      for (int64_t s = b; s < e; ++s) {
        const int64_t base = (s / inner) * len * inner + s % inner;
        std::iota(perm.begin(), perm.end(), 0);
        if (simple) {
          visit_dtype(dtypes[0], [&](auto tag) {
            using T = typename decltype(tag)::type;
            const T* key = in[0].data_as<T>() + base;
            const SimpleComparator c = *simple;
            std::stable_sort(perm.begin(), perm.end(), [&](int64_t x, int64_t y) {
              return s_compare(key[x * inner], key[y * inner], c.dir, c.kind);
            });
          });
        } else {
          for (size_t k = 0; k < n; ++k) {
            const auto* src = static_cast<const std::byte*>(in[k].data());
            for (int64_t i = 0; i < len; ++i)
              vals[k * len + i] = load_bits(src, base + i * inner, size_of(dtypes[k]));
          }
          std::stable_sort(perm.begin(), perm.end(), [&](int64_t x, int64_t y) {
            for (size_t k = 0; k < n; ++k) {
              args[2 * k] = vals[k * len + x];
              args[2 * k + 1] = vals[k * len + y];
            }
            uint64_t r = 0;
            fn->call(args.data(), &r, ctx, caps);
            return (r & 1) != 0;
          });
        }
        for (size_t k = 0; k < n; ++k) {
          const size_t esz = size_of(dtypes[k]);
          const auto* src = static_cast<const std::byte*>(in[k].data());
          auto* dst = static_cast<std::byte*>(outs[k].data());
          for (int64_t i = 0; i < len; ++i)
            std::memcpy(dst + (base + i * inner) * esz, src + (base + perm[i] * inner) * esz, esz);
        }
      }
    };
    if (!fn || fn->thread_safe())
      parallel_for(slices, grain_for(len * 16), body);
    else
      body(0, slices);
    return outs;
  };
}

}  // namespace

void register_sort_kernels(KernelRegistry& r) {
  r.add("stablehlo.sort", sort_kernel);
}

}  // namespace cujax::cpu
