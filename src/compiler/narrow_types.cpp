#include "compiler/narrow_types.h"

#include <cstring>
#include <string>
#include <unordered_map>

#include "compiler/module_copy.h"
#include "cujax/core/error.h"
#include "ir/type_walk.h"

namespace cujax::compiler {

namespace {

using V = ir::Value*;
using ValueMap = std::unordered_map<const ir::Value*, V>;

bool is_narrow_type(const ir::Type& t) {
  return !t.is_token && is_narrow(t.dtype);
}

ir::Type with_dtype(const ir::Type& t, DType d) {
  return ir::Type::tensor(t.shape, d);
}

DType unsigned_of(DType t) {
  return t == DType::I2 ? DType::U2 : t == DType::I4 ? DType::U4 : t;
}

// Ops that are not computations on their values: they pass narrow values along as they are
// (control flow, calls, the interpreter's check ops) or handle them themselves.
bool keeps_narrow(const ir::Operation& op) {
  const std::string& n = op.name;
  if (!n.starts_with("stablehlo.") && !n.starts_with("chlo.")) return true;
  return n == "stablehlo.constant" || n == "stablehlo.bitcast_convert" || n == "stablehlo.while" ||
         n == "stablehlo.if" || n == "stablehlo.case" || n == "stablehlo.optimization_barrier" ||
         n == "stablehlo.custom_call" || n == "stablehlo.return" || n == "stablehlo.send" ||
         n == "stablehlo.recv" || n == "stablehlo.infeed" || n == "stablehlo.outfeed" ||
         n == "stablehlo.after_all";
}

// Bit operations whose result depends on the bits above a narrow integer's width: they run on
// the unsigned type of the same width, zero-extended.
bool is_bit_op(const std::string& n) {
  return n == "stablehlo.popcnt" || n == "stablehlo.count_leading_zeros" ||
         n == "stablehlo.shift_right_logical";
}

class NarrowTypesRewriter {
 public:
  void region(const ir::Region& from, ir::Region& to, ValueMap& map, bool widen) {
    for (const auto& block : from.blocks) {
      ir::Block& nb = to.add_block();
      const ir::Operation* at = from.parent_op;
      for (const auto& a : block->arguments) {
        const bool wide = widen && is_narrow_type(a->type);
        V na = nb.add_argument(wide ? with_dtype(a->type, wide_type_of(a->type.dtype)) : a->type);
        na->name_hint = a->name_hint;
        na->loc = a->loc;
        map[a.get()] = wide ? convert(nb, na, a->type.dtype, *at) : na;
      }
      this->block(*block, nb, map, widen);
    }
  }

 private:
  void block(const ir::Block& from, ir::Block& to, ValueMap& map, bool widen_terminator) {
    for (const auto& o : from.ops) {
      const bool terminator = o.get() == from.terminator();
      if (o->name == "stablehlo.convert" && touches_narrow(*o)) {
        map[o->result(0)] = convert(to, map.at(o->operands.at(0)), o->result(0)->type.dtype, *o);
      } else if (terminator && widen_terminator) {
        std::vector<V> operands;
        for (const ir::Value* v : o->operands) operands.push_back(widened(to, map.at(v), *o));
        copy(*o, to, std::move(operands), false, map);
      } else if (!keeps_narrow(*o) && touches_narrow(*o)) {
        widen(*o, to, map);
      } else {
        std::vector<V> operands;
        for (const ir::Value* v : o->operands) operands.push_back(map.at(v));
        copy(*o, to, std::move(operands), false, map);
      }
    }
  }

  // A copy of `o` on `operands` (results widened when `wide`), its results mapped to the copy's.
  ir::Operation* copy(const ir::Operation& o, ir::Block& to, std::vector<V> operands, bool wide,
                      ValueMap& map) {
    std::vector<ir::Type> types;
    for (const auto& r : o.results)
      types.push_back(wide && is_narrow_type(r->type)
                          ? with_dtype(r->type, wide_type_of(r->type.dtype))
                          : r->type);
    auto c = ir::make_op(o.name, std::move(operands), types);
    c->attributes = o.attributes;
    c->loc = o.loc;
    c->line = o.line;
    c->column = o.column;
    ir::Operation* placed = to.push_back(std::move(c));
    for (const auto& r : o.regions) region(*r, placed->add_region(), map, wide);
    for (size_t i = 0; i < o.results.size(); ++i) {
      placed->results[i]->name_hint = o.results[i]->name_hint;
      map[o.results[i].get()] = placed->result(i);
    }
    return placed;
  }

  // `o` computed on the wide types of its narrow operands and results, its narrow results
  // converted back.
  void widen(const ir::Operation& o, ir::Block& to, ValueMap& map) {
    if (is_bit_op(o.name) && is_narrow_int(o.operands.at(0)->type.dtype)) {
      widen_bit_op(o, to, map);
      return;
    }
    std::vector<V> operands;
    for (const ir::Value* v : o.operands) operands.push_back(widened(to, map.at(v), o));
    ir::Operation* c = copy(o, to, std::move(operands), true, map);
    for (size_t i = 0; i < o.results.size(); ++i)
      if (is_narrow_type(o.result(i)->type))
        map[o.result(i)] = convert(to, c->result(i), o.result(i)->type.dtype, o);
  }

  void widen_bit_op(const ir::Operation& o, ir::Block& to, ValueMap& map) {
    const DType t = o.operands[0]->type.dtype;
    const DType u = unsigned_of(t);
    std::vector<V> operands;
    for (const ir::Value* v : o.operands) {
      V x = map.at(v);
      if (x->type.dtype != u)
        x = op(to, "stablehlo.bitcast_convert", {x}, with_dtype(x->type, u), o);
      operands.push_back(convert(to, x, DType::U8, o));
    }
    const ir::Type& rt = o.result(0)->type;
    V r = op(to, o.name, operands, with_dtype(rt, DType::U8), o);
    if (o.name == "stablehlo.count_leading_zeros") {
      // The zeros above the narrow width do not count.
      HostTensor pad(DType::U8, rt.shape);
      std::memset(pad.data(), 8 - bit_width(t), pad.nbytes());
      auto c = ir::make_op("stablehlo.constant", {}, {r->type});
      c->set_attr("value", ir::Attribute::dense_elements(std::move(pad)));
      V k = to.push_back(std::move(c))->result(0);
      r = op(to, "stablehlo.subtract", {r, k}, r->type, o);
    }
    r = convert(to, r, u, o);
    if (u != t) r = op(to, "stablehlo.bitcast_convert", {r}, rt, o);
    map[o.result(0)] = r;
  }

  V widened(ir::Block& to, V x, const ir::Operation& at) {
    return is_narrow_type(x->type) ? convert(to, x, wide_type_of(x->type.dtype), at) : x;
  }

  V op(ir::Block& to, const std::string& name, std::vector<V> operands, const ir::Type& type,
       const ir::Operation& at) {
    auto c = ir::make_op(name, std::move(operands), {type});
    c->loc = at.loc;
    c->line = at.line;
    c->column = at.column;
    return to.push_back(std::move(c))->result(0);
  }

  // x converted to element type d by native converts (is_native_convert) and ordinary ones.
  V convert(ir::Block& to, V x, DType d, const ir::Operation& at) {
    const DType s = x->type.dtype;
    if (s == d) return x;
    if (is_native_convert(s, d))
      return op(to, "stablehlo.convert", {x}, with_dtype(x->type, d), at);
    DType mid;
    if (is_narrow_float(s)) {
      mid = DType::F32;
    } else if (is_narrow_int(s)) {
      mid = DType::I64;
    } else if (is_narrow_int(d) && !is_float(s) && !is_complex(s)) {
      mid = DType::I64;
    } else {
      mid = DType::F64;
    }
    return convert(to, convert(to, x, mid, at), d, at);
  }
};

}  // namespace

bool is_native_convert(DType from, DType to) {
  const bool f32_or_f64_from = from == DType::F32 || from == DType::F64;
  const bool f32_or_f64_to = to == DType::F32 || to == DType::F64;
  const bool int_from = is_integer(from) || from == DType::Bool;
  const bool int_to = is_integer(to) || to == DType::Bool;
  if (is_narrow_float(from)) return f32_or_f64_to || from == to;
  if (is_narrow_float(to)) return f32_or_f64_from;
  if (is_narrow_int(from)) return int_to;
  if (is_narrow_int(to)) return int_from || f32_or_f64_from;
  return true;
}

DType wide_type_of(DType t) {
  if (is_narrow_float(t)) return DType::F32;
  if (is_narrow_int(t)) return is_signed_int(t) ? DType::I8 : DType::U8;
  return t;
}

bool touches_narrow(const ir::Operation& op) {
  return ir::op_has_type(op, is_narrow_type);
}

bool has_narrow(const ir::Module& module) {
  return ir::module_has_type(module, is_narrow_type);
}

std::unique_ptr<ir::Module> widen_narrow_types(const ir::Module& module) {
  std::unique_ptr<ir::Module> out = copy_signatures(module);
  NarrowTypesRewriter rw;
  for (size_t i = 0; i < module.functions.size(); ++i) {
    ValueMap map;
    rw.region(module.functions[i]->body, out->functions[i]->body, map, false);
  }
  return out;
}

}  // namespace cujax::compiler
