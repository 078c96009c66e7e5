// Exported from jax.export's Exported.serialize() bytes: the calling convention JAX records
// (trees, avals, shardings, platforms, module_kept_var_idx) around the module its portable
// artifact holds.
#include <algorithm>
#include <functional>

#include "cujax/core/dynamic_shape.h"
#include "cujax/export.h"
#include "cujax/ir/bytecode.h"
#include "cujax/ir/parser.h"
#include "export/jax_convention.h"
#include "export/symbolic_dims.h"
#include "sharding/partition.h"

namespace cujax {

namespace {

using jax_export::PyTreeDef;

// The leaf paths of a tree: "args[0]", "args[1].w", "kwargs.scale", "result[0]".
void leaf_paths(const PyTreeDef& t, const std::string& prefix, std::vector<std::string>& out) {
  if (t.kind == PyTreeDef::Kind::leaf) {
    out.push_back(prefix);
    return;
  }
  for (size_t i = 0; i < t.children.size(); ++i) {
    const bool keyed = t.kind == PyTreeDef::Kind::dict;
    leaf_paths(t.children[i],
               keyed ? prefix + "." + t.children_names[i] : prefix + "[" + std::to_string(i) + "]",
               out);
  }
}

// The structure trace::flatten_arguments writes for C++ arguments of this tree's shape.
std::string cujax_structure(const PyTreeDef& t) {
  switch (t.kind) {
    case PyTreeDef::Kind::leaf:
      return "*,";
    case PyTreeDef::Kind::none:
      return "none()";
    case PyTreeDef::Kind::custom:
      return "custom " + t.custom_name + "(?)";
    default:
      break;
  }
  const char* kind = t.kind == PyTreeDef::Kind::tuple  ? "tuple"
                     : t.kind == PyTreeDef::Kind::list ? "list"
                                                       : "dict";
  std::string s = kind + std::to_string(t.children.size()) + "(";
  for (size_t i = 0; i < t.children.size(); ++i) {
    if (t.kind == PyTreeDef::Kind::dict) s += t.children_names[i] + "=";
    s += cujax_structure(t.children[i]);
  }
  return s + ")";
}

ExportedLeaf leaf_of(const jax_export::AbstractValue& a, const std::string& path,
                     const jax_export::Sharding* sharding, const std::string& what) {
  // A symbolic dimension is dynamic here; a call solves its variables from the inputs
  // (Exported::call_flat) and the module is refined to their shapes.
  std::optional<Shape> shape = a.static_shape();
  if (!shape) {
    shape.emplace();
    for (const auto& d : a.shape) {
      const bool digits = !d.empty() && std::all_of(d.begin(), d.end(),
                                                    [](char c) { return c >= '0' && c <= '9'; });
      if (!digits) jax_export::parse_dim_expr(d);  // refuses what cujax cannot read, naming it
      shape->push_back(digits ? std::stoll(d) : kDynamicDim);
    }
  }
  const auto dtype = dtype_from_numpy_name(a.dtype);
  if (!dtype || a.is_token)
    throw Error(what + ": " + path + " has dtype " + a.dtype + ", which cujax lacks");
  ExportedLeaf l;
  l.path = path;
  l.aval = ShapeDtype{*shape, *dtype, false};
  l.sharding = sharding && sharding->specified() ? sharding->hlo_text(shape->size()) : "";
  return l;
}

std::string types_text(const std::vector<ir::Type>& types) {
  std::string s = "(";
  for (size_t i = 0; i < types.size(); ++i) s += (i ? ", " : "") + types[i].str();
  return s + ")";
}

}  // namespace

namespace export_detail {

void check_single_device(const std::string& name, const std::string& text, int nr_devices) {
  static const char* const collectives[] = {
      "stablehlo.all_reduce",     "stablehlo.all_gather",         "stablehlo.all_to_all",
      "stablehlo.reduce_scatter", "stablehlo.collective_permute", "stablehlo.collective_broadcast",
      "stablehlo.partition_id",   "stablehlo.replica_id",         "sdy.manual_computation"};
  std::string found;
  const std::function<void(const ir::Block&)> walk = [&](const ir::Block& b) {
    for (const auto& op : b.ops) {
      if (!found.empty()) return;
      if (std::find(std::begin(collectives), std::end(collectives), op->name) !=
          std::end(collectives))
        found = op->name;
      if (op->name == "stablehlo.custom_call")
        if (const ir::Attribute* t = op->attr("call_target_name"))
          if (t->text == "SPMDFullToShardShape" || t->text == "SPMDShardToFullShape")
            found = "custom call " + t->text;
      for (const auto& r : op->regions)
        for (const auto& blk : r->blocks) walk(*blk);
    }
  };
  const auto module = ir::parse_module(text);
  // A module partitioned over the devices it was exported for runs on that many, its manual
  // computations (shard_map) and their collectives per shard.
  if (sharding::num_partitions(*module) == nr_devices) return;
  for (const auto& f : module->functions)
    for (const auto& blk : f->body.blocks) walk(*blk);
  if (!found.empty())
    throw Error("exported " + name + " was exported for " + std::to_string(nr_devices) +
                " devices and its module communicates between them (" + found +
                "); cujax runs a JAX export on one device only when its shardings are annotations");
}

}  // namespace export_detail

Exported Exported::from_jax(std::string_view bytes, const std::string& what) {
  auto s = std::make_shared<jax_export::Serialized>(jax_export::deserialize(bytes, what));
  Exported e;
  e.fun_name_ = s->function_name;
  e.platforms_ = s->platforms;
  e.nr_devices_ = static_cast<int>(std::min<uint32_t>(s->nr_devices, 1u << 30));
  if (e.platforms_.empty()) throw Error(what + ": the export names no platforms");
  // in_tree is ((args...), {kwargs...}); paths follow it.
  std::vector<std::string> in_paths, out_paths;
  const PyTreeDef& in = s->in_tree;
  if (in.kind == PyTreeDef::Kind::tuple && in.children.size() == 2) {
    leaf_paths(in.children[0], "args", in_paths);
    leaf_paths(in.children[1], "kwargs", in_paths);
  } else {
    leaf_paths(in, "args", in_paths);
  }
  leaf_paths(s->out_tree, "result", out_paths);
  for (size_t i = 0; i < s->in_avals.size(); ++i)
    e.in_.push_back(leaf_of(s->in_avals[i], in_paths[i],
                            s->in_shardings.empty() ? nullptr : &s->in_shardings[i], what));
  for (size_t i = 0; i < s->out_avals.size(); ++i)
    e.out_.push_back(leaf_of(s->out_avals[i], out_paths[i],
                             s->out_shardings.empty() ? nullptr : &s->out_shardings[i], what));
  e.in_tree_ = "jax:" + s->in_tree.str();
  e.out_tree_ = "jax:" + s->out_tree.str();
  e.kept_ = s->module_kept_var_idx;
  e.text_ =
      ir::bytecode_to_stablehlo_text(s->mlir_module_serialized, what + " (mlir_module_serialized)");

  // @main: [platform index] + the kept inputs -> the outputs.
  std::unique_ptr<ir::Module> module;
  try {
    module = ir::parse_module(e.text_);
  } catch (const Error& err) {
    throw Error(what + ": the module is invalid: " + err.what());
  }
  const ir::Function* main = module->lookup("main");
  if (!main) throw Error(what + ": the module has no @main");
  const std::vector<ir::Type> args = main->arg_types();
  e.platform_index_ = e.platforms_.size() > 1;
  std::vector<ir::Type> want;
  if (e.platform_index_) {
    if (args.empty() || !args[0].shape.empty() ||
        (args[0].dtype != DType::I32 && args[0].dtype != DType::I64))
      throw Error(what + ": exported for " + std::to_string(e.platforms_.size()) +
                  " platforms, but @main does not take the platform's index first: it takes " +
                  types_text(args));
    e.platform_index_dtype_ = args[0].dtype;
    want.push_back(args[0]);
  }
  // Since calling convention version 9, one token per ordered effect follows the platform index
  // and leads the results; the call makes and drops them (compiler::drop_main_tokens).
  const size_t tokens = s->calling_convention_version >= 9 ? s->ordered_effects.size() : 0;
  for (size_t i = 0; i < tokens; ++i) want.push_back(ir::Type::token());
  for (int k : e.kept_)
    want.push_back(ir::Type::tensor(e.in_[static_cast<size_t>(k)].aval.shape,
                                    e.in_[static_cast<size_t>(k)].aval.dtype));
  std::vector<ir::Type> outs(tokens, ir::Type::token());
  for (const auto& l : e.out_) outs.push_back(ir::Type::tensor(l.aval.shape, l.aval.dtype));
  auto same = [](const std::vector<ir::Type>& a, const std::vector<ir::Type>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].shape != b[i].shape || a[i].dtype != b[i].dtype || a[i].is_token != b[i].is_token)
        return false;
    return true;
  };
  if (!same(args, want))
    throw Error(what + ": @main takes " + types_text(args) + ", but the export records " +
                types_text(want) + " (platform index, then " + std::to_string(tokens) +
                " effect tokens, then inputs " + std::to_string(e.kept_.size()) + " of " +
                std::to_string(e.in_.size()) + " kept)");
  if (!same(main->result_types, outs))
    throw Error(what + ": @main returns " + types_text(main->result_types) +
                ", but the export records " + types_text(outs));
  e.jax_bytes_ = std::string(bytes);
  e.jax_ = std::move(s);
  return e;
}

namespace export_detail {

std::string jax_args_structure(const jax_export::PyTreeDef& in_tree) {
  if (in_tree.kind == PyTreeDef::Kind::tuple && in_tree.children.size() == 2 &&
      in_tree.children[0].kind == PyTreeDef::Kind::tuple &&
      in_tree.children[1].kind == PyTreeDef::Kind::dict && in_tree.children[1].children.empty()) {
    std::string s;
    for (const auto& c : in_tree.children[0].children) s += cujax_structure(c);
    return s;
  }
  return cujax_structure(in_tree);
}

}  // namespace export_detail
}  // namespace cujax
