// Exported artifacts, as jax.export: a jitted function lowered for abstract inputs, kept as its
// StableHLO text plus its calling convention (input and output trees, abstract values,
// shardings, platforms), serializable with a format version and a SHA-256 checksum, and
// callable later (in another process, or by `cujax run`) without the C++ function.
//
//   auto f = jit(forward, opts);                         // opts.arg_names = {"params", "x"}
//   Exported exp = export_(f, params, ShapeDtype{{8, 784}, DType::F32});
//   exp.save("model.cujax");                             // atomic
//   Exported back = Exported::load("model.cujax");       // checks magic, version, checksum
//   std::vector<Array> out = back.call(params, x);       // compiles once, then reuses it
//
// Specs are what Jitted::lower takes: ShapeDtype for an array argument, or a tree (a State of
// parameters, a struct) whose arrays stand for their own shape and dtype (their values are not
// read). The format is described in docs/export.md.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "cujax/jit.h"

namespace cujax {

// The artifact format this cujax writes and the only one it reads.
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
  int nr_devices() const { return 1; }
  // SHA-256 (hex) of the calling convention and the text: what serialize() records.
  std::string checksum() const;

  // "cujax-exported 1\nsha256 <hex>\n<header JSON>\n<module text>" (docs/export.md).
  std::string serialize() const;
  // Throws Error naming `what` for bad magic, an unknown version, truncation, a checksum
  // mismatch, a malformed header, or text that does not parse or match the header.
  static Exported deserialize(std::string_view bytes, const std::string& what = "artifact");
  // Writes to a temporary sibling, fsyncs, renames over `path`.
  void save(const std::string& path) const;
  static Exported load(const std::string& path);

  // Compiles for `platform` ("": the default backend when listed, else another listed one
  // that is available) unless compiled already; every copy of this Exported shares the result.
  // After it, a call neither traces nor compiles.
  void compile(const std::string& platform = "") const;
  bool is_compiled() const;
  // The platform compiled for ("" before compile()).
  std::string compiled_platform() const;

  // Runs on the flat input leaves (in in_leaves() order); returns the flat outputs, ready
  // later. Throws Error naming the leaf whose shape or dtype differs.
  std::vector<Array> call(const std::vector<Array>& leaves) const;
  // Flattens arguments as the exported function took them and checks their tree structure.
  template <class... Args>
  std::vector<Array> call(const Args&... args) const {
    std::vector<Array> leaves;
    std::vector<std::string> paths;
    std::vector<int> arg_of_leaf;
    std::string structure;
    trace::flatten_arguments(std::tuple<Args...>(args...), {}, leaves, paths, arg_of_leaf,
                             structure);
    check_structure(structure);
    return call(leaves);
  }

 private:
  void check_structure(const std::string& structure) const;
  struct Cache;
  std::string fun_name_;
  std::string text_;
  std::string in_tree_;
  std::vector<ExportedLeaf> in_;
  std::string out_tree_;
  std::vector<ExportedLeaf> out_;
  std::vector<std::string> platforms_;
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
  auto lowered = f.lower(specs...);
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
