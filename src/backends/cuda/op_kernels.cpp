// Kernel selection for the ops beyond cuda_backend.cpp's element-wise, shape, simple-reduce and
// matmul kernels: each op's attributes are read once here and the returned kernel only launches.
#include "backends/cuda/op_kernels.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "backends/common/copy_plan.h"
#include "backends/common/gather_scatter.h"
#include "backends/common/scalar_program.h"
#include "backends/cpu/kernels.h"
#include "backends/cuda/complex.h"
#include "backends/cuda/control.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cudnn_attention.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/linalg_calls.h"
#include "backends/cuda/narrow.h"
#include "backends/cuda/op_launch.h"
#include "compiler/narrow_types.h"
#include "compiler/sdpa_call.h"
#include "cujax/runtime/checks.h"

namespace cujax::cuda {

namespace {

std::vector<DeviceArray> one(DeviceArray a) {
  std::vector<DeviceArray> v;
  v.push_back(std::move(a));
  return v;
}

bool fits_rank(const ir::Operation& op) {
  for (const ir::Value* v : op.operands)
    if (v->type.is_token || v->type.rank() > index::kMaxRank) return false;
  for (const auto& r : op.results)
    if (r->type.is_token || r->type.rank() > index::kMaxRank) return false;
  return true;
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size());
  if (!s.empty()) index::row_major_strides(s.data(), static_cast<int>(s.size()), st.data());
  return st;
}

// `a`'s buffer when this step holds its only reference (nobody else can see it change), else
// a fresh copy.
DeviceArray writable(Device* d, const DeviceArray& a) {
  if (a.data.use_count() == 1) return a;
  DeviceArray out = d->allocate(a.dtype, a.shape);
  if (a.nbytes() > 0)
    CUJAX_CUDA_CHECK(cudaMemcpyAsync(out.data.get(), a.data.get(), a.nbytes(),
                                     cudaMemcpyDeviceToDevice, d->stream()));
  return out;
}

DeviceKernel constant_kernel(const ir::Operation& op, const OpKernelContext& ctx) {
  const ir::Attribute* value = op.attr("value");
  if (!value || value->kind != ir::Attribute::Kind::DenseElements || op.num_results() != 1)
    return {};
  const HostTensor t = value->tensor;
  if (ctx.device) {
    // Uploaded once, now; every run returns the same buffer (its consumers never write it:
    // they see more than one reference).
    Device& dev = *ctx.device;
    std::lock_guard<std::mutex> lock(dev.mutex());
    dev.activate();
    const DeviceArray a = dev.upload({&t, 1}).front();
    return [a](std::span<const DeviceArray>) { return one(a); };
  }
  // Compiled without a device: the program never runs, but the step is what it would be.
  return [t](std::span<const DeviceArray>) -> std::vector<DeviceArray> {
    throw RuntimeError("a program compiled without a CUDA device cannot run");
  };
}

DeviceKernel clamp_kernel(const ir::Operation& op, Device* d) {
  if (op.operands.size() != 3 || op.num_results() != 1) return {};
  const ir::Type& lo = op.operands[0]->type;
  const ir::Type& x = op.operands[1]->type;
  const ir::Type& hi = op.operands[2]->type;
  const ir::Type rt = op.result(0)->type;
  if (x != rt) return {};
  for (const ir::Type* b : {&lo, &hi})
    if (b->dtype != x.dtype || (b->shape != x.shape && b->rank() != 0)) return {};
  const bool lo_scalar = lo.shape != x.shape, hi_scalar = hi.shape != x.shape;
  return [d, rt, lo_scalar, hi_scalar](std::span<const DeviceArray> in) {
    DeviceArray out = d->allocate(rt.dtype, rt.shape);
    launch_clamp(rt.dtype, in[0].data.get(), lo_scalar, in[1].data.get(), in[2].data.get(),
                 hi_scalar, out.data.get(), out.size(), d->stream());
    return one(std::move(out));
  };
}

DeviceKernel reverse_kernel(const ir::Operation& op, Device* d) {
  if (op.operands.size() != 1 || op.num_results() != 1) return {};
  const ir::Type rt = op.result(0)->type;
  const Shape& s = rt.shape;
  const auto os = strides_of(s);
  std::vector<bool> rev(s.size(), false);
  for (int64_t dim : op.ints("dimensions")) {
    if (dim < 0 || dim >= static_cast<int64_t>(s.size())) return {};
    rev[dim] = true;
  }
  index::StridedCopy c;
  for (size_t k = 0; k < s.size(); ++k) {
    if (rev[k] && s[k] > 0) {
      c.src_offset += (s[k] - 1) * os[k];
      c.push(s[k], -os[k], os[k]);
    } else {
      c.push(s[k], os[k], os[k]);
    }
  }
  c.simplify();
  return [d, rt, c](std::span<const DeviceArray> in) {
    DeviceArray out = d->allocate(rt.dtype, rt.shape);
    launch_strided_copy(size_of(rt.dtype), c, in[0].data.get(), out.data.get(), d->stream());
    return one(std::move(out));
  };
}

// Row-major bytes are the same before and after (the wider side's last dimension holds the
// narrower elements in little-endian order), so the result shares the operand's buffer.
DeviceKernel bitcast_convert_kernel(const ir::Operation& op) {
  if (op.operands.size() != 1 || op.num_results() != 1) return {};
  const ir::Type& from = op.operands[0]->type;
  const ir::Type rt = op.result(0)->type;
  if (from.num_elements() * static_cast<int64_t>(size_of(from.dtype)) !=
      rt.num_elements() * static_cast<int64_t>(size_of(rt.dtype)))
    return {};
  return [rt](std::span<const DeviceArray> in) {
    DeviceArray out = in[0];
    out.dtype = rt.dtype;
    out.shape = rt.shape;
    return one(std::move(out));
  };
}

// The start indices operands[first...] as a window of `sizes` in `operand`; nullopt when they
// are not integer scalars of one type.
std::optional<DynamicWindow> dynamic_window(const ir::Operation& op, size_t first,
                                            const Shape& operand, const Shape& sizes) {
  if (op.operands.size() != first + operand.size() || sizes.size() != operand.size())
    return std::nullopt;
  DynamicWindow w;
  w.rank = static_cast<int>(operand.size());
  for (size_t k = 0; k < operand.size(); ++k) {
    const ir::Type& t = op.operands[first + k]->type;
    if (t.rank() != 0 || !is_integer(t.dtype) || t.dtype != op.operands[first]->type.dtype)
      return std::nullopt;
    if (sizes[k] < 0 || sizes[k] > operand[k]) return std::nullopt;
    w.operand_dims[k] = operand[k];
    w.sizes[k] = sizes[k];
  }
  if (!operand.empty()) w.index_type = op.operands[first]->type.dtype;
  return w;
}

DeviceKernel dynamic_slice_kernel(const ir::Operation& op, Device* d) {
  if (op.operands.empty() || op.num_results() != 1) return {};
  const ir::Type rt = op.result(0)->type;
  const auto sizes = op.ints("slice_sizes");
  if (Shape(sizes.begin(), sizes.end()) != rt.shape) return {};
  auto w = dynamic_window(op, 1, op.operands[0]->type.shape, rt.shape);
  if (!w) return {};
  return [d, rt, w = *w](std::span<const DeviceArray> in) {
    DynamicWindow k = w;
    for (int i = 0; i < k.rank; ++i) k.starts[i] = in[1 + i].data.get();
    DeviceArray out = d->allocate(rt.dtype, rt.shape);
    launch_dynamic_slice(size_of(rt.dtype), k, in[0].data.get(), out.data.get(), d->stream());
    return one(std::move(out));
  };
}

// In place when the operand's buffer is this step's alone (a donated KV cache, a loop-carried
// value); a copy first otherwise.
DeviceKernel dynamic_update_slice_kernel(const ir::Operation& op, Device* d) {
  if (op.operands.size() < 2 || op.num_results() != 1) return {};
  const ir::Type rt = op.result(0)->type;
  if (op.operands[0]->type != rt || op.operands[1]->type.dtype != rt.dtype) return {};
  auto w = dynamic_window(op, 2, rt.shape, op.operands[1]->type.shape);
  if (!w) return {};
  return [d, rt, w = *w](std::span<const DeviceArray> in) {
    DynamicWindow k = w;
    for (int i = 0; i < k.rank; ++i) k.starts[i] = in[2 + i].data.get();
    DeviceArray out = writable(d, in[0]);
    launch_dynamic_update_slice(size_of(rt.dtype), k, in[1].data.get(), out.data.get(),
                                d->stream());
    return one(std::move(out));
  };
}

DeviceKernel gather_kernel(const ir::Operation& op, Device* d) {
  auto g = plan::gather_plan(op);
  if (!g) return {};
  const ir::Type rt = op.result(0)->type;
  const bool empty_operand = op.operands[0]->type.num_elements() == 0;
  return [d, rt, g = *g, empty_operand](std::span<const DeviceArray> in) {
    DeviceArray out = d->allocate(rt.dtype, rt.shape);
    if (!empty_operand)
      launch_gather(size_of(rt.dtype), g, in[0].data.get(), in[1].data.get(), out.data.get(),
                    out.size(), d->stream());
    return one(std::move(out));
  };
}

std::optional<Combine> combine_of(const std::string& name, DType t) {
  if (name == "stablehlo.add") return Combine::Add;
  if (name == "stablehlo.subtract" && t != DType::Bool) return Combine::Sub;
  if (name == "stablehlo.multiply") return Combine::Mul;
  if (name == "stablehlo.maximum") return Combine::Max;
  if (name == "stablehlo.minimum") return Combine::Min;
  if (is_float(t)) return std::nullopt;
  if (name == "stablehlo.and") return Combine::And;
  if (name == "stablehlo.or") return Combine::Or;
  if (name == "stablehlo.xor") return Combine::Xor;
  return std::nullopt;
}

bool unit_or_true(const ir::Operation& op, const char* name) {
  const ir::Attribute* a = op.attr(name);
  return a && ((a->kind == ir::Attribute::Kind::Bool && a->boolean) ||
               a->kind == ir::Attribute::Kind::Unit);
}

DeviceKernel scatter_kernel(const ir::Operation& op, Device* d, const ir::Module* module) {
  if (op.regions.size() != 1 || op.regions[0]->blocks.size() != 1) return {};
  auto p = plan::scatter_plan(op);
  if (!p) return {};
  const size_t n_in = (op.operands.size() - 1) / 2;
  std::vector<DType> types;
  for (size_t k = 0; k < n_in; ++k) types.push_back(op.operands[k]->type.dtype);
  const ir::Block& block = op.regions[0]->front();
  const ir::Operation* term = block.terminator();
  const bool unique = unit_or_true(op, "unique_indices");
  // One input: an assignment, a single binary op, or any region the interpreter runs
  // (atomically per element); several inputs: the region, serially.
  std::optional<Combine> combine;
  if (n_in == 1 && term && block.ops.size() == 1 && term->operands.size() == 1 &&
      term->operands[0] == block.arguments.at(1).get())
    combine = Combine::Assign;
  else if (n_in == 1)
    if (auto name = cpu::simple_binary_region(*op.regions[0]))
      combine = combine_of(*name, types[0]);
  // One complex input is assigned only, by the kernel that moves bytes: the others compute in
  // the element type, which has no complex form.
  const bool complex_input = n_in == 1 && is_complex(types[0]);
  if (complex_input && combine != Combine::Assign) return {};
  std::optional<scalar_program::Program> region;
  if (!combine) {
    region = scalar_program::compile(*op.regions[0], module);
    if (!region || region->num_results != static_cast<int>(n_in)) return {};
  }
  const int64_t n_updates = op.operands[n_in + 1]->type.num_elements();
  const int64_t n_results = op.operands[0]->type.num_elements();
  return [d, p = *p, n_in, types, combine, region, unique, complex_input, n_updates,
          n_results](std::span<const DeviceArray> in) {
    std::vector<DeviceArray> out;
    for (size_t k = 0; k < n_in; ++k) out.push_back(writable(d, in[k]));
    const void* indices = in[n_in].data.get();
    if (n_in == 1) {
      std::shared_ptr<void> winners;
      if (combine == Combine::Assign && (!unique || complex_input))
        winners = d->allocate(sizeof(int64_t) * static_cast<size_t>(n_results));
      launch_scatter(types[0], combine ? *combine : Combine::Region, region ? &*region : nullptr, p,
                     indices, in[2].data.get(), out[0].data.get(), n_updates,
                     static_cast<int64_t*>(winners.get()), n_results, d->stream());
      return out;
    }
    std::vector<const void*> updates;
    std::vector<void*> results;
    for (size_t k = 0; k < n_in; ++k) {
      updates.push_back(in[n_in + 1 + k].data.get());
      results.push_back(out[k].data.get());
    }
    launch_scatter_serial(static_cast<int>(n_in), types.data(), *region, p, indices, updates.data(),
                          results.data(), n_updates, d->stream());
    return out;
  };
}

DeviceKernel reduce_kernel(const ir::Operation& op, Device* d, const ir::Module* module) {
  const size_t n = op.operands.size() / 2;
  if (op.regions.size() != 1 || op.operands.size() != 2 * n || n == 0 || op.num_results() != n ||
      n > static_cast<size_t>(scalar_program::Program::kMaxResults))
    return {};
  const Shape in_shape = op.operands[0]->type.shape;
  std::vector<DType> types;
  std::vector<ir::Type> rts;
  for (size_t k = 0; k < n; ++k) {
    if (op.operands[k]->type.shape != in_shape || op.operands[n + k]->type.rank() != 0 ||
        op.operands[n + k]->type.dtype != op.operands[k]->type.dtype ||
        op.result(k)->type.dtype != op.operands[k]->type.dtype)
      return {};
    types.push_back(op.operands[k]->type.dtype);
    rts.push_back(op.result(k)->type);
  }
  auto region = scalar_program::compile(*op.regions[0], module);
  if (!region || region->num_args != static_cast<int>(2 * n) ||
      region->num_results != static_cast<int>(n))
    return {};
  std::vector<char> reduced(in_shape.size(), 0);
  for (int64_t dim : op.ints("dimensions")) {
    if (dim < 0 || dim >= static_cast<int64_t>(in_shape.size())) return {};
    reduced[dim] = 1;
  }
  return [d, n, types, rts, in_shape, reduced, region = *region](std::span<const DeviceArray> in) {
    std::vector<DeviceArray> out;
    std::vector<const void*> inputs, inits;
    std::vector<void*> outs;
    for (size_t k = 0; k < n; ++k) {
      out.push_back(d->allocate(rts[k].dtype, rts[k].shape));
      inputs.push_back(in[k].data.get());
      inits.push_back(in[n + k].data.get());
      outs.push_back(out.back().data.get());
    }
    bool flags[index::kMaxRank] = {};
    for (size_t k = 0; k < reduced.size(); ++k) flags[k] = reduced[k] != 0;
    launch_reduce_region(region, static_cast<int>(n), types.data(), inputs.data(), inits.data(),
                         outs.data(), in_shape.data(), flags, static_cast<int>(in_shape.size()),
                         d->stream());
    return out;
  };
}

// x, or JAX's canonicalisation of x for sorting: select(x != x, NaN, select(x == 0, 0, x)).
// Sets *canonical (and the two constants' bits) when it is the latter.
const ir::Value* canonicalized_source(const ir::Value* v, bool* canonical, uint64_t* zero,
                                      uint64_t* nan) {
  auto op_of = [](const ir::Value* x, const char* name) -> const ir::Operation* {
    return x && x->defining_op && x->defining_op->name == name ? x->defining_op : nullptr;
  };
  auto constant = [&](const ir::Value* x, uint64_t* bits) {
    const ir::Operation* c = op_of(x, "stablehlo.constant");
    const ir::Attribute* a = c ? c->attr("value") : nullptr;
    if (!a || a->kind != ir::Attribute::Kind::DenseElements || a->tensor.size() != 1) return false;
    *bits = 0;
    std::memcpy(bits, a->tensor.data(), size_of(a->tensor.dtype()));
    return true;
  };
  auto compare = [&](const ir::Value* x, const char* dir) -> const ir::Operation* {
    const ir::Operation* c = op_of(x, "stablehlo.compare");
    const ir::Attribute* a = c ? c->attr("comparison_direction") : nullptr;
    return a && a->enum_value == dir && c->operands.size() == 2 ? c : nullptr;
  };
  *canonical = false;
  const ir::Operation* outer = op_of(v, "stablehlo.select");
  if (!outer || outer->operands.size() != 3) return v;
  const ir::Operation* is_nan = compare(outer->operands[0], "NE");
  const ir::Operation* inner = op_of(outer->operands[2], "stablehlo.select");
  if (!is_nan || !inner || inner->operands.size() != 3 || !constant(outer->operands[1], nan))
    return nullptr;
  const ir::Value* x = is_nan->operands[0];
  if (is_nan->operands[1] != x) return nullptr;
  const ir::Operation* is_zero = compare(inner->operands[0], "EQ");
  uint64_t zero_operand = 0;
  if (!is_zero || is_zero->operands[0] != x || !constant(is_zero->operands[1], &zero_operand) ||
      !constant(inner->operands[1], zero) || inner->operands[2] != x)
    return nullptr;
  *canonical = true;
  return x;
}

// The single-key comparators JAX emits (lax.sort, argsort, top_k): compare(LT|GT) of operand 0's
// two arguments (possibly canonicalised), by TOTALORDER for floats.
std::optional<RadixKey> radix_key(const ir::Operation& op) {
  const ir::Region& region = *op.regions[0];
  if (region.blocks.size() != 1) return std::nullopt;
  const ir::Block& block = region.front();
  const ir::Operation* term = block.terminator();
  if (!term || term->operands.size() != 1 || block.arguments.size() < 2) return std::nullopt;
  const ir::Value* r = term->operands[0];
  const ir::Operation* cmp = r->defining_op;
  if (!cmp || cmp->name != "stablehlo.compare" || cmp->operands.size() != 2) return std::nullopt;
  const ir::Attribute* dir = cmp->attr("comparison_direction");
  if (!dir || (dir->enum_value != "LT" && dir->enum_value != "GT")) return std::nullopt;
  RadixKey key;
  key.type = block.arguments[0]->type.dtype;
  const ir::Attribute* ct = cmp->attr("compare_type");
  if (is_float(key.type) && (!ct || ct->enum_value != "TOTALORDER")) return std::nullopt;
  bool canon_a = false, canon_b = false;
  uint64_t zero_a = 0, nan_a = 0, zero_b = 0, nan_b = 0;
  const ir::Value* a = canonicalized_source(cmp->operands[0], &canon_a, &zero_a, &nan_a);
  const ir::Value* b = canonicalized_source(cmp->operands[1], &canon_b, &zero_b, &nan_b);
  if (!a || !b || canon_a != canon_b || zero_a != zero_b || nan_a != nan_b) return std::nullopt;
  const ir::Value* lhs = block.arguments[0].get();
  const ir::Value* rhs = block.arguments[1].get();
  bool less = dir->enum_value == "LT";
  if (a == rhs && b == lhs)
    less = !less;
  else if (a != lhs || b != rhs)
    return std::nullopt;
  // Every op of the block must be part of the pattern (the canonicalisation, the compare).
  const size_t expected = 1 + (canon_a ? 2 * 4 : 0);
  size_t in_block = 0;
  for (const auto& o : block.ops)
    if (o.get() != term && o->name != "stablehlo.constant") ++in_block;
  if (in_block != expected) return std::nullopt;
  key.descending = !less;
  key.canonicalize = canon_a;
  key.canonical_zero = zero_a;
  key.canonical_nan = nan_a;
  return key;
}

DeviceKernel sort_kernel(const ir::Operation& op, const std::shared_ptr<Device>& dev,
                         const ir::Module* module) {
  if (op.regions.size() != 1 || op.operands.empty() || op.num_results() != op.operands.size())
    return {};
  const Shape shape = op.operands[0]->type.shape;
  if (shape.empty()) return {};
  std::vector<DType> types;
  for (size_t k = 0; k < op.operands.size(); ++k) {
    // The sorts move elements of up to 8 bytes (scalar_program::load): complex128 takes the host path.
    if (op.operands[k]->type.shape != shape || op.result(k)->type != op.operands[k]->type ||
        size_of(op.operands[k]->type.dtype) > 8)
      return {};
    types.push_back(op.operands[k]->type.dtype);
  }
  int64_t dim = op.attr("dimension") ? op.int_attr("dimension") : -1;
  if (dim < 0) dim += static_cast<int64_t>(shape.size());
  if (dim < 0 || dim >= static_cast<int64_t>(shape.size())) return {};
  SortShape s;
  s.rank = static_cast<int>(shape.size());
  s.dim = static_cast<int>(dim);
  for (size_t k = 0; k < shape.size(); ++k) s.dims[k] = shape[k];
  // A complex key has no radix order: its comparator runs in the region interpreter.
  const std::optional<RadixKey> key = is_complex(types[0]) ? std::nullopt : radix_key(op);
  std::optional<scalar_program::Program> cmp;
  if (!key) {
    cmp = scalar_program::compile(*op.regions[0], module);
    if (!cmp || cmp->num_results != 1 || cmp->num_args != static_cast<int>(2 * types.size()))
      return {};
  }
  Device* d = dev.get();
  return [d, s, types, key, cmp](std::span<const DeviceArray> in) {
    std::vector<DeviceArray> out;
    std::vector<const void*> inputs;
    std::vector<void*> outputs;
    for (size_t k = 0; k < types.size(); ++k) {
      out.push_back(d->allocate(types[k], in[k].shape));
      inputs.push_back(in[k].data.get());
      outputs.push_back(out.back().data.get());
    }
    const int n = static_cast<int>(types.size());
    if (key)
      launch_radix_sort(*d, *key, s, n, types.data(), inputs.data(), outputs.data());
    else
      launch_region_sort(*d, *cmp, s, n, types.data(), inputs.data(), outputs.data());
    return out;
  };
}

std::vector<int64_t> ints_or(const ir::Operation& op, const char* name, size_t n, int64_t fill) {
  if (!op.attr(name)) return std::vector<int64_t>(n, fill);
  return op.ints(name);
}

DeviceKernel reduce_window_kernel(const ir::Operation& op, Device* d, const ir::Module* module) {
  const size_t n = op.operands.size() / 2;
  if (op.regions.size() != 1 || n == 0 || op.operands.size() != 2 * n || op.num_results() != n ||
      n > static_cast<size_t>(scalar_program::Program::kMaxResults))
    return {};
  const Shape in_shape = op.operands[0]->type.shape;
  const size_t r = in_shape.size();
  std::vector<DType> types;
  std::vector<ir::Type> rts;
  for (size_t k = 0; k < n; ++k) {
    if (op.operands[k]->type.shape != in_shape || op.operands[n + k]->type.rank() != 0 ||
        op.operands[n + k]->type.dtype != op.operands[k]->type.dtype ||
        op.result(k)->type.dtype != op.operands[k]->type.dtype)
      return {};
    types.push_back(op.operands[k]->type.dtype);
    rts.push_back(op.result(k)->type);
  }
  auto w =
      plan::window_plan(in_shape, op.ints("window_dimensions"), ints_or(op, "window_strides", r, 1),
                        ints_or(op, "base_dilations", r, 1), ints_or(op, "window_dilations", r, 1),
                        ints_or(op, "padding", 2 * r, 0));
  if (!w) return {};
  for (size_t k = 0; k < n; ++k)
    if (rts[k].shape != Shape(w->out_dims, w->out_dims + r)) return {};
  auto region = scalar_program::compile(*op.regions[0], module);
  if (!region || region->num_args != static_cast<int>(2 * n) ||
      region->num_results != static_cast<int>(n))
    return {};
  return [d, n, types, rts, w = *w, region = *region](std::span<const DeviceArray> in) {
    std::vector<DeviceArray> out;
    std::vector<const void*> inputs, inits;
    std::vector<void*> outs;
    for (size_t k = 0; k < n; ++k) {
      out.push_back(d->allocate(rts[k].dtype, rts[k].shape));
      inputs.push_back(in[k].data.get());
      inits.push_back(in[n + k].data.get());
      outs.push_back(out.back().data.get());
    }
    launch_reduce_window(region, static_cast<int>(n), types.data(), inputs.data(), inits.data(),
                         outs.data(), w, d->stream());
    return out;
  };
}

DeviceKernel select_and_scatter_kernel(const ir::Operation& op, Device* d,
                                       const ir::Module* module) {
  if (op.operands.size() != 3 || op.num_results() != 1 || op.regions.size() != 2) return {};
  const ir::Type rt = op.result(0)->type;
  const DType t = rt.dtype;
  if (op.operands[0]->type != rt || op.operands[1]->type.dtype != t ||
      op.operands[2]->type.dtype != t || op.operands[2]->type.rank() != 0)
    return {};
  const size_t r = rt.shape.size();
  const std::vector<int64_t> ones(r, 1);
  auto w =
      plan::window_plan(rt.shape, op.ints("window_dimensions"), ints_or(op, "window_strides", r, 1),
                        ones, ones, ints_or(op, "padding", 2 * r, 0));
  if (!w || op.operands[1]->type.shape != Shape(w->out_dims, w->out_dims + r)) return {};
  auto select = scalar_program::compile(*op.regions[0], module);
  if (!select || select->num_args != 2 || select->num_results != 1) return {};
  std::optional<Combine> combine;
  if (auto name = cpu::simple_binary_region(*op.regions[1])) combine = combine_of(*name, t);
  std::optional<scalar_program::Program> scatter;
  if (!combine) {
    scatter = scalar_program::compile(*op.regions[1], module);
    if (!scatter || scatter->num_args != 2 || scatter->num_results != 1) return {};
  }
  return [d, rt, w = *w, select = *select, combine, scatter](std::span<const DeviceArray> in) {
    DeviceArray out = d->allocate(rt.dtype, rt.shape);
    launch_fill(size_of(rt.dtype), in[2].data.get(), out.data.get(), out.size(), d->stream());
    auto selected = d->allocate(sizeof(int64_t) * static_cast<size_t>(w.num_out));
    launch_select_and_scatter(rt.dtype, select, combine ? *combine : Combine::Region,
                              scatter ? &*scatter : nullptr, w, in[0].data.get(), in[1].data.get(),
                              out.data.get(), static_cast<int64_t*>(selected.get()), d->stream());
    return one(std::move(out));
  };
}

// The products cuBLASLt does not run (integer, boolean and complex operands of the result's
// type; complex ones summed in the operand type as the CPU backend sums them).
DeviceKernel naive_dot_kernel(const ir::Operation& op, Device* d) {
  if (op.operands.size() != 2 || op.num_results() != 1) return {};
  const ir::Type& lt = op.operands[0]->type;
  const ir::Type& rtype = op.operands[1]->type;
  const ir::Type rt = op.result(0)->type;
  if (lt.dtype != rt.dtype || rtype.dtype != rt.dtype || is_float(rt.dtype)) return {};
  const ir::Attribute* dn = op.attr("dot_dimension_numbers");
  if (!dn) return {};
  auto field = [&](const char* f) -> std::vector<int64_t> {
    const ir::Attribute* a = dn->field(f);
    if (!a) return {};
    if (a->kind == ir::Attribute::Kind::Integer) return {a->integer};
    return ir::as_ints(*a);
  };
  const plan::DotPlan p = plan::dot_general(
      lt.shape, rtype.shape, field("lhs_batching_dimensions"), field("rhs_batching_dimensions"),
      field("lhs_contracting_dimensions"), field("rhs_contracting_dimensions"));
  if (p.batch * p.m * p.n != rt.num_elements()) return {};
  std::optional<index::StridedCopy> lbox, rbox;
  if (!p.lhs_perm.empty()) lbox = plan::transpose(lt.shape, p.lhs_perm);
  if (!p.rhs_perm.empty()) rbox = plan::transpose(rtype.shape, p.rhs_perm);
  const int64_t lsize = lt.num_elements(), rsize = rtype.num_elements();
  return [d, rt, p, lbox, rbox, lsize, rsize](std::span<const DeviceArray> in) {
    const size_t w = size_of(rt.dtype);
    DeviceArray a = in[0], b = in[1];
    if (lbox) {
      a = d->allocate(rt.dtype, {lsize});
      launch_strided_copy(w, *lbox, in[0].data.get(), a.data.get(), d->stream());
    }
    if (rbox) {
      b = d->allocate(rt.dtype, {rsize});
      launch_strided_copy(w, *rbox, in[1].data.get(), b.data.get(), d->stream());
    }
    DeviceArray out = d->allocate(rt.dtype, rt.shape);
    if (is_complex(rt.dtype))
      launch_complex_dot(rt.dtype, a.data.get(), b.data.get(), out.data.get(), p.batch, p.m, p.n,
                         p.k, d->stream());
    else
      launch_dot_naive(rt.dtype, a.data.get(), b.data.get(), out.data.get(), p.batch, p.m, p.n, p.k,
                       d->stream());
    return one(std::move(out));
  };
}

DeviceKernel is_finite_kernel(const ir::Operation& op, Device* d) {
  if (op.operands.size() != 1 || op.num_results() != 1) return {};
  const ir::Type rt = op.result(0)->type;
  const DType t = op.operands[0]->type.dtype;
  if (!is_float(t) || rt.dtype != DType::Bool || rt.shape != op.operands[0]->type.shape) return {};
  return [d, rt, t](std::span<const DeviceArray> in) {
    DeviceArray out = d->allocate(rt.dtype, rt.shape);
    launch_is_finite(t, in[0].data.get(), static_cast<bool*>(out.data.get()), out.size(),
                     d->stream());
    return one(std::move(out));
  };
}

DeviceKernel reduce_precision_kernel(const ir::Operation& op, Device* d) {
  if (op.operands.size() != 1 || op.num_results() != 1) return {};
  const ir::Type rt = op.result(0)->type;
  const ir::Attribute* eb = op.attr("exponent_bits");
  const ir::Attribute* mb = op.attr("mantissa_bits");
  if (!is_float(rt.dtype) || op.operands[0]->type != rt || !eb || !mb ||
      eb->kind != ir::Attribute::Kind::Integer || mb->kind != ir::Attribute::Kind::Integer ||
      eb->integer < 1 || mb->integer < 0)
    return {};
  const int e = static_cast<int>(eb->integer), m = static_cast<int>(mb->integer);
  return [d, rt, e, m](std::span<const DeviceArray> in) {
    DeviceArray out = d->allocate(rt.dtype, rt.shape);
    launch_reduce_precision(rt.dtype, e, m, in[0].data.get(), out.data.get(), out.size(),
                            d->stream());
    return one(std::move(out));
  };
}

int64_t struct_int(const ir::Attribute& s, const char* name) {
  const ir::Attribute* f = s.field(name);
  if (!f) return -1;
  if (f->kind == ir::Attribute::Kind::Integer) return f->integer;
  const auto v = ir::as_ints(*f);
  return v.size() == 1 ? v[0] : -1;
}

std::vector<int64_t> struct_ints(const ir::Attribute& s, const char* name) {
  const ir::Attribute* f = s.field(name);
  return f ? ir::as_ints(*f) : std::vector<int64_t>{};
}

int64_t int_or(const ir::Operation& op, const char* name, int64_t fallback) {
  const ir::Attribute* a = op.attr(name);
  if (!a) return fallback;
  if (a->kind == ir::Attribute::Kind::Integer) return a->integer;
  const auto v = ir::as_ints(*a);
  return v.size() == 1 ? v[0] : -1;
}

// The CPU backend's checks (linalg_kernels.cpp) decide validity; a form that fails them
// returns no kernel, so its host step reports the problem.
DeviceKernel convolution_kernel(const ir::Operation& op, Device* d) {
  if (op.operands.size() != 2 || op.num_results() != 1) return {};
  const ir::Type& lt = op.operands[0]->type;
  const ir::Type& kt = op.operands[1]->type;
  const ir::Type rt = op.result(0)->type;
  const ir::Attribute* dn = op.attr("dimension_numbers");
  if (!dn || !is_float(rt.dtype) || lt.dtype != rt.dtype || kt.dtype != rt.dtype) return {};
  const int64_t rank = lt.rank();
  if (rank < 2 || kt.rank() != rank || rt.rank() != rank) return {};
  const int nsp = static_cast<int>(rank - 2);
  const int64_t ib = struct_int(*dn, "input_batch_dimension");
  const int64_t ifd = struct_int(*dn, "input_feature_dimension");
  const int64_t kid = struct_int(*dn, "kernel_input_feature_dimension");
  const int64_t kod = struct_int(*dn, "kernel_output_feature_dimension");
  const int64_t ob = struct_int(*dn, "output_batch_dimension");
  const int64_t ofd = struct_int(*dn, "output_feature_dimension");
  const auto is = struct_ints(*dn, "input_spatial_dimensions");
  const auto ks = struct_ints(*dn, "kernel_spatial_dimensions");
  const auto os = struct_ints(*dn, "output_spatial_dimensions");
  for (int64_t v : {ib, ifd, kid, kod, ob, ofd})
    if (v < 0 || v >= rank) return {};
  if (static_cast<int>(is.size()) != nsp || static_cast<int>(ks.size()) != nsp ||
      static_cast<int>(os.size()) != nsp)
    return {};
  const auto stride = ints_or(op, "window_strides", nsp, 1);
  const auto pad = ints_or(op, "padding", 2 * nsp, 0);
  const auto ldil = ints_or(op, "lhs_dilation", nsp, 1);
  const auto rdil = ints_or(op, "rhs_dilation", nsp, 1);
  const auto rev = ints_or(op, "window_reversal", nsp, 0);
  ConvGeometry g;
  g.nsp = nsp;
  g.feature_groups = int_or(op, "feature_group_count", 1);
  g.batch_groups = int_or(op, "batch_group_count", 1);
  if (stride.size() != static_cast<size_t>(nsp) || pad.size() != 2 * static_cast<size_t>(nsp) ||
      ldil.size() != static_cast<size_t>(nsp) || rdil.size() != static_cast<size_t>(nsp) ||
      rev.size() != static_cast<size_t>(nsp) || g.feature_groups < 1 || g.batch_groups < 1 ||
      (g.feature_groups > 1 && g.batch_groups > 1))
    return {};
  const int64_t N = lt.shape[ib], C = lt.shape[ifd], O = kt.shape[kod];
  const int64_t G = g.feature_groups * g.batch_groups;
  if (C % g.feature_groups != 0 || kt.shape[kid] * g.feature_groups != C || O % G != 0 ||
      N % g.batch_groups != 0)
    return {};
  g.Cg = C / g.feature_groups;
  g.Og = O / G;
  g.Nout = N / g.batch_groups;
  const auto ls = strides_of(lt.shape), kst = strides_of(kt.shape);
  g.in_batch_stride = ls[ib];
  g.in_feature_stride = ls[ifd];
  g.k_in_stride = kst[kid];
  g.k_out_stride = kst[kod];
  Shape expect(rank);
  expect[ob] = g.Nout;
  expect[ofd] = O;
  for (int k = 0; k < nsp; ++k) {
    if (stride[k] <= 0 || ldil[k] <= 0 || rdil[k] <= 0) return {};
    const int64_t sp = lt.shape[is[k]], kn = kt.shape[ks[k]];
    const int64_t dil_in = sp == 0 ? 0 : (sp - 1) * ldil[k] + 1;
    const int64_t padded = pad[2 * k] + dil_in + pad[2 * k + 1];
    const int64_t dil_win = kn == 0 ? 0 : (kn - 1) * rdil[k] + 1;
    expect[os[k]] = (padded <= 0 || dil_win > padded) ? 0 : (padded - dil_win) / stride[k] + 1;
    g.in_spatial[k] = sp;
    g.in_spatial_stride[k] = ls[is[k]];
    g.k_spatial[k] = kn;
    g.k_spatial_stride[k] = kst[ks[k]];
    g.stride[k] = stride[k];
    g.pad_low[k] = pad[2 * k];
    g.lhs_dilation[k] = ldil[k];
    g.rhs_dilation[k] = rdil[k];
    g.reverse[k] = rev[k] != 0;
    g.out_spatial_dim[k] = static_cast<int>(os[k]);
  }
  if (expect != rt.shape) return {};
  g.out_rank = static_cast<int>(rank);
  for (int64_t k = 0; k < rank; ++k) g.out_dims[k] = rt.shape[k];
  g.out_batch_dim = static_cast<int>(ob);
  g.out_feature_dim = static_cast<int>(ofd);
  return [d, rt, g](std::span<const DeviceArray> in) {
    DeviceArray out = d->allocate(rt.dtype, rt.shape);
    launch_convolution(rt.dtype, g, in[0].data.get(), in[1].data.get(), out.data.get(), out.size(),
                       d->stream());
    return one(std::move(out));
  };
}

DeviceKernel triangular_solve_kernel(const ir::Operation& op, Device* d) {
  if (op.operands.size() != 2 || op.num_results() != 1) return {};
  const ir::Type& at = op.operands[0]->type;
  const ir::Type& bt = op.operands[1]->type;
  const ir::Type rt = op.result(0)->type;
  if (rt != bt || !is_float(at.dtype) || at.dtype != bt.dtype) return {};
  const int64_t rank = at.rank();
  if (rank < 2 || bt.rank() != rank || at.shape[rank - 1] != at.shape[rank - 2]) return {};
  TriangularSolve p;
  p.m = at.shape[rank - 1];
  for (int64_t k = 0; k < rank - 2; ++k) {
    if (at.shape[k] != bt.shape[k]) return {};
    p.batch *= at.shape[k];
  }
  p.rows = bt.shape[rank - 2];
  p.cols = bt.shape[rank - 1];
  p.left = unit_or_true(op, "left_side");
  p.lower = unit_or_true(op, "lower");
  p.unit = unit_or_true(op, "unit_diagonal");
  const ir::Attribute* tr = op.attr("transpose_a");
  const std::string t =
      !tr ? "NO_TRANSPOSE" : (tr->kind == ir::Attribute::Kind::Enum ? tr->enum_value : tr->text);
  if (t != "NO_TRANSPOSE" && t != "TRANSPOSE" && t != "ADJOINT") return {};
  p.transpose = t != "NO_TRANSPOSE";  // the adjoint of a real matrix is its transpose
  if ((p.left ? p.rows : p.cols) != p.m) return {};
  return [d, rt, p](std::span<const DeviceArray> in) {
    DeviceArray out = d->allocate(rt.dtype, rt.shape);
    launch_triangular_solve(rt.dtype, p, in[0].data.get(), in[1].data.get(), out.data.get(),
                            d->stream());
    return one(std::move(out));
  };
}

DeviceKernel rng_bit_generator_kernel(const ir::Operation& op, Device* d) {
  const rng_bits::Plan p = rng_bits::plan(op);
  const ir::Type state_type = op.result(0)->type, out_type = op.result(1)->type;
  return [d, p, state_type, out_type](std::span<const DeviceArray> in) {
    DeviceArray new_state = d->allocate(state_type.dtype, state_type.shape);
    DeviceArray out = d->allocate(out_type.dtype, out_type.shape);
    launch_rng_bit_generator(p, in[0].data.get(), out.data.get(), new_state.data.get(),
                             d->stream());
    std::vector<DeviceArray> results;
    results.push_back(std::move(new_state));
    results.push_back(std::move(out));
    return results;
  };
}

DeviceKernel identity_kernel(const ir::Operation& op) {
  if (op.operands.size() != op.num_results()) return {};
  return [](std::span<const DeviceArray> in) {
    return std::vector<DeviceArray>(in.begin(), in.end());
  };
}

// A convert that keeps narrow values (compiler/narrow_types.h leaves only those).
DeviceKernel narrow_convert_kernel(const ir::Operation& op, Device* d) {
  if (op.operands.size() != 1 || op.num_results() != 1) return {};
  const DType from = op.operands[0]->type.dtype;
  const ir::Type rt = op.result(0)->type;
  if (op.operands[0]->type.shape != rt.shape || !compiler::is_native_convert(from, rt.dtype))
    return {};
  return [d, from, rt](std::span<const DeviceArray> in) {
    DeviceArray out = d->allocate(rt.dtype, rt.shape);
    launch_narrow_convert(from, rt.dtype, in[0].data.get(), out.data.get(), out.size(),
                          d->stream());
    return one(std::move(out));
  };
}

}  // namespace

DeviceKernel narrow_kernel(const ir::Operation& op, const OpKernelContext& ctx) {
  if (!fits_rank(op)) return {};
  if (op.name == "stablehlo.constant") return constant_kernel(op, ctx);
  if (op.name == "stablehlo.convert") return narrow_convert_kernel(op, ctx.device.get());
  return {};
}

DeviceKernel op_kernel(const ir::Operation& op, const OpKernelContext& ctx) {
  if (!compiler::sdpa_target(op).empty()) return cudnn_sdpa_kernel(op, ctx.device);
  if (!fits_rank(op)) return {};
  Device* d = ctx.device.get();
  const std::string& name = op.name;
  if (name == "stablehlo.constant") return constant_kernel(op, ctx);
  if (name == "stablehlo.clamp") return clamp_kernel(op, d);
  if (name == "stablehlo.reverse") return reverse_kernel(op, d);
  if (name == "stablehlo.bitcast_convert") return bitcast_convert_kernel(op);
  if (name == "stablehlo.dynamic_slice") return dynamic_slice_kernel(op, d);
  if (name == "stablehlo.dynamic_update_slice") return dynamic_update_slice_kernel(op, d);
  if (name == "stablehlo.gather") return gather_kernel(op, d);
  if (name == "stablehlo.scatter") return scatter_kernel(op, d, &ctx.module);
  if (name == "stablehlo.reduce") return reduce_kernel(op, d, &ctx.module);
  if (name == "stablehlo.sort") return sort_kernel(op, ctx.device, &ctx.module);
  if (name == "stablehlo.reduce_window") return reduce_window_kernel(op, d, &ctx.module);
  if (name == "stablehlo.select_and_scatter") return select_and_scatter_kernel(op, d, &ctx.module);
  if (name == "stablehlo.dot_general") return naive_dot_kernel(op, d);
  if (name == "stablehlo.is_finite") return is_finite_kernel(op, d);
  if (name == "stablehlo.convolution") return convolution_kernel(op, d);
  if (name == "stablehlo.triangular_solve") return triangular_solve_kernel(op, d);
  if (name == "stablehlo.cholesky") return cholesky_kernel(op, d);
  if (name == "stablehlo.custom_call") return linalg_call_kernel(op, d);
  if (name == "stablehlo.reduce_precision") return reduce_precision_kernel(op, d);
  if (name == "stablehlo.optimization_barrier") return identity_kernel(op);
  if (name == "stablehlo.rng_bit_generator") return rng_bit_generator_kernel(op, d);
  if (!ctx.spmd) return control_kernel(op, ctx);
  return {};
}

bool tf32_allowed(const ir::Operation& op) {
  // The op's own precision decides unless it is DEFAULT for both operands.
  if (const ir::Attribute* p = op.attr("precision_config")) {
    bool high = false;
    for (const auto& e : p->elements) {
      if (e->enum_value == "HIGHEST") return false;
      high = high || e->enum_value == "HIGH";
    }
    if (high) return true;
  }
  const char* v = std::getenv("CUJAX_DEFAULT_MATMUL_PRECISION");
  if (!v || !*v) return false;
  const std::string s = v;
  if (s == "highest" || s == "float32" || s == "HIGHEST") return false;
  if (s == "default" || s == "high" || s == "tensorfloat32" || s == "bfloat16" ||
      s == "bfloat16_3x" || s == "DEFAULT" || s == "HIGH")
    return true;
  throw Error("CUJAX_DEFAULT_MATMUL_PRECISION='" + s +
              "' is not one of default, high, highest, bfloat16, tensorfloat32, float32");
}

bool is_check(const ir::Operation& op) {
  if (op.name.starts_with("check.")) return true;  // the interpreter suite's check dialect
  if (op.name != "stablehlo.custom_call") return false;
  const ir::Attribute* target = op.attr("call_target_name");
  return target && runtime::check_kind_from_name(target->text).has_value();
}

void report_host_fallback(const ir::Operation& op, runtime::HostFallback mode) {
  if (mode == runtime::HostFallback::Allow) return;
  if (mode == runtime::HostFallback::Error)
    throw UnsupportedError(op.where() +
                           ": has no cuda kernel for these types and attributes and would run on "
                           "the host (CUJAX_HOST_FALLBACK=error)");
  static std::mutex mu;
  static std::set<std::string> logged;
  std::lock_guard<std::mutex> lock(mu);
  if (!logged.insert(op.name).second) return;
  std::fprintf(stderr,
               "cujax: cuda: %s runs on the host (no device kernel for its types/attributes; "
               "first at %s); CUJAX_HOST_FALLBACK=error makes this an error\n",
               op.name.c_str(), op.where().c_str());
}

}  // namespace cujax::cuda
