// The StableHLO verifier: operand dominance, function calls and returns, region signatures, and
// the type and shape constraints (C1, C2, ...) that the StableHLO specification gives each op.
// Ops it does not know are accepted as they are; the backends report what they cannot run.
#include "cujax/ir/verifier.h"

#include <algorithm>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cujax/core/error.h"
#include "ir/op_attrs.h"
#include "ir/op_table.h"
#include "ir/pass_through.h"
#include "ir/type_walk.h"
#include "ir/verify_op.h"

namespace cujax::ir {
namespace {

using namespace rules;

std::string value_str(const Value* v) {
  if (v->name_hint.empty()) return "";
  return " (%" + v->name_hint + ")";
}

// The operand and result counts the op table gives.
void check_counts(OpCheck& c, const ops::OpDef& d) {
  if (d.num_operands >= 0)
    c.operands_are(static_cast<size_t>(d.num_operands));
  else if (d.min_operands > 0)
    c.operands_at_least(static_cast<size_t>(d.min_operands));
  if (d.num_results >= 0) {
    c.results_are(static_cast<size_t>(d.num_results));
  } else if (d.num_results == ops::kPerOperand && c.num_results() != c.num_operands()) {
    c.fail("has " + std::to_string(c.num_results()) + " results, expected " +
           std::to_string(c.num_operands()) + " (one per operand)");
  }
}

// The region count of the op table and the attributes of op_attrs.h: each required one present,
// each present one of its kind (attributes the table does not name, such as mhlo.sharding,
// are the producer's and pass).
void check_regions_and_attributes(OpCheck& c, const ops::OpDef& d) {
  const Operation& op = c.op();
  if (d.num_regions != ops::kAny && op.regions.size() != static_cast<size_t>(d.num_regions))
    c.fail("has " + std::to_string(op.regions.size()) + " region" +
           (op.regions.size() == 1 ? "" : "s") + ", expected " + std::to_string(d.num_regions));
  for (const ops::AttrDef& a : ops::attribute_rows()) {
    if (a.op != d.name) continue;
    const Attribute* v = op.attr(a.name);
    if (!v) {
      if (a.required) c.fail("missing attribute '" + std::string(a.name) + "'");
    } else if (!ops::holds_kind(*v, a.kind)) {
      c.fail("attribute '" + std::string(a.name) + "' must be " +
             std::string(ops::describe(a.kind)));
    }
  }
}

const Checkers& checkers() {
  static const auto* table = [] {
    auto* m = new Checkers();
    add_elementwise_rules(*m);
    add_shape_rules(*m);
    add_reduction_rules(*m);
    add_contraction_rules(*m);
    add_gather_rules(*m);
    add_control_rules(*m);
    return m;
  }();
  return *table;
}

// ---------------------------------------------------------------------------------------------
// The walk: scopes of visible values, then each op's own rule, then its regions.

class Verifier {
 public:
  explicit Verifier(const Module& module) : module_(module) {}

  void run() {
    std::unordered_set<std::string> names;
    for (const auto& f : module_.functions)
      if (!names.insert(f->name).second)
        throw VerifyError("function @" + f->name + " is defined more than once");
    for (const auto& f : module_.functions) verify_function(*f);
  }

 private:
  void verify_function(const Function& f) {
    function_ = &f;
    if (f.body.blocks.empty()) return;  // a declaration
    if (f.body.blocks.size() != 1)
      throw VerifyError("function @" + f.name + " has " + std::to_string(f.body.blocks.size()) +
                        " blocks, expected 1");
    const Block& entry = f.entry();
    if (entry.ops.empty()) {
      if (entry.arguments.empty() && f.result_types.empty()) return;  // a declaration
      throw VerifyError("function @" + f.name + " has an empty body, expected func.return");
    }
    verify_block(entry);
    const Operation* term = entry.terminator();
    if (term->name != "func.return")
      throw VerifyError("function @" + f.name + " must end with func.return, found " +
                        term->where());
  }

  void verify_block(const Block& b) {
    std::vector<const Value*> added;
    for (const auto& a : b.arguments) {
      visible_.insert(a.get());
      added.push_back(a.get());
    }
    for (size_t i = 0; i < b.ops.size(); ++i) {
      const Operation& op = *b.ops[i];
      const bool terminator = op.name == "func.return" || op.name == "stablehlo.return";
      if (terminator && i + 1 != b.ops.size())
        throw VerifyError(op.where() + ": must be the last op of its block, but " +
                          b.ops[i + 1]->where() + " follows it");
      verify_op(op);
      for (const auto& r : op.results) {
        visible_.insert(r.get());
        added.push_back(r.get());
      }
    }
    for (const Value* v : added) visible_.erase(v);
  }

  void verify_op(const Operation& op) {
    for (size_t i = 0; i < op.operands.size(); ++i) check_defined(op, i);
    const ops::OpDef* def = ops::find(op.name);
    auto it = checkers().find(op.name);
    if (def || it != checkers().end()) {
      OpCheck c(op, module_, *function_);
      view_quantized(op, c);
      if (def) {
        check_counts(c, *def);
        check_regions_and_attributes(c, *def);
      }
      if (it != checkers().end()) it->second(c);
    }
    for (const auto& r : op.regions)
      for (const auto& b : r->blocks) verify_block(*b);
  }

  // An op on quantized values computes on what they stand for (the spec's
  // dequantize-op-quantize), so it is checked on their expressed types; bitcast_convert sees
  // their stored integers. The quantize ops, constants and the ops that pass values along
  // (control flow, calls, custom calls) check the quantized types themselves. Computing ops with
  // a region (reduce, sort, ...) are not supported on quantized values (compiler/quantized.h).
  static void view_quantized(const Operation& op, OpCheck& c) {
    if (!op_has_type(op, [](const Type& t) { return t.is_quantized(); })) return;
    const std::string& n = op.name;
    if (n == "stablehlo.bitcast_convert") {
      c.view_quantized_as([](const Type& t) { return Type::tensor(t.shape, t.dtype); });
    } else if (!passes_values_along(op) && n != "stablehlo.uniform_quantize" &&
               n != "stablehlo.uniform_dequantize" && n != "stablehlo.constant") {
      if (!op.regions.empty()) c.fail("quantized values in an op with a region are not supported");
      c.view_quantized_as(
          [](const Type& t) { return Type::tensor(t.shape, t.quantized->expressed); });
    }
  }

  // True when block `b` is `op`'s block or encloses it.
  static bool encloses(const Block* b, const Operation& op) {
    for (const Block* cur = op.parent; cur;) {
      if (cur == b) return true;
      const Region* r = cur->parent;
      const Operation* parent_op = r ? r->parent_op : nullptr;
      cur = parent_op ? parent_op->parent : nullptr;
    }
    return false;
  }

  void check_defined(const Operation& op, size_t i) const {
    const Value* v = op.operands[i];
    const std::string prefix = op.where() + ": operand " + std::to_string(i);
    if (!v) throw VerifyError(prefix + " is missing (null)");
    if (visible_.count(v)) return;
    const std::string name = value_str(v);
    if (v->defining_op) {
      const Operation* def = v->defining_op;
      if (def == &op) throw VerifyError(prefix + name + " is a result of the op itself");
      if (encloses(def->parent, op))
        throw VerifyError(prefix + name + " is used before its definition by " + def->where());
      throw VerifyError(prefix + name + " is defined by " + def->where() +
                        " in a region that does not enclose this op");
    }
    throw VerifyError(prefix + name + " is an argument of a block that does not enclose this op");
  }

  const Module& module_;
  const Function* function_ = nullptr;
  std::unordered_set<const Value*> visible_;
};

}  // namespace

void verify(const Module& module) {
  Verifier(module).run();
}

}  // namespace cujax::ir
