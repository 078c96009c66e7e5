// Reductions, windows and sorting: reduce, reduce_window, select_and_scatter and sort.
//
// Every op here applies a region to scalars. Three ways of running a region, fastest first:
//  - a region that is one commutative binary op (simple_binary_region) with a single input
//    runs as a loop templated on the dtype and the op;
//  - a region of scalar element-wise ops (compare, select, and/or/xor/not, add, subtract,
//    multiply, maximum, minimum, negate, abs, constants) runs on a small scalar interpreter
//    (ScalarProgram) that allocates nothing and may run on several threads;
//  - anything else (calls, other ops, captured values) runs the compiled region program on
//    rank-0 tensors.
// All three evaluate the spec's semantics in the same, sequential order: the accumulator starts
// at the init value and takes the elements in ascending lexicographic order of their index.
// Large reductions with few outputs are split into fixed-size chunks (independent of the
// number of threads, so results are deterministic) whose partial results are combined in order.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"

namespace cujax::cpu {

namespace {

constexpr int kMaxRank = 32;
// Elements folded per parallel work item; also the size of a reduction chunk.
constexpr int64_t kChunk = 32768;
// f16/bf16 arithmetic of the fast reduction loops: false rounds the accumulator back to the
// element type after every step, exactly as the region says (the spec's semantics).
constexpr bool kHalfAccumulateInFloat = false;

// ---------------------------------------------------------------------------------------------
// Scalars as bit patterns: a value of any dtype sits zero-extended in a uint64_t.

template <class T>
constexpr bool is_half_v = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;
template <class T>
constexpr bool is_fp_v = std::is_floating_point_v<T> || is_half_v<T>;

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

enum class Dir : uint8_t { EQ, NE, GE, GT, LE, LT };
enum class CmpKind : uint8_t { Float, TotalOrder, Signed, Unsigned };

template <class X>
bool ordered(X a, X b, Dir d) {
  switch (d) {
    case Dir::EQ:
      return a == b;
    case Dir::NE:
      return a != b;
    case Dir::GE:
      return a >= b;
    case Dir::GT:
      return a > b;
    case Dir::LE:
      return a <= b;
    case Dir::LT:
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
bool s_compare(T a, T b, Dir d, CmpKind k) {
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

std::optional<Dir> dir_from_name(std::string_view s) {
  if (s == "EQ") return Dir::EQ;
  if (s == "NE") return Dir::NE;
  if (s == "GE") return Dir::GE;
  if (s == "GT") return Dir::GT;
  if (s == "LE") return Dir::LE;
  if (s == "LT") return Dir::LT;
  return std::nullopt;
}

CmpKind default_cmp_kind(DType t) {
  if (is_float(t)) return CmpKind::Float;
  if (is_signed_int(t)) return CmpKind::Signed;
  return CmpKind::Unsigned;
}

// Direction and compare type of a stablehlo.compare op; nullopt when malformed.
std::optional<std::pair<Dir, CmpKind>> compare_attrs(const ir::Operation& op, DType operand) {
  const ir::Attribute* d = op.attr("comparison_direction");
  if (!d || d->kind != ir::Attribute::Kind::Enum) return std::nullopt;
  auto dir = dir_from_name(d->enum_value);
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
    Dir dir = Dir::EQ;
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

std::optional<BinOp> binop_from_name(const std::string& n) {
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
std::optional<BinOp> simple_binop(const ir::Region& region, DType dtype) {
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

// Work items for parallel_for so that each holds about kChunk element steps.
int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, kChunk / std::max<int64_t>(1, work_per_item));
}

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

std::vector<int64_t> required_ints(const ir::Operation& op, std::string_view name) {
  const ir::Attribute* a = op.attr(name);
  if (!a) unsupported(op, "needs a `" + std::string(name) + "` attribute");
  try {
    return ir::as_ints(*a);
  } catch (const Error& e) {
    unsupported(op, "attribute '" + std::string(name) + "': " + e.what());
  }
}

void check_inputs(const std::string& where, std::span<const HostTensor> in,
                  const std::vector<ir::Type>& types) {
  if (in.size() < types.size())
    throw RuntimeError(where + ": expected " + std::to_string(types.size()) + " operands, got " +
                       std::to_string(in.size()));
  for (size_t i = 0; i < types.size(); ++i)
    if (in[i].dtype() != types[i].dtype || in[i].shape() != types[i].shape)
      throw RuntimeError(where + ": operand " + std::to_string(i) + " is " + in[i].type_string() +
                         ", expected " + types[i].str());
}

std::vector<ir::Type> operand_types(const ir::Operation& op) {
  std::vector<ir::Type> t;
  for (const ir::Value* v : op.operands) {
    if (v->type.is_token) unsupported(op, "token operands are not supported");
    t.push_back(v->type);
  }
  return t;
}

// ---------------------------------------------------------------------------------------------
// Fast loops for single-input reductions whose body is one binary op.

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

// Applies a BinOp to two bit patterns of `dtype` (for the variadic and window paths).
uint64_t apply_binop(BinOp op, DType dtype, uint64_t a, uint64_t b) {
  return visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return visit_binop(op, [&](auto fn) { return to_bits(fn(from_bits<T>(a), from_bits<T>(b))); });
  });
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
  if (op.operands.size() < 2 || op.operands.size() % 2 != 0)
    unsupported(op, "takes N inputs followed by N init values");
  const size_t n = op.operands.size() / 2;
  if (op.results.size() != n) unsupported(op, "must have one result per input");
  if (op.regions.size() != 1) unsupported(op, "needs a body region");
  const std::vector<ir::Type> types = operand_types(op);
  const Shape in_shape = types[0].shape;
  if (in_shape.size() > static_cast<size_t>(kMaxRank)) unsupported(op, "rank is too large");
  for (size_t k = 0; k < n; ++k) {
    if (types[k].shape != in_shape) unsupported(op, "inputs must have the same shape");
    if (types[n + k].rank() != 0) unsupported(op, "init values must be rank-0 tensors");
    if (types[n + k].dtype != types[k].dtype || op.result(k)->type.dtype != types[k].dtype)
      unsupported(op, "inputs, init values and results must have the same element types");
  }
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
  for (size_t k = 0; k < n; ++k)
    if (op.result(k)->type.shape != out_shape)
      unsupported(op, "result " + std::to_string(k) + " is " + op.result(k)->type.str() +
                          ", expected shape " + shape_to_string(out_shape));
  const ReducePlan plan = make_reduce_plan(in_shape, reduced);
  const std::string where = op.where();
  std::vector<DType> dtypes;
  for (size_t k = 0; k < n; ++k) dtypes.push_back(types[k].dtype);

  if (n == 1) {
    if (auto bop = simple_binop(*op.regions[0], dtypes[0])) {
      return [=, bop = *bop](std::span<const HostTensor> in, ExecContext&) {
        check_inputs(where, in, types);
        HostTensor out(dtypes[0], out_shape);
        visit_dtype(dtypes[0], [&](auto tag) {
          using T = typename decltype(tag)::type;
          visit_binop(bop, [&](auto fn) {
            reduce_fast<T>(in[0].data_as<T>(), out.data_as<T>(), *in[1].data_as<T>(), plan, fn);
          });
        });
        return std::vector<HostTensor>{out};
      };
    }
  }

  const auto captures = captured_values(op);
  auto fn = std::make_shared<const RegionFn>(op, *op.regions[0], cc, captures);
  if (fn->arg_types().size() != 2 * n || fn->result_types().size() != n)
    unsupported(op, "body must take " + std::to_string(2 * n) + " arguments and return " +
                        std::to_string(n) + " values");
  for (size_t k = 0; k < n; ++k)
    if (fn->arg_types()[k] != dtypes[k] || fn->arg_types()[n + k] != dtypes[k] ||
        fn->result_types()[k] != dtypes[k])
      unsupported(op, "body types must match the element types of the inputs");
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
        const int64_t base = offset_of(plan.kept_sizes, plan.kept_strides, o);
        acc = init;
        walk(plan.red_sizes, plan.red_strides, 0, plan.num_red, [&](int64_t roff) {
          for (size_t k = 0; k < n; ++k) {
            args[k] = acc[k];
            args[n + k] = load_bits(src[k], base + roff, esz[k]);
          }
          fn->call(args.data(), acc.data(), ctx, caps);
        });
        for (size_t k = 0; k < n; ++k) store_bits(dst[k], o, esz[k], acc[k]);
      }
    };
    if (fn->thread_safe())
      parallel_for(plan.num_out, grain_for(plan.num_red * 8), body);
    else
      body(0, plan.num_out);
    return outs;
  };
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
  if (op.operands.size() < 2 || op.operands.size() % 2 != 0)
    unsupported(op, "takes N inputs followed by N init values");
  const size_t n = op.operands.size() / 2;
  if (op.results.size() != n) unsupported(op, "must have one result per input");
  if (op.regions.size() != 1) unsupported(op, "needs a body region");
  const std::vector<ir::Type> types = operand_types(op);
  const Shape in_shape = types[0].shape;
  const size_t rank = in_shape.size();
  if (rank > static_cast<size_t>(kMaxRank)) unsupported(op, "rank is too large");
  for (size_t k = 0; k < n; ++k) {
    if (types[k].shape != in_shape) unsupported(op, "inputs must have the same shape");
    if (types[n + k].rank() != 0) unsupported(op, "init values must be rank-0 tensors");
    if (types[n + k].dtype != types[k].dtype || op.result(k)->type.dtype != types[k].dtype)
      unsupported(op, "inputs, init values and results must have the same element types");
  }
  const auto window = required_ints(op, "window_dimensions");
  if (window.size() != rank)
    unsupported(op, "`window_dimensions` must have one value per dimension");
  const auto strides = opt_ints(op, "window_strides", rank, 1);
  const auto bdil = opt_ints(op, "base_dilations", rank, 1);
  const auto wdil = opt_ints(op, "window_dilations", rank, 1);
  const auto padding = opt_ints(op, "padding", 2 * rank, 0);
  const WindowPlan plan = make_window_plan(op, in_shape, window, strides, bdil, wdil, padding);
  for (size_t k = 0; k < n; ++k)
    if (op.result(k)->type.shape != plan.out_shape)
      unsupported(op, "result " + std::to_string(k) + " is " + op.result(k)->type.str() +
                          ", expected shape " + shape_to_string(plan.out_shape));
  const std::string where = op.where();
  std::vector<DType> dtypes;
  for (size_t k = 0; k < n; ++k) dtypes.push_back(types[k].dtype);
  const Shape out_shape = plan.out_shape;

  if (n == 1) {
    if (auto bop = simple_binop(*op.regions[0], dtypes[0])) {
      return [=, bop = *bop](std::span<const HostTensor> in, ExecContext&) {
        check_inputs(where, in, types);
        HostTensor out(dtypes[0], out_shape);
        visit_dtype(dtypes[0], [&](auto tag) {
          using T = typename decltype(tag)::type;
          visit_binop(bop, [&](auto fn) {
            reduce_window_fast<T>(in[0].data_as<T>(), out.data_as<T>(), *in[1].data_as<T>(), plan,
                                  fn);
          });
        });
        return std::vector<HostTensor>{out};
      };
    }
  }

  const auto captures = captured_values(op);
  auto fn = std::make_shared<const RegionFn>(op, *op.regions[0], cc, captures);
  if (fn->arg_types().size() != 2 * n || fn->result_types().size() != n)
    unsupported(op, "body must take " + std::to_string(2 * n) + " arguments and return " +
                        std::to_string(n) + " values");
  for (size_t k = 0; k < n; ++k)
    if (fn->arg_types()[k] != dtypes[k] || fn->arg_types()[n + k] != dtypes[k] ||
        fn->result_types()[k] != dtypes[k])
      unsupported(op, "body types must match the element types of the inputs");
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
        for_each_window_element(plan, o, [&](bool valid, int64_t off) {
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
      parallel_for(plan.num_out, grain_for(plan.window_size * 8), body);
    else
      body(0, plan.num_out);
    return outs;
  };
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

// ---------------------------------------------------------------------------------------------
// sort

// A comparator that is one strict compare of the first operand pair: (dir, kind, swapped).
struct SimpleComparator {
  Dir dir;
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
  if (!attrs || (attrs->first != Dir::LT && attrs->first != Dir::GT)) return std::nullopt;
  Dir dir = attrs->first;
  if (cmp.operands[0] == rhs && cmp.operands[1] == lhs)
    dir = dir == Dir::LT ? Dir::GT : Dir::LT;
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

void register_reduction_kernels(KernelRegistry& r) {
  r.add("stablehlo.reduce", reduce_kernel);
  r.add("stablehlo.reduce_window", reduce_window_kernel);
  r.add("stablehlo.select_and_scatter", select_and_scatter_kernel);
  r.add("stablehlo.sort", sort_kernel);
}

}  // namespace cujax::cpu
