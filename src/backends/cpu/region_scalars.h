// What the CPU backend's region-applying kernels share (reduction_kernels.cpp,
// window_kernels.cpp, sort_kernels.cpp): scalars as bit patterns with the spec's element
// semantics, compare directions, and the ways of running a region on scalars.
//
// Those kernels apply a region to scalars, in one of three ways, fastest first:
//  - a region that is one commutative binary op (simple_binary_region) with a single input
//    runs as a loop templated on the dtype and the op (visit_binop);
//  - a region of scalar element-wise ops (compare, select, and/or/xor/not, add, subtract,
//    multiply, maximum, minimum, negate, abs, constants) runs on a small scalar interpreter
//    (ScalarProgram) that allocates nothing and may run on several threads;
//  - anything else (calls, other ops, captured values) runs the compiled region program on
//    rank-0 tensors (RegionFn picks between the last two).
// All three evaluate the spec's semantics in the same, sequential order: the accumulator starts
// at the init value and takes the elements in ascending lexicographic order of their index.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backends/cpu/elementwise_ops.h"
#include "backends/cpu/kernels.h"

namespace cujax::cpu::regions {

inline constexpr int kMaxRank = 32;
// Elements folded per parallel work item; also the size of a reduction chunk.
inline constexpr int64_t kChunk = 32768;
// f16/bf16 arithmetic of the fast reduction loops: false rounds the accumulator back to the
// element type after every step, exactly as the region says (the spec's semantics).
inline constexpr bool kHalfAccumulateInFloat = false;

// ---------------------------------------------------------------------------------------------
// Scalars as bit patterns: a value of any dtype sits zero-extended in a uint64_t.

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;
template <class T>
inline constexpr bool is_fp_v = std::is_floating_point_v<T> || is_half_v<T>;

template <class T>
T from_bits(uint64_t b) {
  if constexpr (is_half_v<T>) {
    return T::from_bits(static_cast<uint16_t>(b));
  } else {
    T v;
    std::memcpy(&v, &b, sizeof(T));
    return v;
  }
}
template <class T>
uint64_t to_bits(T v) {
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
inline uint64_t load_bits(const std::byte* base, int64_t index, size_t esize) {
  uint64_t b = 0;
  std::memcpy(&b, base + index * static_cast<int64_t>(esize), esize);
  return b;
}
inline void store_bits(std::byte* base, int64_t index, size_t esize, uint64_t b) {
  std::memcpy(base + index * static_cast<int64_t>(esize), &b, esize);
}

// ---------------------------------------------------------------------------------------------
// Element semantics (StableHLO spec): integers wrap, booleans use logical ops, f16/bf16 compute
// in float and round, maximum/minimum are IEEE-754 maximum/minimum (NaN propagates, -0 < +0).

template <class T>
T s_add(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a || b;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else if constexpr (is_half_v<T>) {
    return T(static_cast<float>(a) + static_cast<float>(b));
  } else {
    return a + b;
  }
}
template <class T>
T s_sub(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a != b;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
  } else if constexpr (is_half_v<T>) {
    return T(static_cast<float>(a) - static_cast<float>(b));
  } else {
    return a - b;
  }
}
template <class T>
T s_mul(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a && b;
  } else if constexpr (std::is_integral_v<T>) {
    // Unsigned arithmetic at least 32 bits wide: no promotion to int, so no signed overflow.
    using W = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;
    return static_cast<T>(static_cast<W>(static_cast<W>(a) * static_cast<W>(b)));
  } else if constexpr (is_half_v<T>) {
    return T(static_cast<float>(a) * static_cast<float>(b));
  } else {
    return a * b;
  }
}
template <class T>
T s_max(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a || b;
  } else if constexpr (std::is_integral_v<T>) {
    return a > b ? a : b;
  } else {
    const auto fa = static_cast<std::conditional_t<is_half_v<T>, float, T>>(a);
    const auto fb = static_cast<decltype(fa)>(b);
    if (std::isnan(fa)) return a;
    if (std::isnan(fb)) return b;
    if (fa > fb) return a;
    if (fb > fa) return b;
    return std::signbit(fa) ? b : a;
  }
}
template <class T>
T s_min(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a && b;
  } else if constexpr (std::is_integral_v<T>) {
    return a < b ? a : b;
  } else {
    const auto fa = static_cast<std::conditional_t<is_half_v<T>, float, T>>(a);
    const auto fb = static_cast<decltype(fa)>(b);
    if (std::isnan(fa)) return a;
    if (std::isnan(fb)) return b;
    if (fa < fb) return a;
    if (fb < fa) return b;
    return std::signbit(fa) ? a : b;
  }
}
template <class T>
T s_and(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a && b;
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(a & b);
  } else {
    return a;  // rejected when the region is compiled
  }
}
template <class T>
T s_or(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a || b;
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(a | b);
  } else {
    return a;
  }
}
template <class T>
T s_xor(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a != b;
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(a ^ b);
  } else {
    return a;
  }
}
template <class T>
T s_not(T a) {
  if constexpr (std::is_same_v<T, bool>) {
    return !a;
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(~a);
  } else {
    return a;
  }
}
template <class T>
T s_neg(T a) {
  if constexpr (std::is_same_v<T, bool>) {
    return a;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(U{0} - static_cast<U>(a)));
  } else if constexpr (is_half_v<T>) {
    return T::from_bits(static_cast<uint16_t>(a.bits ^ 0x8000u));
  } else {
    return -a;
  }
}
template <class T>
T s_abs(T a) {
  if constexpr (std::is_same_v<T, bool> || std::is_unsigned_v<T>) {
    return a;
  } else if constexpr (std::is_integral_v<T>) {
    return a < 0 ? s_neg(a) : a;
  } else if constexpr (is_half_v<T>) {
    return T::from_bits(static_cast<uint16_t>(a.bits & 0x7fffu));
  } else {
    return std::fabs(a);
  }
}

using ew::CompareDirection;
enum class CmpKind : uint8_t { Float, TotalOrder, Signed, Unsigned };

template <class X>
bool ordered(X a, X b, CompareDirection d) {
  switch (d) {
    case CompareDirection::EQ:
      return a == b;
    case CompareDirection::NE:
      return a != b;
    case CompareDirection::GE:
      return a >= b;
    case CompareDirection::GT:
      return a > b;
    case CompareDirection::LE:
      return a <= b;
    case CompareDirection::LT:
      return a < b;
  }
  return false;
}

// IEEE-754 totalOrder as a signed integer key: -NaN < -Inf < ... < -0 < +0 < ... < +Inf < +NaN.
template <class T>
auto total_order_key(T v) {
  using S = std::conditional_t<sizeof(T) == 2, int16_t,
                               std::conditional_t<sizeof(T) == 4, int32_t, int64_t>>;
  S s;
  std::memcpy(&s, &v, sizeof(T));
  return s < 0 ? static_cast<S>(s ^ std::numeric_limits<S>::max()) : s;
}

template <class T>
bool s_compare(T a, T b, CompareDirection d, CmpKind k) {
  if constexpr (is_fp_v<T>) {
    if (k == CmpKind::TotalOrder) return ordered(total_order_key(a), total_order_key(b), d);
    using F = std::conditional_t<is_half_v<T>, float, T>;
    return ordered(static_cast<F>(a), static_cast<F>(b), d);
  } else if constexpr (std::is_same_v<T, bool>) {
    // i1 read as a signed integer is 0 or -1.
    if (k == CmpKind::Signed) return ordered(-static_cast<int>(a), -static_cast<int>(b), d);
    return ordered(static_cast<int>(a), static_cast<int>(b), d);
  } else {
    if (k == CmpKind::Signed)
      return ordered(static_cast<std::make_signed_t<T>>(a), static_cast<std::make_signed_t<T>>(b),
                     d);
    return ordered(static_cast<std::make_unsigned_t<T>>(a), static_cast<std::make_unsigned_t<T>>(b),
                   d);
  }
}

inline CmpKind default_cmp_kind(DType t) {
  if (is_float(t)) return CmpKind::Float;
  if (is_signed_int(t)) return CmpKind::Signed;
  return CmpKind::Unsigned;
}

// Direction and compare type of a stablehlo.compare op; nullopt when malformed.
inline std::optional<std::pair<CompareDirection, CmpKind>> compare_attrs(const ir::Operation& op,
                                                                         DType operand) {
  const ir::Attribute* d = op.attr("comparison_direction");
  if (!d || d->kind != ir::Attribute::Kind::Enum) return std::nullopt;
  auto dir = parse_compare_direction(d->enum_value);
  if (!dir) return std::nullopt;
  CmpKind kind = default_cmp_kind(operand);
  if (const ir::Attribute* t = op.attr("compare_type")) {
    if (t->kind != ir::Attribute::Kind::Enum) return std::nullopt;
    if (t->enum_value == "FLOAT")
      kind = CmpKind::Float;
    else if (t->enum_value == "TOTALORDER")
      kind = CmpKind::TotalOrder;
    else if (t->enum_value == "SIGNED")
      kind = CmpKind::Signed;
    else if (t->enum_value == "UNSIGNED")
      kind = CmpKind::Unsigned;
    else
      return std::nullopt;
    // A float compared as an integer (or the reverse) is not valid StableHLO.
    if (is_float(operand) != (kind == CmpKind::Float || kind == CmpKind::TotalOrder))
      return std::nullopt;
  }
  return std::make_pair(*dir, kind);
}

// ---------------------------------------------------------------------------------------------
// ScalarProgram: a straight-line interpreter for regions of scalar element-wise ops.

class ScalarProgram {
 public:
  static constexpr int kMaxSlots = 256;

  static std::optional<ScalarProgram> compile(const ir::Region& region) {
    if (region.blocks.size() != 1) return std::nullopt;
    const ir::Block& block = region.front();
    ScalarProgram p;
    std::unordered_map<const ir::Value*, int> slot;
    auto scalar = [](const ir::Type& t) { return !t.is_token && t.rank() == 0; };
    for (const auto& a : block.arguments) {
      if (!scalar(a->type)) return std::nullopt;
      slot[a.get()] = p.num_slots_++;
    }
    p.num_args_ = p.num_slots_;
    const ir::Operation* term = block.terminator();
    if (!term || term->name != "stablehlo.return") return std::nullopt;
    for (const auto& owned : block.ops) {
      const ir::Operation& op = *owned;
      if (&op == term) break;
      if (!op.regions.empty() || op.results.size() != 1 || !scalar(op.result()->type))
        return std::nullopt;
      Ins ins;
      const DType rt = op.result()->type.dtype;
      std::vector<int> in;
      std::vector<DType> in_types;
      for (const ir::Value* v : op.operands) {
        auto it = slot.find(v);
        if (it == slot.end() || !scalar(v->type)) return std::nullopt;  // captured or not scalar
        in.push_back(it->second);
        in_types.push_back(v->type.dtype);
      }
      auto binary = [&](Code c) {
        if (in.size() != 2 || in_types[0] != rt || in_types[1] != rt) return false;
        ins.code = c;
        ins.dtype = rt;
        ins.a = in[0];
        ins.b = in[1];
        return true;
      };
      auto unary = [&](Code c) {
        if (in.size() != 1 || in_types[0] != rt) return false;
        ins.code = c;
        ins.dtype = rt;
        ins.a = in[0];
        return true;
      };
      const bool logical = rt == DType::Bool || is_integer(rt);
      bool ok = false;
      const std::string& n = op.name;
      if (n == "stablehlo.add")
        ok = binary(Code::Add);
      else if (n == "stablehlo.subtract")
        ok = rt != DType::Bool && binary(Code::Sub);
      else if (n == "stablehlo.multiply")
        ok = binary(Code::Mul);
      else if (n == "stablehlo.maximum")
        ok = binary(Code::Max);
      else if (n == "stablehlo.minimum")
        ok = binary(Code::Min);
      else if (n == "stablehlo.and")
        ok = logical && binary(Code::And);
      else if (n == "stablehlo.or")
        ok = logical && binary(Code::Or);
      else if (n == "stablehlo.xor")
        ok = logical && binary(Code::Xor);
      else if (n == "stablehlo.not")
        ok = logical && unary(Code::Not);
      else if (n == "stablehlo.negate")
        ok = rt != DType::Bool && unary(Code::Neg);
      else if (n == "stablehlo.abs")
        ok = (is_signed_int(rt) || is_float(rt)) && unary(Code::Abs);
      else if (n == "stablehlo.select") {
        ok = in.size() == 3 && in_types[0] == DType::Bool && in_types[1] == rt && in_types[2] == rt;
        ins.code = Code::Select;
        ins.dtype = rt;
        if (ok) {
          ins.a = in[0];
          ins.b = in[1];
          ins.c = in[2];
        }
      } else if (n == "stablehlo.compare") {
        if (in.size() == 2 && in_types[0] == in_types[1] && rt == DType::Bool) {
          if (auto attrs = compare_attrs(op, in_types[0])) {
            ins.code = Code::Cmp;
            ins.dtype = in_types[0];
            ins.dir = attrs->first;
            ins.kind = attrs->second;
            ins.a = in[0];
            ins.b = in[1];
            ok = true;
          }
        }
      } else if (n == "stablehlo.constant") {
        const ir::Attribute* v = op.attr("value");
        if (in.empty() && v && v->kind == ir::Attribute::Kind::DenseElements &&
            v->tensor.size() == 1 && v->tensor.dtype() == rt) {
          ins.code = Code::Const;
          ins.dtype = rt;
          ins.imm = load_bits(static_cast<const std::byte*>(v->tensor.data()), 0, size_of(rt));
          ok = true;
        }
      }
      if (!ok) return std::nullopt;
      if (p.num_slots_ >= kMaxSlots) return std::nullopt;
      ins.out = p.num_slots_;
      slot[op.result()] = p.num_slots_++;
      p.code_.push_back(ins);
    }
    for (const ir::Value* v : term->operands) {
      auto it = slot.find(v);
      if (it == slot.end() || !scalar(v->type)) return std::nullopt;
      p.results_.push_back(it->second);
    }
    return p;
  }

  void run(const uint64_t* args, uint64_t* results) const {
    uint64_t s[kMaxSlots];
    std::copy(args, args + num_args_, s);
    for (const Ins& i : code_) {
      switch (i.code) {
        case Code::Const:
          s[i.out] = i.imm;
          break;
        case Code::Select:
          s[i.out] = (s[i.a] & 1) ? s[i.b] : s[i.c];
          break;
        default:
          s[i.out] = eval(i, s);
          break;
      }
    }
    for (size_t r = 0; r < results_.size(); ++r) results[r] = s[results_[r]];
  }

 private:
  enum class Code : uint8_t {
    Const,
    Add,
    Sub,
    Mul,
    Max,
    Min,
    And,
    Or,
    Xor,
    Not,
    Neg,
    Abs,
    Cmp,
    Select
  };
  struct Ins {
    Code code = Code::Const;
    DType dtype = DType::F32;
    CompareDirection dir = CompareDirection::EQ;
    CmpKind kind = CmpKind::Float;
    int a = 0, b = 0, c = 0, out = 0;
    uint64_t imm = 0;
  };

  static uint64_t eval(const Ins& i, const uint64_t* s) {
    return visit_dtype(i.dtype, [&](auto tag) -> uint64_t {
      using T = typename decltype(tag)::type;
      const T a = from_bits<T>(s[i.a]);
      const T b = from_bits<T>(s[i.b]);
      switch (i.code) {
        case Code::Add:
          return to_bits(s_add(a, b));
        case Code::Sub:
          return to_bits(s_sub(a, b));
        case Code::Mul:
          return to_bits(s_mul(a, b));
        case Code::Max:
          return to_bits(s_max(a, b));
        case Code::Min:
          return to_bits(s_min(a, b));
        case Code::And:
          return to_bits(s_and(a, b));
        case Code::Or:
          return to_bits(s_or(a, b));
        case Code::Xor:
          return to_bits(s_xor(a, b));
        case Code::Not:
          return to_bits(s_not(a));
        case Code::Neg:
          return to_bits(s_neg(a));
        case Code::Abs:
          return to_bits(s_abs(a));
        case Code::Cmp:
          return s_compare(a, b, i.dir, i.kind) ? 1 : 0;
        default:
          return 0;
      }
    });
  }

  int num_args_ = 0;
  int num_slots_ = 0;
  std::vector<Ins> code_;
  std::vector<int> results_;
};

// ---------------------------------------------------------------------------------------------
// RegionFn: a region as a function of scalar bit patterns.

enum class BinOp { Add, Mul, Max, Min, And, Or, Xor };

inline std::optional<BinOp> binop_from_name(const std::string& n) {
  if (n == "stablehlo.add") return BinOp::Add;
  if (n == "stablehlo.multiply") return BinOp::Mul;
  if (n == "stablehlo.maximum") return BinOp::Max;
  if (n == "stablehlo.minimum") return BinOp::Min;
  if (n == "stablehlo.and") return BinOp::And;
  if (n == "stablehlo.or") return BinOp::Or;
  if (n == "stablehlo.xor") return BinOp::Xor;
  return std::nullopt;
}

// The op of a region `^bb0(%a: tensor<T>, %b: tensor<T>): return op(%a, %b)` with T = dtype,
// when the op applies to the dtype.
inline std::optional<BinOp> simple_binop(const ir::Region& region, DType dtype) {
  auto name = simple_binary_region(region);
  if (!name) return std::nullopt;
  auto op = binop_from_name(*name);
  if (!op) return std::nullopt;
  const ir::Block& b = region.front();
  for (const auto& a : b.arguments)
    if (a->type.is_token || a->type.rank() != 0 || a->type.dtype != dtype) return std::nullopt;
  if (b.ops[0]->result()->type != ir::Type::tensor({}, dtype)) return std::nullopt;
  if ((*op == BinOp::And || *op == BinOp::Or || *op == BinOp::Xor) && is_float(dtype))
    return std::nullopt;
  return op;
}

class RegionFn {
 public:
  RegionFn(const ir::Operation& op, const ir::Region& region, Compiler& cc,
           const std::vector<const ir::Value*>& captures)
      : where_(op.where()) {
    if (region.blocks.size() != 1) unsupported(op, "regions must have one block");
    const ir::Block& b = region.front();
    for (const auto& a : b.arguments) {
      if (a->type.is_token || a->type.rank() != 0)
        unsupported(op, "region arguments must be rank-0 tensors, got " + a->type.str());
      arg_types_.push_back(a->type.dtype);
    }
    const ir::Operation* term = b.terminator();
    if (!term || term->name != "stablehlo.return")
      unsupported(op, "region must end in stablehlo.return");
    for (const ir::Value* v : term->operands) {
      if (v->type.is_token || v->type.rank() != 0)
        unsupported(op, "region results must be rank-0 tensors, got " + v->type.str());
      result_types_.push_back(v->type.dtype);
    }
    scalar_ = ScalarProgram::compile(region);
    if (!scalar_) program_ = cc.compile_region(region, captures);
  }

  const std::vector<DType>& arg_types() const { return arg_types_; }
  const std::vector<DType>& result_types() const { return result_types_; }
  // The scalar interpreter keeps no state between calls; a region program is run on one thread.
  bool thread_safe() const { return scalar_.has_value(); }

  void call(const uint64_t* args, uint64_t* results, ExecContext& ctx,
            std::span<const HostTensor> captures) const {
    if (scalar_) {
      scalar_->run(args, results);
      return;
    }
    std::vector<HostTensor> in;
    in.reserve(arg_types_.size());
    for (size_t i = 0; i < arg_types_.size(); ++i) {
      HostTensor t(arg_types_[i], {});
      store_bits(static_cast<std::byte*>(t.data()), 0, size_of(arg_types_[i]), args[i]);
      in.push_back(std::move(t));
    }
    std::vector<HostTensor> out = program_->run(in, ctx, captures);
    if (out.size() != result_types_.size())
      throw RuntimeError(where_ + ": region returned " + std::to_string(out.size()) +
                         " values, expected " + std::to_string(result_types_.size()));
    for (size_t r = 0; r < out.size(); ++r) {
      if (out[r].dtype() != result_types_[r] || out[r].size() != 1)
        throw RuntimeError(where_ + ": region returned " + out[r].type_string() + ", expected a " +
                           std::string(mlir_name(result_types_[r])) + " scalar");
      results[r] =
          load_bits(static_cast<const std::byte*>(out[r].data()), 0, size_of(result_types_[r]));
    }
  }

 private:
  std::string where_;
  std::vector<DType> arg_types_, result_types_;
  std::optional<ScalarProgram> scalar_;
  std::shared_ptr<const Program> program_;
};

// ---------------------------------------------------------------------------------------------
// Helpers of the kernels: work per parallel task, attributes, operand checks.

// Work items for parallel_for so that each holds about kChunk element steps.
inline int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, kChunk / std::max<int64_t>(1, work_per_item));
}

inline std::vector<int64_t> required_ints(const ir::Operation& op, std::string_view name) {
  const ir::Attribute* a = op.attr(name);
  if (!a) unsupported(op, "needs a `" + std::string(name) + "` attribute");
  try {
    return ir::as_ints(*a);
  } catch (const Error& e) {
    unsupported(op, "attribute '" + std::string(name) + "': " + e.what());
  }
}

inline void check_inputs(const std::string& where, std::span<const HostTensor> in,
                         const std::vector<ir::Type>& types) {
  if (in.size() < types.size())
    throw RuntimeError(where + ": expected " + std::to_string(types.size()) + " operands, got " +
                       std::to_string(in.size()));
  for (size_t i = 0; i < types.size(); ++i)
    if (in[i].dtype() != types[i].dtype || in[i].shape() != types[i].shape)
      throw RuntimeError(where + ": operand " + std::to_string(i) + " is " + in[i].type_string() +
                         ", expected " + types[i].str());
}

inline std::vector<ir::Type> operand_types(const ir::Operation& op) {
  std::vector<ir::Type> t;
  for (const ir::Value* v : op.operands) {
    if (v->type.is_token) unsupported(op, "token operands are not supported");
    t.push_back(v->type);
  }
  return t;
}

// ---------------------------------------------------------------------------------------------
// Variadic reductions (reduce, reduce_window): n inputs, n init values, and a region taking n
// accumulators and n elements and returning n accumulators, all of the inputs' element types.

// The operand types of a reduction (reduce, reduce_window): N inputs of one shape, then N rank-0
// init values, one result per input, all of the same element type per input, and one region.
inline std::vector<ir::Type> reduction_operand_types(const ir::Operation& op) {
  if (op.operands.size() < 2 || op.operands.size() % 2 != 0)
    unsupported(op, "takes N inputs followed by N init values");
  const size_t n = op.operands.size() / 2;
  if (op.results.size() != n) unsupported(op, "must have one result per input");
  if (op.regions.size() != 1) unsupported(op, "needs a body region");
  std::vector<ir::Type> types = operand_types(op);
  const Shape& in_shape = types[0].shape;
  if (in_shape.size() > static_cast<size_t>(kMaxRank)) unsupported(op, "rank is too large");
  for (size_t k = 0; k < n; ++k) {
    if (types[k].shape != in_shape) unsupported(op, "inputs must have the same shape");
    if (types[n + k].rank() != 0) unsupported(op, "init values must be rank-0 tensors");
    if (types[n + k].dtype != types[k].dtype || op.result(k)->type.dtype != types[k].dtype)
      unsupported(op, "inputs, init values and results must have the same element types");
  }
  return types;
}

inline void check_result_shapes(const ir::Operation& op, const Shape& out_shape) {
  for (size_t k = 0; k < op.results.size(); ++k)
    if (op.result(k)->type.shape != out_shape)
      unsupported(op, "result " + std::to_string(k) + " is " + op.result(k)->type.str() +
                          ", expected shape " + shape_to_string(out_shape));
}

// The kernel of a one-input reduction whose region is one binary op: fast_loop(in, out, init,
// op) over typed pointers (reduce_fast, reduce_window_fast), for outputs of out_shape.
template <class FastLoop>
Kernel binop_reduction_kernel(const ir::Operation& op, std::vector<ir::Type> types, Shape out_shape,
                              BinOp bop, FastLoop fast_loop) {
  const std::string where = op.where();
  return [=](std::span<const HostTensor> in, ExecContext&) {
    check_inputs(where, in, types);
    const DType dtype = types[0].dtype;
    HostTensor out(dtype, out_shape);
    visit_dtype(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      visit_binop(bop, [&](auto fn) {
        fast_loop(in[0].data_as<T>(), out.data_as<T>(), *in[1].data_as<T>(), fn);
      });
    });
    return std::vector<HostTensor>{out};
  };
}

// The kernel of a reduction whose region runs as a RegionFn, for outputs of out_shape (num_out
// elements). Output o folds, from the init values, the elements that for_each_element(o, visit)
// visits in order: visit(valid, offset) takes the inputs' elements at `offset`, or the init
// values where !valid (a window's padding).
template <class ForEachElement>
Kernel region_reduction_kernel(const ir::Operation& op, Compiler& cc, std::vector<ir::Type> types,
                               Shape out_shape, int64_t num_out, int64_t elements_per_output,
                               ForEachElement for_each_element) {
  // types: the n inputs', then the n init values'.
  const size_t n = types.size() / 2;
  std::vector<DType> dtypes;
  for (size_t k = 0; k < n; ++k) dtypes.push_back(types[k].dtype);
  auto fn = std::make_shared<const RegionFn>(op, *op.regions[0], cc, captured_values(op));
  if (fn->arg_types().size() != 2 * n || fn->result_types().size() != n)
    unsupported(op, "body must take " + std::to_string(2 * n) + " arguments and return " +
                        std::to_string(n) + " values");
  for (size_t k = 0; k < n; ++k)
    if (fn->arg_types()[k] != dtypes[k] || fn->arg_types()[n + k] != dtypes[k] ||
        fn->result_types()[k] != dtypes[k])
      unsupported(op, "body types must match the element types of the inputs");
  const std::string where = op.where();
  const size_t num_operands = op.operands.size();
  return [=](std::span<const HostTensor> in, ExecContext& ctx) {
    check_inputs(where, in, types);
    const auto caps = in.subspan(num_operands);
    std::vector<HostTensor> outs;
    std::vector<const std::byte*> src(n);
    std::vector<std::byte*> dst(n);
    std::vector<size_t> esz(n);
    std::vector<uint64_t> init(n);
    for (size_t k = 0; k < n; ++k) {
      outs.emplace_back(dtypes[k], out_shape);
      src[k] = static_cast<const std::byte*>(in[k].data());
      dst[k] = static_cast<std::byte*>(outs[k].data());
      esz[k] = size_of(dtypes[k]);
      init[k] = load_bits(static_cast<const std::byte*>(in[n + k].data()), 0, esz[k]);
    }
    auto body = [&](int64_t b, int64_t e) {
      std::vector<uint64_t> args(2 * n), acc(n);
      for (int64_t o = b; o < e; ++o) {
        acc = init;
        for_each_element(o, [&](bool valid, int64_t off) {
          for (size_t k = 0; k < n; ++k) {
            args[k] = acc[k];
            args[n + k] = valid ? load_bits(src[k], off, esz[k]) : init[k];
          }
          fn->call(args.data(), acc.data(), ctx, caps);
        });
        for (size_t k = 0; k < n; ++k) store_bits(dst[k], o, esz[k], acc[k]);
      }
    };
    if (fn->thread_safe())
      parallel_for(num_out, grain_for(elements_per_output * 8), body);
    else
      body(0, num_out);
    return outs;
  };
}

// ---------------------------------------------------------------------------------------------
// The arithmetic of the fast loops (reduce_fast, reduce_window_fast) for single-input regions
// that are one binary op.

template <class T, bool kInFloat>
struct Accum {
  using A = std::conditional_t<is_half_v<T>, float, T>;
  static A load(T x) { return static_cast<A>(x); }
  static T store(A a) {
    if constexpr (is_half_v<T>)
      return T(a);
    else
      return a;
  }
  static A round(A a) {
    if constexpr (is_half_v<T> && !kInFloat)
      return static_cast<float>(T(a));
    else
      return a;
  }
};

template <BinOp OP>
struct BinFn {
  template <class A>
  A operator()(A a, A b) const {
    if constexpr (OP == BinOp::Add)
      return s_add(a, b);
    else if constexpr (OP == BinOp::Mul)
      return s_mul(a, b);
    else if constexpr (OP == BinOp::Max)
      return s_max(a, b);
    else if constexpr (OP == BinOp::Min)
      return s_min(a, b);
    else if constexpr (OP == BinOp::And)
      return s_and(a, b);
    else if constexpr (OP == BinOp::Or)
      return s_or(a, b);
    else
      return s_xor(a, b);
  }
};

template <class F>
decltype(auto) visit_binop(BinOp op, F&& f) {
  switch (op) {
    case BinOp::Add:
      return f(BinFn<BinOp::Add>{});
    case BinOp::Mul:
      return f(BinFn<BinOp::Mul>{});
    case BinOp::Max:
      return f(BinFn<BinOp::Max>{});
    case BinOp::Min:
      return f(BinFn<BinOp::Min>{});
    case BinOp::And:
      return f(BinFn<BinOp::And>{});
    case BinOp::Or:
      return f(BinFn<BinOp::Or>{});
    case BinOp::Xor:
      return f(BinFn<BinOp::Xor>{});
  }
  return f(BinFn<BinOp::Add>{});
}

}  // namespace cujax::cpu::regions
