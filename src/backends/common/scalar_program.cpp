#include "backends/common/scalar_program.h"

#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "cujax/ir/ir.h"

namespace cujax::scalar {

namespace {

bool is_scalar(const ir::Type& t) {
  return !t.is_token && t.rank() == 0;
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
      default:
        return true;
    }
  });
}

const std::unordered_map<std::string, Code>& binary_codes() {
  static const std::unordered_map<std::string, Code> m = {
      {"stablehlo.add", Code::Add},       {"stablehlo.subtract", Code::Sub},
      {"stablehlo.multiply", Code::Mul},  {"stablehlo.divide", Code::Div},
      {"stablehlo.remainder", Code::Rem}, {"stablehlo.maximum", Code::Max},
      {"stablehlo.minimum", Code::Min},   {"stablehlo.and", Code::And},
      {"stablehlo.or", Code::Or},         {"stablehlo.xor", Code::Xor}};
  return m;
}

const std::unordered_map<std::string, Code>& unary_codes() {
  static const std::unordered_map<std::string, Code> m = {
      {"stablehlo.not", Code::Not}, {"stablehlo.negate", Code::Neg}, {"stablehlo.abs", Code::Abs}};
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

}  // namespace

std::optional<Program> compile(const ir::Region& region) {
  if (region.blocks.size() != 1) return std::nullopt;
  const ir::Block& block = region.front();
  Program p;
  std::unordered_map<const ir::Value*, int> slot;
  int next = 0;
  for (const auto& a : block.arguments) {
    if (!is_scalar(a->type)) return std::nullopt;
    slot[a.get()] = next++;
  }
  p.num_args = next;
  auto push = [&](Ins ins, const ir::Value* result) {
    if (p.num_ins >= Program::kMaxIns || next >= Program::kMaxSlots) return false;
    ins.out = static_cast<int16_t>(next);
    slot[result] = next++;
    p.ins[p.num_ins++] = ins;
    return true;
  };
  // A value's slot; a captured scalar constant (JAX's sort comparators read constants of the
  // enclosing function) becomes a Const instruction on first use.
  auto operand = [&](const ir::Value* v) -> std::optional<int> {
    if (auto it = slot.find(v); it != slot.end()) return it->second;
    if (!is_scalar(v->type) || !v->defining_op) return std::nullopt;
    auto bits = constant_bits(*v->defining_op);
    if (!bits) return std::nullopt;
    Ins c;
    c.code = Code::Const;
    c.type = v->type.dtype;
    c.imm = *bits;
    if (!push(c, v)) return std::nullopt;
    return slot[v];
  };
  const ir::Operation* term = block.terminator();
  if (!term || term->name != "stablehlo.return") return std::nullopt;
  for (const auto& owned : block.ops) {
    const ir::Operation& op = *owned;
    if (&op == term) break;
    if (!op.regions.empty() || op.num_results() != 1 || !is_scalar(op.result(0)->type))
      return std::nullopt;
    const DType rt = op.result(0)->type.dtype;
    Ins ins;
    ins.type = rt;
    std::vector<int> in;
    for (const ir::Value* v : op.operands) {
      if (!is_scalar(v->type)) return std::nullopt;
      auto s = operand(v);
      if (!s) return std::nullopt;
      in.push_back(*s);
    }
    auto same_types = [&](size_t first) {
      for (size_t k = first; k < op.operands.size(); ++k)
        if (op.operands[k]->type.dtype != rt) return false;
      return true;
    };
    if (auto b = binary_codes().find(op.name); b != binary_codes().end()) {
      if (in.size() != 2 || !same_types(0) || !accepts(b->second, rt)) return std::nullopt;
      ins.code = b->second;
      ins.a = static_cast<int16_t>(in[0]);
      ins.b = static_cast<int16_t>(in[1]);
    } else if (auto u = unary_codes().find(op.name); u != unary_codes().end()) {
      if (in.size() != 1 || !same_types(0) || !accepts(u->second, rt)) return std::nullopt;
      ins.code = u->second;
      ins.a = ins.b = static_cast<int16_t>(in[0]);
    } else if (op.name == "stablehlo.select") {
      if (in.size() != 3 || op.operands[0]->type.dtype != DType::Bool || !same_types(1))
        return std::nullopt;
      ins.code = Code::Select;
      ins.a = static_cast<int16_t>(in[0]);
      ins.b = static_cast<int16_t>(in[1]);
      ins.c = static_cast<int16_t>(in[2]);
    } else if (op.name == "stablehlo.compare") {
      const DType t = op.operands.empty() ? rt : op.operands[0]->type.dtype;
      if (in.size() != 2 || rt != DType::Bool || op.operands[1]->type.dtype != t)
        return std::nullopt;
      const ir::Attribute* d = op.attr("comparison_direction");
      auto dir =
          d && d->kind == ir::Attribute::Kind::Enum ? direction(d->enum_value) : std::nullopt;
      if (!dir) return std::nullopt;
      ins.code = Code::Cmp;
      ins.type = t;
      ins.dir = *dir;
      if (const ir::Attribute* ct = op.attr("compare_type")) {
        const std::string& k = ct->enum_value;
        if (k == "TOTALORDER" && is_float(t))
          ins.total = true;
        else if (!((k == "FLOAT" && is_float(t)) || (k == "SIGNED" && is_signed_int(t)) ||
                   (k == "UNSIGNED" && (is_unsigned_int(t) || t == DType::Bool))))
          return std::nullopt;
      }
      ins.a = static_cast<int16_t>(in[0]);
      ins.b = static_cast<int16_t>(in[1]);
    } else if (auto bits = constant_bits(op)) {
      ins.code = Code::Const;
      ins.imm = *bits;
    } else {
      return std::nullopt;
    }
    if (!push(ins, op.result(0))) return std::nullopt;
  }
  if (term->operands.size() > static_cast<size_t>(Program::kMaxResults)) return std::nullopt;
  for (const ir::Value* v : term->operands) {
    auto s = operand(v);
    if (!s) return std::nullopt;
    p.results[p.num_results++] = static_cast<int16_t>(*s);
  }
  return p;
}

}  // namespace cujax::scalar
