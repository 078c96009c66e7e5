#include "compiler/quantized.h"

#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/module_copy.h"
#include "cujax/core/error.h"
#include "ir/pass_through.h"
#include "ir/type_walk.h"

namespace cujax::compiler {

namespace {

using V = ir::Value*;
using ValueMap = std::unordered_map<const ir::Value*, V>;

ir::Type storage_of(const ir::Type& t) {
  return t.is_quantized() ? ir::Type::tensor(t.shape, t.dtype) : t;
}

ir::Type expressed_of(const ir::Type& t) {
  return t.is_quantized() ? ir::Type::tensor(t.shape, t.quantized->expressed) : t;
}

bool is_quantized_type(const ir::Type& t) {
  return t.is_quantized();
}

bool touches_quantized(const ir::Operation& op) {
  return ir::op_has_type(op, is_quantized_type);
}

class QuantizedRewriter {
 public:
  void region(const ir::Region& from, ir::Region& to, ValueMap& map) {
    for (const auto& block : from.blocks) {
      ir::Block& nb = to.add_block();
      for (const auto& a : block->arguments) {
        V na = nb.add_argument(storage_of(a->type));
        na->name_hint = a->name_hint;
        na->loc = a->loc;
        map[a.get()] = na;
      }
      for (const auto& o : block->ops) op(*o, nb, map);
    }
  }

 private:
  void op(const ir::Operation& o, ir::Block& to, ValueMap& map) {
    std::vector<V> operands;
    for (const ir::Value* v : o.operands) operands.push_back(map.at(v));
    const std::string& n = o.name;
    // Quantized values go through the ops that pass values along as their stored integers.
    if (!touches_quantized(o) || ir::passes_values_along(o)) {
      copy(o, to, std::move(operands), map);
    } else if (n == "stablehlo.uniform_quantize") {
      const ir::Type& in = o.operands[0]->type;
      V x = in.is_quantized() ? dequantize(to, operands[0], in, o) : operands[0];
      map[o.result(0)] = quantize(to, x, o.result(0)->type, o);
    } else if (n == "stablehlo.uniform_dequantize") {
      map[o.result(0)] = dequantize(to, operands[0], o.operands[0]->type, o);
    } else if (n == "stablehlo.bitcast_convert") {
      const ir::Type out = storage_of(o.result(0)->type);
      map[o.result(0)] = operands[0]->type == out
                             ? operands[0]
                             : emit(to, "stablehlo.bitcast_convert", {operands[0]}, out, o);
    } else if (n == "stablehlo.constant") {
      // The literal already holds the stored integers.
      ir::Operation* c = copy(o, to, {}, map);
      if (const ir::Attribute* v = c->attr("value"); v && v->type) {
        auto plain = std::make_shared<ir::Attribute>(*v);
        plain->type.reset();
        c->set_attr("value", std::move(plain));
      }
    } else if (!o.regions.empty()) {
      throw Error(o.where() + ": quantized values in an op with a region are not supported (" +
                  first_quantized_type(o) + "); dequantize them before it");
    } else {
      // dequantize-op-quantize
      for (size_t i = 0; i < operands.size(); ++i)
        if (o.operands[i]->type.is_quantized())
          operands[i] = dequantize(to, operands[i], o.operands[i]->type, o);
      std::vector<ir::Type> types;
      for (const auto& r : o.results) types.push_back(expressed_of(r->type));
      ir::Operation* c = place(o, to, std::move(operands), std::move(types));
      for (size_t i = 0; i < o.results.size(); ++i) {
        V r = c->result(i);
        const ir::Type& t = o.result(i)->type;
        map[o.result(i)] = t.is_quantized() ? quantize(to, r, t, o) : r;
      }
    }
  }

  static std::string first_quantized_type(const ir::Operation& o) {
    for (const ir::Value* v : o.operands)
      if (v->type.is_quantized()) return v->type.str();
    for (const auto& r : o.results)
      if (r->type.is_quantized()) return r->type.str();
    return "";
  }

  // A copy of `o` on `operands` with `types` as result types, at `o`'s position in the text.
  ir::Operation* place(const ir::Operation& o, ir::Block& to, std::vector<V> operands,
                       std::vector<ir::Type> types) {
    auto c = ir::make_op(o.name, std::move(operands), types);
    c->attributes = o.attributes;
    ir::Operation* placed = push_at(to, std::move(c), o);
    for (size_t i = 0; i < o.results.size(); ++i)
      placed->results[i]->name_hint = o.results[i]->name_hint;
    return placed;
  }

  // `o` on the stored integers (regions too), its results mapped to the copy's.
  ir::Operation* copy(const ir::Operation& o, ir::Block& to, std::vector<V> operands,
                      ValueMap& map) {
    std::vector<ir::Type> types;
    for (const auto& r : o.results) types.push_back(storage_of(r->type));
    ir::Operation* placed = place(o, to, std::move(operands), std::move(types));
    for (const auto& r : o.regions) region(*r, placed->add_region(), map);
    for (size_t i = 0; i < o.results.size(); ++i) map[o.result(i)] = placed->result(i);
    return placed;
  }

  // `c` appended to `to` at `at`'s position in the text.
  static ir::Operation* push_at(ir::Block& to, std::unique_ptr<ir::Operation> c,
                                const ir::Operation& at) {
    c->loc = at.loc;
    c->line = at.line;
    c->column = at.column;
    return to.push_back(std::move(c));
  }

  V emit(ir::Block& to, const std::string& name, std::vector<V> operands, const ir::Type& type,
         const ir::Operation& at) {
    return push_at(to, ir::make_op(name, std::move(operands), {type}), at)->result(0);
  }

  V constant(ir::Block& to, HostTensor value, const ir::Operation& at) {
    auto c =
        ir::make_op("stablehlo.constant", {}, {ir::Type::tensor(value.shape(), value.dtype())});
    c->set_attr("value", ir::Attribute::dense_elements(std::move(value)));
    return push_at(to, std::move(c), at)->result(0);
  }

  // One value per scale or zero point of `t`, as a tensor of `t`'s shape and element type
  // `dtype`: a scalar broadcast (per tensor) or a vector broadcast along the quantization
  // dimension (per axis). Scales are rounded once from double to `dtype`.
  template <class T>
  V parameter(ir::Block& to, const std::vector<T>& values, DType dtype, const ir::Type& t,
              const ir::Operation& at) {
    const ir::QuantizedType& q = *t.quantized;
    const bool per_axis = q.quantization_dimension.has_value();
    const Shape shape = per_axis ? Shape{static_cast<int64_t>(values.size())} : Shape{};
    V v = constant(
        to, HostTensor::from_vector(per_axis ? values : std::vector<T>{values.at(0)}, shape), at);
    if (v->type.dtype != dtype)
      v = emit(to, "stablehlo.convert", {v}, ir::Type::tensor(shape, dtype), at);
    auto b = ir::make_op("stablehlo.broadcast_in_dim", {v}, {ir::Type::tensor(t.shape, dtype)});
    b->set_attr(
        "broadcast_dimensions",
        ir::Attribute::dense_array(per_axis ? std::vector<int64_t>{*q.quantization_dimension}
                                            : std::vector<int64_t>{}));
    return push_at(to, std::move(b), at)->result(0);
  }

  V scalar(ir::Block& to, double value, DType dtype, const ir::Operation& at) {
    V v = constant(to, HostTensor::from_vector(std::vector<double>{value}, Shape{}), at);
    return dtype == DType::F64
               ? v
               : emit(to, "stablehlo.convert", {v}, ir::Type::tensor({}, dtype), at);
  }

  // x (a float tensor of t's expressed type) quantized to t, as t's stored integers.
  V quantize(ir::Block& to, V x, const ir::Type& t, const ir::Operation& at) {
    const ir::QuantizedType& q = *t.quantized;
    const ir::Type e = expressed_of(t);
    std::vector<double> zero_points(q.zero_points.begin(), q.zero_points.end());
    V scaled =
        emit(to, "stablehlo.divide", {x, parameter(to, q.scales, q.expressed, t, at)}, e, at);
    V shifted =
        emit(to, "stablehlo.add", {scaled, parameter(to, zero_points, q.expressed, t, at)}, e, at);
    V lo = scalar(to, static_cast<double>(q.storage_min), q.expressed, at);
    V hi = scalar(to, static_cast<double>(q.storage_max), q.expressed, at);
    V clamped = emit(to, "stablehlo.clamp", {lo, shifted, hi}, e, at);
    V rounded = emit(to, "stablehlo.round_nearest_even", {clamped}, e, at);
    return emit(to, "stablehlo.convert", {rounded}, storage_of(t), at);
  }

  // q (t's stored integers) as the values of t's expressed type they stand for.
  V dequantize(ir::Block& to, V q, const ir::Type& t, const ir::Operation& at) {
    const ir::QuantizedType& p = *t.quantized;
    const ir::Type wide = ir::Type::tensor(t.shape, DType::I64);
    V w = emit(to, "stablehlo.convert", {q}, wide, at);
    V d = emit(to, "stablehlo.subtract", {w, parameter(to, p.zero_points, DType::I64, t, at)}, wide,
               at);
    V f = emit(to, "stablehlo.convert", {d}, expressed_of(t), at);
    return emit(to, "stablehlo.multiply", {f, parameter(to, p.scales, p.expressed, t, at)},
                expressed_of(t), at);
  }
};

}  // namespace

bool has_quantized(const ir::Module& module) {
  return ir::module_has_type(module, is_quantized_type);
}

std::unique_ptr<ir::Module> lower_quantized_types(const ir::Module& module) {
  std::unique_ptr<ir::Module> out = copy_signatures(module);
  QuantizedRewriter rw;
  for (size_t i = 0; i < module.functions.size(); ++i) {
    for (ir::Type& t : out->functions[i]->result_types) t = storage_of(t);
    ValueMap map;
    rw.region(module.functions[i]->body, out->functions[i]->body, map);
  }
  return out;
}

}  // namespace cujax::compiler
