// Data-movement ops: reshape, broadcast_in_dim, transpose, slice, pad, concatenate, reverse,
// iota, dynamic_slice, dynamic_update_slice, get_dimension_size. All but iota move elements
// without looking at them, so they run on the element width only: each is one or a few
// strided box copies (index::StridedCopy) precomputed in the factory.
#include <algorithm>
#include <cstring>

#include "backends/common/index.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/strided_copy.h"

namespace cujax::cpu {

namespace {

constexpr int64_t kParallelElements = 64 * 1024;

const ir::Type& operand_type(const ir::Operation& op, size_t i) {
  if (i >= op.operands.size())
    unsupported(op, "expects at least " + std::to_string(i + 1) + " operands");
  return op.operands[i]->type;
}

const ir::Type& result_type(const ir::Operation& op) {
  if (op.results.size() != 1) unsupported(op, "expects one result");
  return op.result(0)->type;
}

void check_rank(const ir::Operation& op, int64_t rank) {
  if (rank > index::kMaxRank)
    unsupported(op, "rank " + std::to_string(rank) + " is above the supported " +
                        std::to_string(index::kMaxRank));
}

std::vector<int64_t> strides_of(const Shape& s) {
  return row_major_strides(s);
}

void check_input(const HostTensor& t, const ir::Type& type, const std::string& where,
                 const char* what) {
  if (t.shape() != type.shape || t.dtype() != type.dtype)
    throw RuntimeError(where + ": " + what + " is " + t.type_string() + ", expected " + type.str());
}

// Reads element i of an integer tensor as an index (unsigned values saturate).
int64_t read_index(const HostTensor& t, int64_t i, const std::string& where) {
  return visit_dtype(t.dtype(), [&](auto tag) -> int64_t {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) {
      return index::to_index(t.data_as<T>()[i]);
    } else {
      throw RuntimeError(where + ": start index of type " + t.type_string() + " is not an integer");
    }
  });
}

// Fills n elements of `w` bytes with the value at `value`.
void fill_elements(void* dst, int64_t n, const void* value, size_t w) {
  auto run = [&](auto zero) {
    using U = decltype(zero);
    U v;
    std::memcpy(&v, value, sizeof(U));
    U* d = static_cast<U*>(dst);
    if (n >= kParallelElements * 4) {
      parallel_for(n, kParallelElements, [&](int64_t b, int64_t e) { std::fill(d + b, d + e, v); });
    } else {
      std::fill(d, d + n, v);
    }
  };
  switch (w) {
    case 1:
      run(uint8_t{});
      break;
    case 2:
      run(uint16_t{});
      break;
    case 4:
      run(uint32_t{});
      break;
    case 8:
      run(uint64_t{});
      break;
    default:  // 16: complex<f64>
      run(Word128{});
      break;
  }
}

bool all_zero_bytes(const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i]) return false;
  return true;
}

// A kernel whose only work is one strided copy of its first input into a fresh result. When
// the copy reads the whole input in order, the input is returned as is (reshaped).
Kernel copy_kernel(const ir::Operation& op, index::StridedCopy c) {
  const ir::Type out = result_type(op);
  const ir::Type in_type = operand_type(op, 0);
  c.simplify();
  const int64_t n_out = out.num_elements();
  const bool identity =
      in_type.dtype == out.dtype && n_out == in_type.num_elements() && c.src_offset == 0 &&
      c.dst_offset == 0 &&
      (c.rank == 0 || (c.rank == 1 && c.src_strides[0] == 1 && c.dst_strides[0] == 1) ||
       n_out == 0);
  const std::string where = op.where();
  return [c, out, in_type, identity, where](std::span<const HostTensor> in, ExecContext&) {
    check_input(in[0], in_type, where, "operand");
    if (identity) return std::vector<HostTensor>{in[0].reshaped(out.shape)};
    // Every caller's copy spans the whole result, so it needs no zero fill.
    HostTensor r = HostTensor::uninitialized(out.dtype, out.shape);
    run_strided_copy(c, in[0].data(), r.data(), size_of(out.dtype));
    return std::vector<HostTensor>{r};
  };
}

Kernel reshape_kernel(const ir::Operation& op, Compiler&) {
  const ir::Type out = result_type(op);
  const ir::Type in_type = operand_type(op, 0);
  if (out.num_elements() != in_type.num_elements() || out.dtype != in_type.dtype)
    unsupported(op, "cannot reshape " + in_type.str() + " to " + out.str());
  const std::string where = op.where();
  return [out, in_type, where](std::span<const HostTensor> in, ExecContext&) {
    check_input(in[0], in_type, where, "operand");
    return std::vector<HostTensor>{in[0].reshaped(out.shape)};
  };
}

// result[i] = operand[j], j[k] = operand dim k is 1 ? 0 : i[dims[k]].
Kernel broadcast_common(const ir::Operation& op, const std::vector<int64_t>& dims) {
  const ir::Type out = result_type(op);
  const Shape& s = operand_type(op, 0).shape;
  check_rank(op, out.rank());
  if (static_cast<int64_t>(dims.size()) != static_cast<int64_t>(s.size()))
    unsupported(op, "broadcast_dimensions must have one entry per operand dimension");
  const auto os = strides_of(s);
  std::vector<int64_t> src_stride(out.rank(), 0);
  std::vector<bool> used(out.rank(), false);
  for (size_t k = 0; k < dims.size(); ++k) {
    const int64_t d = dims[k];
    if (d < 0 || d >= out.rank() || used[d])
      unsupported(op, "invalid broadcast dimension " + std::to_string(d));
    used[d] = true;
    if (s[k] != 1 && s[k] != out.shape[d])
      unsupported(op, "operand dimension " + std::to_string(k) + " of size " +
                          std::to_string(s[k]) + " does not broadcast to " +
                          std::to_string(out.shape[d]));
    if (s[k] != 1) src_stride[d] = os[k];
  }
  const auto rs = strides_of(out.shape);
  index::StridedCopy c;
  for (int64_t d = 0; d < out.rank(); ++d) c.push(out.shape[d], src_stride[d], rs[d]);
  return copy_kernel(op, c);
}

Kernel broadcast_in_dim_kernel(const ir::Operation& op, Compiler&) {
  return broadcast_common(op, op.ints("broadcast_dimensions"));
}

// Legacy `broadcast`: broadcast_sizes are prepended to the operand's shape.
Kernel broadcast_kernel(const ir::Operation& op, Compiler&) {
  const auto sizes = op.ints("broadcast_sizes");
  std::vector<int64_t> dims;
  for (int64_t k = 0; k < operand_type(op, 0).rank(); ++k)
    dims.push_back(static_cast<int64_t>(sizes.size()) + k);
  return broadcast_common(op, dims);
}

// result dim d is operand dim permutation[d].
Kernel transpose_kernel(const ir::Operation& op, Compiler&) {
  const auto perm = op.ints("permutation");
  const ir::Type out = result_type(op);
  const Shape& s = operand_type(op, 0).shape;
  check_rank(op, out.rank());
  if (perm.size() != s.size()) unsupported(op, "permutation must have one entry per dimension");
  std::vector<bool> seen(s.size(), false);
  for (size_t d = 0; d < perm.size(); ++d) {
    if (perm[d] < 0 || perm[d] >= static_cast<int64_t>(s.size()) || seen[perm[d]])
      unsupported(op, "invalid permutation");
    seen[perm[d]] = true;
    if (out.shape[d] != s[perm[d]]) unsupported(op, "result shape does not match the permutation");
  }
  const auto os = strides_of(s);
  const auto rs = strides_of(out.shape);
  index::StridedCopy c;
  for (size_t d = 0; d < perm.size(); ++d) c.push(out.shape[d], os[perm[d]], rs[d]);
  return copy_kernel(op, c);
}

Kernel slice_kernel(const ir::Operation& op, Compiler&) {
  const auto start = op.ints("start_indices");
  const auto limit = op.ints("limit_indices");
  auto strides = op.ints_if_present("strides").value_or(std::vector<int64_t>(start.size(), 1));
  const ir::Type out = result_type(op);
  const Shape& s = operand_type(op, 0).shape;
  check_rank(op, out.rank());
  if (start.size() != s.size() || limit.size() != s.size() || strides.size() != s.size())
    unsupported(op, "start_indices, limit_indices and strides need one entry per dimension");
  const auto os = strides_of(s);
  const auto rs = strides_of(out.shape);
  index::StridedCopy c;
  for (size_t d = 0; d < s.size(); ++d) {
    if (start[d] < 0 || start[d] > limit[d] || limit[d] > s[d] || strides[d] <= 0)
      unsupported(op, "invalid slice bounds in dimension " + std::to_string(d));
    const int64_t n = (limit[d] - start[d] + strides[d] - 1) / strides[d];
    if (n != out.shape[d]) unsupported(op, "result shape does not match the slice bounds");
    c.src_offset += start[d] * os[d];
    c.push(n, strides[d] * os[d], rs[d]);
  }
  return copy_kernel(op, c);
}

Kernel reverse_kernel(const ir::Operation& op, Compiler&) {
  const auto dims = op.ints("dimensions");
  const ir::Type out = result_type(op);
  const Shape& s = out.shape;
  check_rank(op, out.rank());
  const auto os = strides_of(s);
  std::vector<bool> rev(s.size(), false);
  for (int64_t d : dims) {
    if (d < 0 || d >= static_cast<int64_t>(s.size()) || rev[d])
      unsupported(op, "invalid reverse dimension " + std::to_string(d));
    rev[d] = true;
  }
  index::StridedCopy c;
  for (size_t d = 0; d < s.size(); ++d) {
    if (rev[d] && s[d] > 0) {
      c.src_offset += (s[d] - 1) * os[d];
      c.push(s[d], -os[d], os[d]);
    } else {
      c.push(s[d], os[d], os[d]);
    }
  }
  return copy_kernel(op, c);
}

Kernel pad_kernel(const ir::Operation& op, Compiler&) {
  const auto low = op.ints("edge_padding_low");
  const auto high = op.ints("edge_padding_high");
  const auto interior = op.ints("interior_padding");
  const ir::Type out = result_type(op);
  const ir::Type in_type = operand_type(op, 0);
  const ir::Type pad_type = operand_type(op, 1);
  const Shape& s = in_type.shape;
  check_rank(op, out.rank());
  if (low.size() != s.size() || high.size() != s.size() || interior.size() != s.size())
    unsupported(op, "padding attributes need one entry per dimension");
  if (pad_type.rank() != 0) unsupported(op, "padding value must be a scalar");
  const auto os = strides_of(s);
  const auto rs = strides_of(out.shape);
  index::StridedCopy c;
  for (size_t d = 0; d < s.size(); ++d) {
    if (interior[d] < 0) unsupported(op, "interior padding must be non-negative");
    const int64_t size = low[d] + high[d] + s[d] + (s[d] > 0 ? (s[d] - 1) * interior[d] : 0);
    if (size != out.shape[d]) unsupported(op, "result shape does not match the padding");
    int64_t first, count;
    index::pad_source_range(s[d], out.shape[d], low[d], interior[d], &first, &count);
    c.src_offset += first * os[d];
    c.dst_offset += (low[d] + first * (interior[d] + 1)) * rs[d];
    c.push(count, os[d], (interior[d] + 1) * rs[d]);
  }
  c.simplify();
  const std::string where = op.where();
  return [c, out, in_type, pad_type, where](std::span<const HostTensor> in, ExecContext&) {
    check_input(in[0], in_type, where, "operand");
    check_input(in[1], pad_type, where, "padding value");
    const size_t w = size_of(out.dtype);
    HostTensor r(out.dtype, out.shape);
    if (!all_zero_bytes(in[1].data(), w)) fill_elements(r.data(), r.size(), in[1].data(), w);
    run_strided_copy(c, in[0].data(), r.data(), w);
    return std::vector<HostTensor>{r};
  };
}

Kernel concatenate_kernel(const ir::Operation& op, Compiler&) {
  const int64_t dim = op.int_attr("dimension");
  const ir::Type out = result_type(op);
  check_rank(op, out.rank());
  if (dim < 0 || dim >= out.rank()) unsupported(op, "invalid concatenate dimension");
  const auto rs = strides_of(out.shape);
  std::vector<index::StridedCopy> copies;
  std::vector<ir::Type> in_types;
  int64_t at = 0;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    const ir::Type& t = operand_type(op, i);
    if (t.rank() != out.rank()) unsupported(op, "operands must have the result's rank");
    for (int64_t d = 0; d < out.rank(); ++d)
      if (d != dim && t.shape[d] != out.shape[d])
        unsupported(op, "operand " + std::to_string(i) + " does not match the result shape");
    const auto is = strides_of(t.shape);
    index::StridedCopy c;
    c.dst_offset = at * rs[dim];
    for (int64_t d = 0; d < out.rank(); ++d) c.push(t.shape[d], is[d], rs[d]);
    c.simplify();
    copies.push_back(c);
    in_types.push_back(t);
    at += t.shape[dim];
  }
  if (at != out.shape[dim]) unsupported(op, "operand sizes do not add up to the result's");
  const std::string where = op.where();
  return [copies, in_types, out, where](std::span<const HostTensor> in, ExecContext&) {
    if (copies.size() == 1) {
      check_input(in[0], in_types[0], where, "operand");
      return std::vector<HostTensor>{in[0]};
    }
    HostTensor r(out.dtype, out.shape);
    for (size_t i = 0; i < copies.size(); ++i) {
      check_input(in[i], in_types[i], where, "operand");
      run_strided_copy(copies[i], in[i].data(), r.data(), size_of(out.dtype));
    }
    return std::vector<HostTensor>{r};
  };
}

template <class T>
void fill_iota(T* p, const Shape& shape, int64_t dim) {
  const int64_t n = shape.empty() ? 1 : shape[dim];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
  for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < n; ++i) {
      T v;
      if constexpr (std::is_same_v<T, bool>) {
        v = i != 0;
      } else if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
        v = T(static_cast<double>(i));
      } else {
        v = static_cast<T>(i);
      }
      T* row = p + (o * n + i) * inner;
      std::fill(row, row + inner, v);
    }
}

Kernel iota_kernel(const ir::Operation& op, Compiler&) {
  const ir::Type out = result_type(op);
  const int64_t dim = op.int_attr("iota_dimension");
  if (out.rank() == 0 || dim < 0 || dim >= out.rank()) unsupported(op, "invalid iota_dimension");
  return [out, dim](std::span<const HostTensor>, ExecContext&) {
    HostTensor r(out.dtype, out.shape);
    if (r.size() == 0) return std::vector<HostTensor>{r};
    visit_dtype_with_complex(out.dtype, [&](auto tag) {  // complex: (index, 0)
      using T = typename decltype(tag)::type;
      fill_iota(r.data_as<T>(), out.shape, dim);
    });
    return std::vector<HostTensor>{r};
  };
}

Kernel dynamic_slice_kernel(const ir::Operation& op, Compiler&) {
  const auto sizes = op.ints("slice_sizes");
  const ir::Type out = result_type(op);
  const ir::Type in_type = operand_type(op, 0);
  const Shape& s = in_type.shape;
  check_rank(op, out.rank());
  if (sizes.size() != s.size() || op.operands.size() != 1 + s.size())
    unsupported(op, "needs one start index and one slice size per dimension");
  const auto os = strides_of(s);
  const auto rs = strides_of(out.shape);
  index::StridedCopy c;
  for (size_t d = 0; d < s.size(); ++d) {
    if (sizes[d] < 0 || sizes[d] > s[d] || sizes[d] != out.shape[d])
      unsupported(op, "invalid slice size in dimension " + std::to_string(d));
    if (operand_type(op, 1 + d).rank() != 0) unsupported(op, "start indices must be scalars");
    c.push(sizes[d], os[d], rs[d]);
  }
  c.simplify();
  const std::string where = op.where();
  return [c, out, in_type, os, s, sizes, where](std::span<const HostTensor> in, ExecContext&) {
    check_input(in[0], in_type, where, "operand");
    index::StridedCopy k = c;
    for (size_t d = 0; d < s.size(); ++d)
      k.src_offset += index::clamp_start(read_index(in[1 + d], 0, where), s[d], sizes[d]) * os[d];
    HostTensor r(out.dtype, out.shape);
    run_strided_copy(k, in[0].data(), r.data(), size_of(out.dtype));
    return std::vector<HostTensor>{r};
  };
}

Kernel dynamic_update_slice_kernel(const ir::Operation& op, Compiler&) {
  const ir::Type out = result_type(op);
  const ir::Type in_type = operand_type(op, 0);
  const ir::Type upd_type = operand_type(op, 1);
  const Shape& s = in_type.shape;
  const Shape& u = upd_type.shape;
  check_rank(op, out.rank());
  if (u.size() != s.size() || op.operands.size() != 2 + s.size())
    unsupported(op, "needs an update of the operand's rank and one start index per dimension");
  const auto os = strides_of(s);
  const auto us = strides_of(u);
  index::StridedCopy c;
  for (size_t d = 0; d < s.size(); ++d) {
    if (u[d] > s[d]) unsupported(op, "update is larger than the operand");
    if (operand_type(op, 2 + d).rank() != 0) unsupported(op, "start indices must be scalars");
    c.push(u[d], us[d], os[d]);
  }
  c.simplify();
  const std::string where = op.where();
  return
      [c, out, in_type, upd_type, os, s, u, where](std::span<const HostTensor> in, ExecContext&) {
        check_input(in[0], in_type, where, "operand");
        check_input(in[1], upd_type, where, "update");
        if (in[1].size() == 0) return std::vector<HostTensor>{in[0]};
        index::StridedCopy k = c;
        for (size_t d = 0; d < s.size(); ++d)
          k.dst_offset += index::clamp_start(read_index(in[2 + d], 0, where), s[d], u[d]) * os[d];
        // In place when nothing else sees the operand (a donated cache, a dead value).
        HostTensor r = in[0].is_unique() ? in[0] : in[0].clone();
        run_strided_copy(k, in[1].data(), r.data(), size_of(out.dtype));
        return std::vector<HostTensor>{r};
      };
}

Kernel get_dimension_size_kernel(const ir::Operation& op, Compiler&) {
  const int64_t dim = op.int_attr("dimension");
  const ir::Type& in_type = operand_type(op, 0);
  const ir::Type out = result_type(op);
  if (dim < 0 || dim >= in_type.rank()) unsupported(op, "invalid dimension");
  if (!is_integer(out.dtype)) unsupported(op, "result must be an integer scalar");
  const int64_t size = in_type.shape[dim];
  HostTensor r(out.dtype, out.shape);
  visit_dtype(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) *r.data_as<T>() = static_cast<T>(size);
  });
  return [r](std::span<const HostTensor>, ExecContext&) { return std::vector<HostTensor>{r}; };
}

}  // namespace

void register_shape_kernels(KernelRegistry& r) {
  r.add("stablehlo.reshape", reshape_kernel);
  r.add("stablehlo.dynamic_reshape", reshape_kernel);  // result type is static
  r.add("stablehlo.broadcast_in_dim", broadcast_in_dim_kernel);
  r.add("stablehlo.dynamic_broadcast_in_dim", broadcast_in_dim_kernel);
  r.add("stablehlo.broadcast", broadcast_kernel);
  r.add("stablehlo.transpose", transpose_kernel);
  r.add("stablehlo.slice", slice_kernel);
  r.add("stablehlo.reverse", reverse_kernel);
  r.add("stablehlo.pad", pad_kernel);
  r.add("stablehlo.concatenate", concatenate_kernel);
  r.add("stablehlo.iota", iota_kernel);
  r.add("stablehlo.dynamic_iota", iota_kernel);
  r.add("stablehlo.dynamic_slice", dynamic_slice_kernel);
  r.add("stablehlo.dynamic_update_slice", dynamic_update_slice_kernel);
  r.add("stablehlo.get_dimension_size", get_dimension_size_kernel);
}

}  // namespace cujax::cpu
