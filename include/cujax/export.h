// Exported artifacts, as jax.export: a jitted function lowered for abstract inputs, kept as its
// StableHLO text plus its calling convention (input and output trees, abstract values,
// shardings, platforms), serializable with a format version and a SHA-256 checksum, and
// callable later (in another process, or by `cujax run`) without the C++ function.
//
//   auto f = jit(forward, opts);                         // opts.arg_names = {"params", "x"}
//   Exported exp = export_(f, params, ShapeDtype{{8, 784}, DType::F32});
//   exp.save("model.cujax");                             // atomic
//   Exported back = Exported::load("model.cujax");       // checks magic, version, checksum
//   DynamicTree out = back.call(params, x);              // the output tree; compiles once
//   Array logits = out[0];                               // out["key"] for dicts and structs
//
// Specs are what Jitted::lower takes: ShapeDtype for an array argument, or a tree (a State of
// parameters, a struct) whose arrays stand for their own shape and dtype (their values are not
// read). The format is described in docs/export.md.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "cujax/jax_export.h"
#include "cujax/jit.h"
#include "cujax/nn.h"
#include "cujax/tree.h"

namespace cujax {

// A tree whose structure is known only at run time, as the output of a loaded Exported is:
// what JAX hands back as a pytree. A node is an array leaf, a static leaf (its printed value)
// or a container ("tuple2", "list3", "dict2", "state4", "pair", "some", "none", "struct T")
// whose children are reached by position or, for dicts, States and structs, by key. As a tree
// (jit, tree_map, Exported::call) it has the structure it was built from.
class DynamicTree {
 public:
  DynamicTree() = default;
  // Builds the tree from a structure as Exported::out_tree() spells it (trace::flatten_arguments
  // form, or "jax:PyTreeDef(...)" with tuples, lists, dicts and None) and its leaves in order.
  // Throws Error naming the structure when it cannot be read or the leaf count differs.
  static DynamicTree from_structure(const std::string& structure, const std::vector<Array>& leaves);

  bool is_leaf() const { return kind_ == "*"; }
  bool is_static() const { return kind_ == "s"; }
  // "*" for an array leaf, "s" for a static leaf, else the container kind.
  const std::string& kind() const { return kind_; }
  // The array of a leaf; throws Error for any other node.
  const Array& array() const;
  operator const Array&() const { return array(); }  // NOLINT: Array a = out[0];
  // The printed value of a static leaf.
  const std::string& static_value() const;
  size_t size() const { return children_.size(); }
  const DynamicTree& operator[](size_t i) const;
  const DynamicTree& operator[](const std::string& key) const;
  const std::vector<std::string>& keys() const { return keys_; }  // empty unless keyed
  // Every array leaf in order.
  std::vector<Array> leaves() const;
  // A dict, State or struct as a State: leaf paths joined with "." ("dense1.kernel").
  State state() const;
  // The tree as a C++ type: Array, State, std::vector<Array>, or a type whose default value has
  // this tree's structure (tuples, pairs, std::array and registered structs of arrays).
  template <class T>
  T as() const;

 private:
  friend struct TreeTraits<DynamicTree>;
  std::string kind_ = "tuple0";
  Array array_;
  std::string static_;
  std::vector<std::string> keys_;
  std::vector<DynamicTree> children_;
  friend class DynamicTreeParser;
};

template <>
struct TreeTraits<DynamicTree> {
  static void visit(DynamicTree& t, TreeVisitor& vis) {
    if (t.is_leaf()) return vis.leaf(t.array_);
    if (t.is_static()) return vis.static_leaf(t.static_);
    vis.open(t.kind_);
    for (size_t i = 0; i < t.children_.size(); ++i) {
      if (!t.keys_.empty()) vis.key(t.keys_[i]);
      visit(t.children_[i], vis);
    }
    vis.close();
  }
};

template <class T>
T DynamicTree::as() const {
  if constexpr (std::is_same_v<T, Array>) {
    return array();
  } else if constexpr (std::is_same_v<T, State>) {
    return state();
  } else if constexpr (std::is_same_v<T, std::vector<Array>>) {
    std::vector<Array> out;
    for (size_t i = 0; i < size(); ++i) out.push_back((*this)[i].array());
    if (kind_ != "list" + std::to_string(size()))
      throw Error("DynamicTree::as<std::vector<Array>>: the tree is " + tree_structure(*this) +
                  ", not a list of arrays");
    return out;
  } else {
    const T structure{};
    const std::string want = tree_structure(structure), have = tree_structure(*this);
    if (want != have)
      throw Error("DynamicTree::as: the tree is " + have + ", but the requested type is " + want);
    return tree_unflatten(structure, leaves());
  }
}

// The format of cujax's own artifacts. Exported::deserialize also reads jax.export's
// Exported.serialize() bytes (jax_export.h).
inline constexpr int kExportFormatVersion = 1;

// One flat input or output of an exported function.
struct ExportedLeaf {
  std::string path;  // "params.dense1.kernel", "x", "result[0]"
  ShapeDtype aval;
  std::string sharding = "{replicated}";  // HloSharding text; single device for now
};

struct ExportOptions {
  // Platforms the artifact may run on. The module is plain StableHLO; restrict this when it
  // holds platform-specific custom calls.
  std::vector<std::string> platforms = {"cpu", "cuda"};
  // Lower what cujax would run as its own custom calls (cuDNN attention) to plain StableHLO
  // (attention's "xla" form), so that the artifact runs under XLA.
  bool portable = false;
};

class Exported {
 public:
  // Checks that `text` parses, verifies, and that @main's signature is `in`/`out`.
  Exported(std::string fun_name, std::string text, std::string in_tree,
           std::vector<ExportedLeaf> in, std::string out_tree, std::vector<ExportedLeaf> out,
           std::vector<std::string> platforms);

  const std::string& fun_name() const { return fun_name_; }
  // The StableHLO module (function @main), as jax's Exported.mlir_module().
  const std::string& mlir_module() const { return text_; }
  // Tree structures as jit's cache keys spell them: "state2(w=*,b=*,)*,".
  const std::string& in_tree() const { return in_tree_; }
  const std::string& out_tree() const { return out_tree_; }
  const std::vector<ExportedLeaf>& in_leaves() const { return in_; }
  const std::vector<ExportedLeaf>& out_leaves() const { return out_; }
  std::vector<ShapeDtype> in_avals() const;
  std::vector<ShapeDtype> out_avals() const;
  std::vector<std::string> in_shardings_hlo() const;
  std::vector<std::string> out_shardings_hlo() const;
  const std::vector<std::string>& platforms() const { return platforms_; }
  // The custom calls the module makes that only cujax runs ("cujax.cudnn_sdpa": cuDNN attention,
  // from nn.dot_product_attention(implementation="cudnn")); empty for a portable artifact.
  std::vector<std::string> cujax_custom_calls() const;
  // Devices the function was exported for: 1 for cujax's artifacts; JAX's record theirs. A JAX
  // export whose module is partitioned over them (mhlo.num_partitions, GSPMD or Shardy shardings,
  // manual computations included) runs partitioned on that many devices; one for several devices
  // that is not, but communicates between them, is refused when compiled.
  int nr_devices() const { return nr_devices_; }
  // What a jax.export serialization records beyond the fields above (null for cujax's own).
  const jax_export::Serialized* jax() const { return jax_.get(); }
  // SHA-256 (hex) of the calling convention and the text: what serialize() records.
  std::string checksum() const;

  // "cujax-exported 1\nsha256 <hex>\n<header JSON>\n<module text>" (docs/export.md); for an
  // Exported read from jax.export's bytes, those bytes unchanged.
  std::string serialize() const;
  // jax.export's Exported.serialize() bytes, which jax.export.deserialize reads: the module as a
  // StableHLO portable artifact (ir::write_bytecode, default target), lowered for `platform`
  // ("": the first of platforms()) alone, one device, calling convention 9, each input kept.
  // in_tree is ((args...), {}) with the arguments' tuples and lists as they are; other
  // structures (dicts, States, structs) become their flat leaves as positional arguments. For
  // an Exported read from JAX's bytes, those bytes.
  std::string serialize_jax(const std::string& platform = "") const;
  // Reads cujax's artifact format, or jax.export's Exported.serialize() (told apart by the
  // bytes). Throws Error naming `what` for bad magic, an unknown version, truncation (with the
  // byte offset), a checksum mismatch, a malformed header, a module that does not parse or
  // match the header, and for a JAX export cujax cannot call (dtypes cujax lacks, ordered
  // effects, symbolic dimensions other than sums of products). Symbolic dimensions ("2*b") are
  // dynamic in in_avals(); each call solves them from the inputs' shapes, as jax.export does.
  static Exported deserialize(std::string_view bytes, const std::string& what = "artifact");
  // A bare StableHLO module (text, or a portable artifact's bytecode) as an Exported of its
  // @main, as `cujax run` and JAX's backward-compatibility runner call one: inputs args[i],
  // outputs result[i], runnable on cpu and cuda. Throws Error naming `what` for a module that
  // does not parse, has no @main, or passes a token or quantized value at its boundary.
  static Exported from_module(std::string_view module, const std::string& what = "module");
  // Writes to a temporary sibling, fsyncs, renames over `path`.
  void save(const std::string& path) const;
  // save() of serialize_jax(platform).
  void save_jax(const std::string& path, const std::string& platform = "") const;
  static Exported load(const std::string& path);

  // Compiles for `platform` ("": the default backend when listed, else another listed one
  // that is available) unless compiled already; every copy of this Exported shares the result.
  // After it, a call neither traces nor compiles.
  void compile(const std::string& platform = "") const;
  // A JAX export lowered for several platforms takes the platform's index first: runs the
  // lowering JAX made for `lowering_platform` (one of platforms()) on `platform`'s backend
  // ("": the default), for a platform JAX did not lower for (a cuda-only export on cpu).
  void compile_lowering(const std::string& lowering_platform,
                        const std::string& platform = "") const;
  bool is_compiled() const;
  // The platform compiled for ("" before compile()).
  std::string compiled_platform() const;

  // Runs on the flat input leaves (in in_leaves() order); returns the flat outputs (in
  // out_leaves() order), ready later. Throws Error naming the leaf whose shape or dtype differs.
  std::vector<Array> call_flat(const std::vector<Array>& leaves) const;
  // jax.export's Exported.call: flattens the arguments as the exported function took them,
  // checks their tree structure, and returns the output tree (out_tree()). One std::vector of
  // arrays is taken as the flat input leaves, as call_flat does.
  template <class... Args>
  DynamicTree call(const Args&... args) const {
    if constexpr (sizeof...(Args) == 1 && (std::is_same_v<Args, std::vector<Array>> && ...)) {
      return DynamicTree::from_structure(out_tree_, call_flat(args...));
    } else {
      std::vector<Array> leaves;
      std::vector<std::string> paths;
      std::vector<int> arg_of_leaf;
      std::string structure;
      trace::flatten_arguments(std::tuple<Args...>(args...), {}, leaves, paths, arg_of_leaf,
                               structure);
      check_structure(structure);
      return DynamicTree::from_structure(out_tree_, call_flat(leaves));
    }
  }

 private:
  void check_structure(const std::string& structure) const;
  Exported();
  static Exported from_jax(std::string_view bytes, const std::string& what);
  void compile_for(std::string platform, std::string lowering) const;
  // The compiled program for the module's inputs `args`: for a shape-polymorphic module, the
  // one for their shapes, refined and compiled on the first call with them.
  std::shared_ptr<const trace::CompiledProgram> program_for(const std::vector<Array>& args) const;
  struct Cache;
  std::string fun_name_;
  std::string text_;
  std::string in_tree_;
  std::vector<ExportedLeaf> in_;
  std::string out_tree_;
  std::vector<ExportedLeaf> out_;
  std::vector<std::string> platforms_;
  int nr_devices_ = 1;
  // JAX's calling convention: @main takes the platform's index first when several platforms
  // were lowered for, then the inputs listed in kept_ (module_kept_var_idx).
  std::shared_ptr<const jax_export::Serialized> jax_;
  std::string jax_bytes_;
  bool platform_index_ = false;
  DType platform_index_dtype_ = DType::I32;
  std::vector<int> kept_;
  std::shared_ptr<Cache> cache_;
};

namespace export_detail {
inline Array abstract(const ShapeDtype& s) {
  return trace::placeholder(s);
}
template <class T>
const T& abstract(const T& v) {
  return v;
}
std::vector<ExportedLeaf> leaves_of(const std::vector<std::string>& paths,
                                    const std::vector<ShapeDtype>& avals);
std::vector<ShapeDtype> avals_of(const std::vector<Array>& arrays);
}  // namespace export_detail

// jax.export.export(f)(*specs): lowers `f` for `specs` and records its calling convention.
template <class F, class... Specs>
Exported export_(const Jitted<F>& f, const ExportOptions& options, const Specs&... specs) {
  if (!f.options().static_argnums.empty())
    throw Error("export_ " + f.options().name +
                ": static_argnums are not exportable; close over those values instead");
  std::optional<nn::PortableAttention> portable;
  if (options.portable) portable.emplace();
  auto lowered = f.lower(specs...);
  portable.reset();
  std::vector<Array> leaves;
  std::vector<std::string> paths;
  std::vector<int> arg_of_leaf;
  std::string in_tree;
  trace::flatten_arguments(std::make_tuple(export_detail::abstract(specs)...),
                           f.options().arg_names, leaves, paths, arg_of_leaf, in_tree);
  std::vector<Array> out_leaves;
  std::vector<std::string> out_paths;
  std::vector<int> out_arg;
  std::string out_tree;
  trace::flatten_arguments(std::make_tuple(lowered.out_tree()), {"result"}, out_leaves, out_paths,
                           out_arg, out_tree);
  return Exported(f.options().name, lowered.as_text(), in_tree,
                  export_detail::leaves_of(paths, lowered.in_avals()), out_tree,
                  export_detail::leaves_of(out_paths, export_detail::avals_of(out_leaves)),
                  options.platforms);
}

template <class F, class... Specs>
Exported export_(const Jitted<F>& f, const Specs&... specs) {
  const ExportOptions defaults;
  return export_(f, defaults, specs...);
}

}  // namespace cujax
