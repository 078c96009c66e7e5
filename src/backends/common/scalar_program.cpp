#include "backends/common/scalar_program.h"

#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "cujax/ir/ir.h"

namespace cujax::scalar_program {

namespace {

// Rank-0 values of a type the interpreter holds: narrow types (int4, float8_e4m3fn, ...) have no
// C++ type of their own, so regions on them run as compiled programs; a complex128 does not fit
// a slot. A complex64 fits, but is not among dispatch()'s types (its bits would pass for a
// double's): only select, real, imag and constants take complex64 operands (see op()).
bool is_scalar(const ir::Type& t) {
  return !t.is_token && t.rank() == 0 && !is_narrow(t.dtype) && t.dtype != DType::C128;
}

std::optional<uint8_t> direction(const std::string& s) {
  using D = ew::CompareDirection;
  if (s == "EQ") return static_cast<uint8_t>(D::EQ);
  if (s == "NE") return static_cast<uint8_t>(D::NE);
  if (s == "GE") return static_cast<uint8_t>(D::GE);
  if (s == "GT") return static_cast<uint8_t>(D::GT);
  if (s == "LE") return static_cast<uint8_t>(D::LE);
  if (s == "LT") return static_cast<uint8_t>(D::LT);
  return std::nullopt;
}

// Whether the functor behind `c` accepts element type t.
bool accepts(Code c, DType t) {
  if (is_complex(t)) return false;
  return dispatch(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    switch (c) {
      case Code::Add:
        return ew::supports<ew::Add, T>();
      case Code::Sub:
        return ew::supports<ew::Subtract, T>();
      case Code::Mul:
        return ew::supports<ew::Multiply, T>();
      case Code::Div:
        return ew::supports<ew::Divide, T>();
      case Code::Rem:
        return ew::supports<ew::Remainder, T>();
      case Code::Max:
        return ew::supports<ew::Maximum, T>();
      case Code::Min:
        return ew::supports<ew::Minimum, T>();
      case Code::And:
        return ew::supports<ew::And, T>();
      case Code::Or:
        return ew::supports<ew::Or, T>();
      case Code::Xor:
        return ew::supports<ew::Xor, T>();
      case Code::Not:
        return ew::supports<ew::Not, T>();
      case Code::Neg:
        return ew::supports<ew::Negate, T>();
      case Code::Abs:
        return ew::supports<ew::Abs, T>();
      case Code::Sign:
        return ew::supports<ew::Sign, T>();
      case Code::Pow:
        return ew::supports<ew::Power, T>();
      case Code::Atan2:
        return ew::supports<ew::Atan2, T>();
      case Code::Cmp:
      case Code::Select:
      case Code::Const:
        return true;
      default:  // the float-only unary functions
        return ew::is_float_v<T>;
    }
  });
}

const std::unordered_map<std::string, Code>& binary_codes() {
  static const std::unordered_map<std::string, Code> m = {
      {"stablehlo.add", Code::Add},       {"stablehlo.subtract", Code::Sub},
      {"stablehlo.multiply", Code::Mul},  {"stablehlo.divide", Code::Div},
      {"stablehlo.remainder", Code::Rem}, {"stablehlo.maximum", Code::Max},
      {"stablehlo.minimum", Code::Min},   {"stablehlo.and", Code::And},
      {"stablehlo.or", Code::Or},         {"stablehlo.xor", Code::Xor},
      {"stablehlo.power", Code::Pow},     {"stablehlo.atan2", Code::Atan2}};
  return m;
}

const std::unordered_map<std::string, Code>& unary_codes() {
  static const std::unordered_map<std::string, Code> m = {
      {"stablehlo.not", Code::Not},
      {"stablehlo.negate", Code::Neg},
      {"stablehlo.abs", Code::Abs},
      {"stablehlo.sign", Code::Sign},
      {"stablehlo.exponential", Code::Exp},
      {"stablehlo.exponential_minus_one", Code::Expm1},
      {"stablehlo.log", Code::Log},
      {"stablehlo.log_plus_one", Code::Log1p},
      {"stablehlo.logistic", Code::Logistic},
      {"stablehlo.sqrt", Code::Sqrt},
      {"stablehlo.rsqrt", Code::Rsqrt},
      {"stablehlo.cbrt", Code::Cbrt},
      {"stablehlo.sine", Code::Sin},
      {"stablehlo.cosine", Code::Cos},
      {"stablehlo.tan", Code::Tan},
      {"stablehlo.tanh", Code::Tanh},
      {"stablehlo.floor", Code::Floor},
      {"stablehlo.ceil", Code::Ceil},
      {"stablehlo.round_nearest_afz", Code::RoundAfz},
      {"stablehlo.round_nearest_even", Code::RoundEven}};
  return m;
}

// The value of a scalar stablehlo.constant, as bits.
std::optional<uint64_t> constant_bits(const ir::Operation& op) {
  if (op.name != "stablehlo.constant" || op.num_results() != 1) return std::nullopt;
  const ir::Attribute* v = op.attr("value");
  if (!v || v->kind != ir::Attribute::Kind::DenseElements || v->tensor.size() != 1 ||
      v->tensor.dtype() != op.result(0)->type.dtype || !is_scalar(op.result(0)->type))
    return std::nullopt;
  uint64_t b = 0;
  std::memcpy(&b, v->tensor.data(), size_of(v->tensor.dtype()));
  return b;
}

// Emits a block's ops into a program, inlining calls.
class Builder {
 public:
  explicit Builder(const ir::Module* module) : module_(module) {}

  Program program;

  bool argument(const ir::Value* v) {
    if (!is_scalar(v->type) || next_ >= Program::kMaxSlots) return false;
    slot_[v] = next_++;
    return true;
  }

  // The ops before the block's terminator; *results gets the terminator's operands' slots.
  bool block(const ir::Block& block, const char* terminator, std::vector<int>* results, int depth) {
    const ir::Operation* term = block.terminator();
    if (!term || term->name != terminator || depth > 8) return false;
    for (const auto& owned : block.ops) {
      if (owned.get() == term) break;
      if (!op(*owned, depth)) return false;
    }
    for (const ir::Value* v : term->operands) {
      auto s = operand(v);
      if (!s) return false;
      results->push_back(*s);
    }
    return true;
  }

 private:
  bool push(Ins ins, const ir::Value* result) {
    if (program.num_ins >= Program::kMaxIns || next_ >= Program::kMaxSlots) return false;
    ins.out = static_cast<int16_t>(next_);
    slot_[result] = next_++;
    program.ins[program.num_ins++] = ins;
    return true;
  }

  // A value's slot; a captured scalar constant (JAX's sort comparators read constants of the
  // enclosing function) becomes a Const instruction on first use.
  std::optional<int> operand(const ir::Value* v) {
    if (auto it = slot_.find(v); it != slot_.end()) return it->second;
    if (!is_scalar(v->type) || !v->defining_op) return std::nullopt;
    auto bits = constant_bits(*v->defining_op);
    if (!bits) return std::nullopt;
    Ins c;
    c.code = Code::Const;
    c.type = v->type.dtype;
    c.imm = *bits;
    if (!push(c, v)) return std::nullopt;
    return slot_[v];
  }

  bool call(const ir::Operation& op, const std::vector<int>& in, int depth) {
    const ir::Attribute* callee = op.attr("callee");
    if (!module_ || !callee || callee->kind != ir::Attribute::Kind::Symbol) return false;
    const ir::Function* fn = module_->lookup(callee->text);
    if (!fn || fn->body.blocks.size() != 1) return false;
    const ir::Block& body = fn->body.front();
    if (body.arguments.size() != in.size()) return false;
    for (size_t k = 0; k < in.size(); ++k) {
      if (!is_scalar(body.arguments[k]->type)) return false;
      slot_[body.arguments[k].get()] = in[k];
    }
    std::vector<int> results;
    if (!block(body, "func.return", &results, depth + 1) || results.size() != op.num_results())
      return false;
    for (size_t k = 0; k < results.size(); ++k) {
      if (!is_scalar(op.result(k)->type)) return false;
      slot_[op.result(k)] = results[k];
    }
    return true;
  }

  bool op(const ir::Operation& op, int depth) {
    if (!op.regions.empty()) return false;
    std::vector<int> in;
    for (const ir::Value* v : op.operands) {
      if (!is_scalar(v->type)) return false;
      auto s = operand(v);
      if (!s) return false;
      in.push_back(*s);
    }
    if (op.name == "func.call") return call(op, in, depth);
    if (op.num_results() != 1 || !is_scalar(op.result(0)->type)) return false;
    const DType rt = op.result(0)->type.dtype;
    Ins ins;
    ins.type = rt;
    auto same_types = [&](size_t first) {
      for (size_t k = first; k < op.operands.size(); ++k)
        if (op.operands[k]->type.dtype != rt) return false;
      return true;
    };
    if (auto b = binary_codes().find(op.name); b != binary_codes().end()) {
      if (in.size() != 2 || !same_types(0) || !accepts(b->second, rt)) return false;
      ins.code = b->second;
      ins.a = static_cast<int16_t>(in[0]);
      ins.b = static_cast<int16_t>(in[1]);
    } else if (auto u = unary_codes().find(op.name); u != unary_codes().end()) {
      if (in.size() != 1 || !same_types(0) || !accepts(u->second, rt)) return false;
      ins.code = u->second;
      ins.a = ins.b = static_cast<int16_t>(in[0]);
    } else if (op.name == "stablehlo.select") {
      if (in.size() != 3 || op.operands[0]->type.dtype != DType::Bool || !same_types(1))
        return false;
      ins.code = Code::Select;
      ins.a = static_cast<int16_t>(in[0]);
      ins.b = static_cast<int16_t>(in[1]);
      ins.c = static_cast<int16_t>(in[2]);
    } else if (op.name == "stablehlo.real" || op.name == "stablehlo.imag") {
      if (in.size() != 1 || op.operands[0]->type.dtype != DType::C64 || rt != DType::F32)
        return false;
      ins.code = op.name == "stablehlo.real" ? Code::Real : Code::Imag;
      ins.a = static_cast<int16_t>(in[0]);
    } else if (op.name == "stablehlo.compare") {
      if (in.size() != 2 || rt != DType::Bool) return false;
      const DType t = op.operands[0]->type.dtype;
      if (op.operands[1]->type.dtype != t || is_complex(t)) return false;
      const ir::Attribute* d = op.attr("comparison_direction");
      auto dir =
          d && d->kind == ir::Attribute::Kind::Enum ? direction(d->enum_value) : std::nullopt;
      if (!dir) return false;
      ins.code = Code::Cmp;
      ins.type = t;
      ins.dir = *dir;
      if (const ir::Attribute* ct = op.attr("compare_type")) {
        const std::string& k = ct->enum_value;
        if (k == "TOTALORDER" && is_float(t))
          ins.total = true;
        else if (!((k == "FLOAT" && is_float(t)) || (k == "SIGNED" && is_signed_int(t)) ||
                   (k == "UNSIGNED" && (is_unsigned_int(t) || t == DType::Bool))))
          return false;
      }
      ins.a = static_cast<int16_t>(in[0]);
      ins.b = static_cast<int16_t>(in[1]);
    } else if (auto bits = constant_bits(op)) {
      ins.code = Code::Const;
      ins.imm = *bits;
    } else {
      return false;
    }
    return push(ins, op.result(0));
  }

  const ir::Module* module_;
  std::unordered_map<const ir::Value*, int> slot_;
  int next_ = 0;
};

}  // namespace

std::optional<Program> compile(const ir::Region& region, const ir::Module* module) {
  if (region.blocks.size() != 1) return std::nullopt;
  const ir::Block& block = region.front();
  Builder b(module);
  for (const auto& a : block.arguments)
    if (!b.argument(a.get())) return std::nullopt;
  b.program.num_args = static_cast<int>(block.arguments.size());
  std::vector<int> results;
  if (!b.block(block, "stablehlo.return", &results, 0) ||
      results.size() > static_cast<size_t>(Program::kMaxResults))
    return std::nullopt;
  for (int r : results) b.program.results[b.program.num_results++] = static_cast<int16_t>(r);
  return b.program;
}

}  // namespace cujax::scalar_program
