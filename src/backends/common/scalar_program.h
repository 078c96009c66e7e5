// A region of scalar element-wise ops (a reduce body, a sort comparator, a scatter combiner) as a
// fixed-size, trivially copyable program that a GPU thread or the CPU runs with the functors of
// elementwise.h, so it computes what the CPU backend's kernels compute. Values travel as bit
// patterns zero-extended into uint64_t; a complex64 is its real part's bits in the low half and
// its imaginary part's in the high half (its bytes in memory, little-endian), which the program
// only selects, splits (real, imag) and passes along. The program is passed to kernels by value.
#pragma once

#include <cstdint>
#include <optional>
#include <type_traits>

#include "backends/common/elementwise.h"
#include "cujax/core/dtype.h"

namespace cujax::ir {
struct Region;
struct Module;
}  // namespace cujax::ir

namespace cujax::scalar_program {

template <class T>
struct Tag {
  using type = T;
};

// visit_dtype for host and device code.
template <class F>
CUJAX_HD decltype(auto) dispatch(DType t, F&& f) {
  switch (t) {
    case DType::Bool:
      return f(Tag<bool>{});
    case DType::I8:
      return f(Tag<int8_t>{});
    case DType::I16:
      return f(Tag<int16_t>{});
    case DType::I32:
      return f(Tag<int32_t>{});
    case DType::I64:
      return f(Tag<int64_t>{});
    case DType::U8:
      return f(Tag<uint8_t>{});
    case DType::U16:
      return f(Tag<uint16_t>{});
    case DType::U32:
      return f(Tag<uint32_t>{});
    case DType::U64:
      return f(Tag<uint64_t>{});
    case DType::F16:
      return f(Tag<float16>{});
    case DType::BF16:
      return f(Tag<bfloat16>{});
    case DType::F32:
      return f(Tag<float>{});
    default:
      return f(Tag<double>{});
  }
}

template <class T>
CUJAX_HD T from_bits(uint64_t b) {
  if constexpr (ew::is_float_v<T>)
    return ew::from_bits<T>(static_cast<typename ew::float_traits<T>::bits_t>(b));
  else if constexpr (ew::is_bool_v<T>)
    return (b & 1) != 0;
  else
    return static_cast<T>(b);
}

template <class T>
CUJAX_HD uint64_t to_bits(T v) {
  if constexpr (ew::is_float_v<T>)
    return static_cast<uint64_t>(ew::to_bits(v));
  else if constexpr (ew::is_bool_v<T>)
    return v ? 1 : 0;
  else
    return static_cast<uint64_t>(static_cast<std::make_unsigned_t<T>>(v));
}

// Element i of an array of `bytes`-byte elements, zero-extended.
CUJAX_HD inline uint64_t load(const void* base, int64_t i, int bytes) {
  switch (bytes) {
    case 1:
      return static_cast<const uint8_t*>(base)[i];
    case 2:
      return static_cast<const uint16_t*>(base)[i];
    case 4:
      return static_cast<const uint32_t*>(base)[i];
    default:
      return static_cast<const uint64_t*>(base)[i];
  }
}

CUJAX_HD inline void store(void* base, int64_t i, int bytes, uint64_t v) {
  switch (bytes) {
    case 1:
      static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v);
      return;
    case 2:
      static_cast<uint16_t*>(base)[i] = static_cast<uint16_t>(v);
      return;
    case 4:
      static_cast<uint32_t*>(base)[i] = static_cast<uint32_t>(v);
      return;
    default:
      static_cast<uint64_t*>(base)[i] = v;
      return;
  }
}

enum class Code : uint8_t {
  Const,
  Add,
  Sub,
  Mul,
  Div,
  Rem,
  Max,
  Min,
  And,
  Or,
  Xor,
  Not,
  Neg,
  Abs,
  Sign,
  Pow,
  Atan2,
  Exp,
  Expm1,
  Log,
  Log1p,
  Logistic,
  Sqrt,
  Rsqrt,
  Cbrt,
  Sin,
  Cos,
  Tan,
  Tanh,
  Floor,
  Ceil,
  RoundAfz,
  RoundEven,
  Cmp,
  Select,
  Real,  // complex64 -> float32
  Imag
};

struct Ins {
  Code code = Code::Const;
  DType type = DType::F32;  // of the operands (Cmp) or of the result
  uint8_t dir = 0;          // Cmp: ew::CompareDirection
  bool total = false;       // Cmp: TOTALORDER
  int16_t a = 0, b = 0, c = 0, out = 0;
  uint64_t imm = 0;  // Const
};

struct Program {
  static constexpr int kMaxIns = 40;
  static constexpr int kMaxSlots = 56;
  static constexpr int kMaxResults = 4;

  int num_args = 0;
  int num_ins = 0;
  int num_results = 0;
  Ins ins[kMaxIns];
  int16_t results[kMaxResults] = {};

  CUJAX_HD void run(const uint64_t* args, uint64_t* out) const;
};

// The program of `region` (one block, scalar arguments, at most kMaxResults results), or nullopt
// when it uses an op, a type or a captured value (other than a scalar constant) outside the set
// above, or needs more room. With `module`, calls of its functions (JAX's logaddexp in a
// cumlogsumexp body) are inlined.
std::optional<Program> compile(const ir::Region& region, const ir::Module* module = nullptr);

namespace detail {

template <class C>
CUJAX_HD bool compare(uint8_t dir, C a, C b) {
  using D = ew::CompareDirection;
  switch (static_cast<D>(dir)) {
    case D::EQ:
      return a == b;
    case D::NE:
      return a != b;
    case D::GE:
      return a >= b;
    case D::GT:
      return a > b;
    case D::LE:
      return a <= b;
    default:
      return a < b;
  }
}

template <class F, class T>
CUJAX_HD uint64_t binary(T a, T b) {
  if constexpr (ew::supports<F, T>())
    return to_bits(ew::apply(F{}, a, b));
  else
    return 0;  // compile() rejects the combination
}

template <class F, class T>
CUJAX_HD uint64_t unary(T a) {
  if constexpr (ew::supports<F, T>())
    return to_bits(ew::apply(F{}, a));
  else
    return 0;
}

CUJAX_HD inline uint64_t eval(const Ins& i, const uint64_t* s) {
  return dispatch(i.type, [&](auto tag) -> uint64_t {
    using T = typename decltype(tag)::type;
    const T a = from_bits<T>(s[i.a]);
    const T b = from_bits<T>(s[i.b]);
    switch (i.code) {
      case Code::Add:
        return binary<ew::Add>(a, b);
      case Code::Sub:
        return binary<ew::Subtract>(a, b);
      case Code::Mul:
        return binary<ew::Multiply>(a, b);
      case Code::Div:
        return binary<ew::Divide>(a, b);
      case Code::Rem:
        return binary<ew::Remainder>(a, b);
      case Code::Max:
        return binary<ew::Maximum>(a, b);
      case Code::Min:
        return binary<ew::Minimum>(a, b);
      case Code::And:
        return binary<ew::And>(a, b);
      case Code::Or:
        return binary<ew::Or>(a, b);
      case Code::Xor:
        return binary<ew::Xor>(a, b);
      case Code::Not:
        return unary<ew::Not>(a);
      case Code::Neg:
        return unary<ew::Negate>(a);
      case Code::Abs:
        return unary<ew::Abs>(a);
      case Code::Sign:
        return unary<ew::Sign>(a);
      case Code::Pow:
        return binary<ew::Power>(a, b);
      case Code::Atan2:
        return binary<ew::Atan2>(a, b);
      case Code::Exp:
        return unary<ew::Exp>(a);
      case Code::Expm1:
        return unary<ew::Expm1>(a);
      case Code::Log:
        return unary<ew::Log>(a);
      case Code::Log1p:
        return unary<ew::Log1p>(a);
      case Code::Logistic:
        return unary<ew::Logistic>(a);
      case Code::Sqrt:
        return unary<ew::Sqrt>(a);
      case Code::Rsqrt:
        return unary<ew::Rsqrt>(a);
      case Code::Cbrt:
        return unary<ew::Cbrt>(a);
      case Code::Sin:
        return unary<ew::Sin>(a);
      case Code::Cos:
        return unary<ew::Cos>(a);
      case Code::Tan:
        return unary<ew::Tan>(a);
      case Code::Tanh:
        return unary<ew::Tanh>(a);
      case Code::Floor:
        return unary<ew::Floor>(a);
      case Code::Ceil:
        return unary<ew::Ceil>(a);
      case Code::RoundAfz:
        return unary<ew::RoundNearestAfz>(a);
      case Code::RoundEven:
        return unary<ew::RoundNearestEven>(a);
      case Code::Cmp:
        if constexpr (ew::is_float_v<T>) {
          if (i.total) return compare(i.dir, ew::total_order_key(a), ew::total_order_key(b));
        }
        return compare(i.dir, ew::to_compute<ew::compute_t<T, false>>(a),
                       ew::to_compute<ew::compute_t<T, false>>(b));
      default:
        return 0;
    }
  });
}

}  // namespace detail

CUJAX_HD inline void Program::run(const uint64_t* args, uint64_t* out) const {
  uint64_t s[kMaxSlots];
  for (int k = 0; k < num_args; ++k) s[k] = args[k];
  for (int k = 0; k < num_ins; ++k) {
    const Ins& i = ins[k];
    switch (i.code) {
      case Code::Const:
        s[i.out] = i.imm;
        break;
      case Code::Select:
        s[i.out] = (s[i.a] & 1) ? s[i.b] : s[i.c];
        break;
      case Code::Real:
        s[i.out] = s[i.a] & 0xFFFFFFFFu;
        break;
      case Code::Imag:
        s[i.out] = s[i.a] >> 32;
        break;
      default:
        s[i.out] = detail::eval(i, s);
        break;
    }
  }
  for (int r = 0; r < num_results; ++r) out[r] = s[results[r]];
}

}  // namespace cujax::scalar_program
