#include "compiler/op_cost.h"

#include <algorithm>
#include <set>
#include <string>

namespace cujax::compiler {

namespace {

bool is_transcendental(const std::string& name) {
  static const std::set<std::string> kOps = {
      "stablehlo.exponential", "stablehlo.exponential_minus_one",
      "stablehlo.log",         "stablehlo.log_plus_one",
      "stablehlo.logistic",    "stablehlo.tanh",
      "stablehlo.tan",         "stablehlo.sine",
      "stablehlo.cosine",      "stablehlo.atan2",
      "stablehlo.power",       "stablehlo.sqrt",
      "stablehlo.rsqrt",       "stablehlo.cbrt"};
  return kOps.count(name) > 0;
}

bool is_arithmetic(const std::string& name) {
  static const std::set<std::string> kOps = {"stablehlo.add",
                                             "stablehlo.subtract",
                                             "stablehlo.multiply",
                                             "stablehlo.divide",
                                             "stablehlo.remainder",
                                             "stablehlo.maximum",
                                             "stablehlo.minimum",
                                             "stablehlo.negate",
                                             "stablehlo.abs",
                                             "stablehlo.compare",
                                             "stablehlo.select",
                                             "stablehlo.clamp",
                                             "stablehlo.sign",
                                             "stablehlo.floor",
                                             "stablehlo.ceil",
                                             "stablehlo.round_nearest_even",
                                             "stablehlo.round_nearest_afz",
                                             "stablehlo.and",
                                             "stablehlo.or",
                                             "stablehlo.xor",
                                             "stablehlo.not"};
  return kOps.count(name) > 0;
}

}  // namespace

double value_bytes(const ir::Value& v) {
  return v.type.is_token ? 0
                         : static_cast<double>(v.type.num_elements()) *
                               static_cast<double>(size_of(v.type.dtype));
}

OpCost op_cost(const ir::Operation& op) {
  OpCost cost;
  int64_t out_elems = 0;
  for (const auto& r : op.results) out_elems += r->type.num_elements();
  if (op.name == "stablehlo.dot_general") {
    const auto& lhs = op.operands[0]->type;
    int64_t k = 1;
    if (const ir::Attribute* dn = op.attr("dot_dimension_numbers"))
      if (const ir::Attribute* c = dn->field("lhs_contracting_dimensions"))
        for (int64_t d : ir::as_ints(*c)) k *= lhs.shape.at(d);
    cost.flops = 2.0 * static_cast<double>(out_elems) * static_cast<double>(k);
  } else if (op.name == "stablehlo.convolution") {
    const auto& kernel = op.operands[1]->type;
    // Each output element reads one kernel window of input features.
    int64_t window = kernel.num_elements();
    if (const ir::Attribute* dn = op.attr("dimension_numbers"))
      if (const ir::Attribute* o = dn->field("kernel_output_feature_dimension"))
        window /= std::max<int64_t>(1, kernel.shape.at(o->integer));
    cost.flops = 2.0 * static_cast<double>(out_elems) * static_cast<double>(window);
  } else if (op.name == "stablehlo.reduce" || op.name == "stablehlo.reduce_window") {
    for (const auto& v : op.operands) cost.flops += static_cast<double>(v->type.num_elements()) / 2;
  } else if (is_transcendental(op.name)) {
    cost.transcendentals = static_cast<double>(out_elems);
  } else if (is_arithmetic(op.name)) {
    cost.flops = static_cast<double>(out_elems);
  }
  if (op.name != "stablehlo.constant" && op.name != "func.call") {
    for (const auto* v : op.operands) cost.bytes += value_bytes(*v);
    for (const auto& r : op.results) cost.bytes += value_bytes(*r);
  }
  return cost;
}

}  // namespace cujax::compiler
