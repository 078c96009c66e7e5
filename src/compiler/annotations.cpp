#include "compiler/annotations.h"

#include <algorithm>
#include <array>
#include <string>
#include <unordered_map>

#include "cujax/core/error.h"
#include "cujax/ir/parser.h"
#include "cujax/ir/printer.h"

namespace cujax::compiler {

namespace {

// Custom calls that pass their operands through unchanged on one device.
constexpr std::array<std::string_view, 11> kIdentityTargets = {"annotate_device_placement",
                                                               "Sharding",
                                                               "SPMDFullToShardShape",
                                                               "SPMDShardToFullShape",
                                                               "xla.sdy.FuncResultSharding",
                                                               "xla.sdy.GlobalToLocalShape",
                                                               "xla.sdy.LocalToGlobalShape",
                                                               "xla.sdy.ShardingConstraint",
                                                               "xla.sdy.Reshard",
                                                               "xla.sdy.PropagationBarrier",
                                                               "MoveToHost"};

// Ops of the sdy dialect that pass their operand through on one device.
constexpr std::array<std::string_view, 3> kIdentityOps = {"sdy.sharding_constraint", "sdy.reshard",
                                                          "sdy.propagation_barrier"};

std::string custom_call_target(const ir::Operation& op) {
  if (op.name != "stablehlo.custom_call") return "";
  const ir::Attribute* t = op.attr("call_target_name");
  return t ? t->text : "";
}

bool contains(auto& list, std::string_view s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

enum class Action { Keep, Identity, Drop, CallBody, Inline };

// What lower_annotations does with `op`; throws for an unknown placement.
Action action_of(const ir::Operation& op) {
  if (contains(kIdentityOps, op.name)) return Action::Identity;
  if (op.name == "sdy.manual_computation") return Action::Inline;
  if (op.name == "sdy.sharding_group") return Action::Drop;
  const std::string target = custom_call_target(op);
  if (target.empty()) return Action::Keep;
  if (target == "annotate_device_placement") {
    const ir::Attribute* fa = op.attr("mhlo.frontend_attributes");
    const ir::Attribute* kind = fa ? fa->field("_xla_buffer_placement") : nullptr;
    if (!kind)
      throw UnsupportedError(op.where() +
                             ": annotate_device_placement needs mhlo.frontend_attributes "
                             "{_xla_buffer_placement = KIND}");
    if (!is_known_memory_kind(kind->text))
      throw UnsupportedError(op.where() + ": annotate_device_placement: memory kind '" +
                             kind->text +
                             "' is not one cujax knows (device, pinned_host, unpinned_host)");
  }
  if (contains(kIdentityTargets, target)) return Action::Identity;
  if (target == "xla.sdy.ShardingGroup") return Action::Drop;
  if (target == "xla.sdy.ManualComputation") return Action::CallBody;
  return Action::Keep;
}

void check_memory_kinds(const std::vector<std::vector<ir::NamedAttribute>>& attrs,
                        const ir::Function& f, const char* what) {
  for (size_t i = 0; i < attrs.size(); ++i)
    for (const auto& a : attrs[i])
      if (a.name == "mhlo.memory_kind" && !is_known_memory_kind(a.value->text))
        throw UnsupportedError("@" + f.name + " " + what + " " + std::to_string(i) +
                               ": mhlo.memory_kind '" + a.value->text +
                               "' is not one cujax knows (device, pinned_host, unpinned_host)");
}

bool any_annotation(const ir::Block& block) {
  bool found = false;
  for (const auto& op : block.ops) {
    if (action_of(*op) != Action::Keep) found = true;
    for (const auto& r : op->regions)
      for (const auto& b : r->blocks) found = any_annotation(*b) || found;
  }
  return found;
}

class Lowering {
 public:
  void block(ir::Block& b) {
    for (size_t i = 0; i < b.ops.size();) {
      ir::Operation& op = *b.ops[i];
      for (auto& v : op.operands) v = resolve(v);
      for (const auto& r : op.regions)
        for (const auto& nb : r->blocks) block(*nb);
      const Action action = action_of(op);
      if (action == Action::Keep) {
        ++i;
      } else if (action == Action::CallBody) {
        call_body(op);
        ++i;
      } else if (action == Action::Inline) {
        inline_body(b, i);
      } else {
        if (action == Action::Identity) {
          if (op.operands.size() != op.num_results())
            throw UnsupportedError(op.where() + ": a sharding annotation with " +
                                   std::to_string(op.operands.size()) + " operands and " +
                                   std::to_string(op.num_results()) + " results");
          for (size_t k = 0; k < op.num_results(); ++k) {
            same_type(op, k);
            map_[op.result(k)] = op.operands[k];
          }
        }
        retire(b, i);
      }
    }
  }

 private:
  ir::Value* resolve(ir::Value* v) const {
    for (auto it = map_.find(v); it != map_.end(); it = map_.find(v)) v = it->second;
    return v;
  }

  // A shard of the whole value has its shape only on one device.
  static void same_type(const ir::Operation& op, size_t k) {
    if (op.operands[k]->type != op.result(k)->type)
      throw UnsupportedError(op.where() + ": " + op.operands[k]->type.str() + " to " +
                             op.result(k)->type.str() +
                             " is a shard of a program for several devices; run it with a mesh "
                             "of the size it names");
  }

  // custom_call @xla.sdy.ManualComputation(args) {called_computations = [@body]}: the body on
  // the local shapes, which on one device are the global ones.
  static void call_body(ir::Operation& op) {
    const ir::Attribute* called = op.attr("called_computations");
    if (!called || called->kind != ir::Attribute::Kind::Array || called->elements.size() != 1 ||
        called->elements[0]->kind != ir::Attribute::Kind::Symbol)
      throw UnsupportedError(op.where() +
                             ": xla.sdy.ManualComputation needs called_computations = [@body]");
    const std::string callee = called->elements[0]->text;
    op.name = "func.call";
    op.attributes.clear();
    op.set_attr("callee", ir::Attribute::symbol(callee));
  }

  // sdy.manual_computation(args) in_shardings=... (%a, ...) { ... sdy.return %r }: its body
  // in place, each block argument the whole operand.
  void inline_body(ir::Block& b, size_t i) {
    ir::Operation& op = *b.ops[i];
    if (op.regions.size() != 1 || op.regions[0]->blocks.size() != 1)
      throw UnsupportedError(op.where() + ": sdy.manual_computation needs one body block");
    ir::Block& body = op.regions[0]->front();
    if (body.arguments.size() != op.operands.size())
      throw UnsupportedError(op.where() + ": sdy.manual_computation's body takes " +
                             std::to_string(body.arguments.size()) + " values for " +
                             std::to_string(op.operands.size()) + " operands");
    for (size_t k = 0; k < op.operands.size(); ++k) {
      if (body.arguments[k]->type != op.operands[k]->type)
        throw UnsupportedError(op.where() + ": operand " + std::to_string(k) + " " +
                               op.operands[k]->type.str() + " is sharded to " +
                               body.arguments[k]->type.str() +
                               ": the program runs on several devices");
      map_[body.arguments[k].get()] = op.operands[k];
    }
    const ir::Operation* ret = body.terminator();
    if (!ret || ret->operands.size() != op.num_results())
      throw UnsupportedError(op.where() + ": sdy.manual_computation's body returns " +
                             std::to_string(ret ? ret->operands.size() : 0) + " values for " +
                             std::to_string(op.num_results()) + " results");
    for (size_t k = 0; k < op.num_results(); ++k) map_[op.result(k)] = resolve(ret->operands[k]);
    std::vector<std::unique_ptr<ir::Operation>> moved;
    for (size_t k = 0; k + 1 < body.ops.size(); ++k) {
      body.ops[k]->parent = &b;
      moved.push_back(std::move(body.ops[k]));
    }
    // The body's ops take the op's place (the loop visits them again to read their operands
    // through the new mapping); the op and its return go.
    retire(b, i);
    b.ops.insert(b.ops.begin() + static_cast<std::ptrdiff_t>(i),
                 std::make_move_iterator(moved.begin()), std::make_move_iterator(moved.end()));
  }

  // Removes b.ops[i], kept alive so that no later value reuses an address map_ holds.
  void retire(ir::Block& b, size_t i) {
    retired_.push_back(std::move(b.ops[i]));
    b.ops.erase(b.ops.begin() + static_cast<std::ptrdiff_t>(i));
  }

  std::unordered_map<const ir::Value*, ir::Value*> map_;
  std::vector<std::unique_ptr<ir::Operation>> retired_;  // own values map_ may still name
};

}  // namespace

bool is_known_memory_kind(std::string_view kind) {
  return kind == "device" || kind == "pinned_host" || kind == "unpinned_host";
}

bool has_annotations(const ir::Module& module) {
  bool found = false;
  for (const auto& f : module.functions) {
    check_memory_kinds(f->arg_attrs, *f, "argument");
    check_memory_kinds(f->result_attrs, *f, "result");
    for (const auto& b : f->body.blocks) found = any_annotation(*b) || found;
  }
  return found;
}

std::unique_ptr<ir::Module> lower_annotations(const ir::Module& module) {
  // A copy through the printer: the lowering then edits it in place.
  std::unique_ptr<ir::Module> out = ir::parse_module(ir::print_module(module));
  Lowering lowering;
  for (const auto& f : out->functions) {
    for (const auto& b : f->body.blocks) lowering.block(*b);
  }
  return out;
}

}  // namespace cujax::compiler
