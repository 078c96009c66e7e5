// Exported::serialize_jax: jax.export's Exported.serialize() bytes for a cujax export, laid out
// as JAX's schema version 11 writes them (the unique tables and indices of version 10, and the
// per-input lists older readers take), with the module as a portable artifact for the default
// target of the bytecode writer.
#include <algorithm>

#include "cujax/export.h"
#include "cujax/ir/bytecode.h"
#include "cujax/ir/parser.h"
#include "jax_export_generated.h"

namespace cujax {

namespace {

namespace fb = cujax::jax_fb;

// The calling convention written: 9, the oldest JAX 0.11 reads and the newest older releases do.
constexpr uint16_t kJaxCallingConventionVersion = 9;

fb::DType dtype_code(DType d, const std::string& what) {
  const std::string_view n = numpy_name(d);
  static const std::pair<const char*, fb::DType> codes[] = {
      {"bool", fb::DType_bool_},    {"int8", fb::DType_i8},         {"int16", fb::DType_i16},
      {"int32", fb::DType_i32},     {"int64", fb::DType_i64},       {"uint8", fb::DType_ui8},
      {"uint16", fb::DType_ui16},   {"uint32", fb::DType_ui32},     {"uint64", fb::DType_ui64},
      {"float16", fb::DType_f16},   {"float32", fb::DType_f32},     {"float64", fb::DType_f64},
      {"complex64", fb::DType_c64}, {"complex128", fb::DType_c128}, {"bfloat16", fb::DType_bf16}};
  for (const auto& [name, code] : codes)
    if (n == name) return code;
  throw Error(what + ": dtype " + std::string(n) + " has no jax.export code");
}

using Builder = flatbuffers::FlatBufferBuilder;

// A cujax tree of tuples, lists and leaves as a PyTreeDef; nullopt for other nodes (dicts,
// States, structs, static leaves), whose order JAX would rebuild differently.
std::optional<flatbuffers::Offset<fb::PyTreeDef>> tree(Builder& b, const DynamicTree& t) {
  if (t.is_leaf()) return fb::CreatePyTreeDef(b, fb::TreeKind_leaf);
  const bool tuple = t.kind().rfind("tuple", 0) == 0, list = t.kind().rfind("list", 0) == 0;
  if ((!tuple && !list) || !t.keys().empty()) return std::nullopt;
  std::vector<flatbuffers::Offset<fb::PyTreeDef>> kids;
  for (size_t i = 0; i < t.size(); ++i) {
    const auto k = tree(b, t[i]);
    if (!k) return std::nullopt;
    kids.push_back(*k);
  }
  return fb::CreatePyTreeDef(b, tuple ? fb::TreeKind_tuple : fb::TreeKind_list,
                             b.CreateVector(kids));
}

flatbuffers::Offset<fb::PyTreeDef> flat_tuple(Builder& b, size_t n) {
  std::vector<flatbuffers::Offset<fb::PyTreeDef>> kids;
  for (size_t i = 0; i < n; ++i) kids.push_back(fb::CreatePyTreeDef(b, fb::TreeKind_leaf));
  return fb::CreatePyTreeDef(b, fb::TreeKind_tuple, b.CreateVector(kids));
}

std::vector<Array> placeholders(const std::vector<ExportedLeaf>& leaves) {
  std::vector<Array> out;
  for (const auto& l : leaves) out.push_back(trace::placeholder(l.aval));
  return out;
}

}  // namespace

std::string Exported::serialize_jax(const std::string& platform) const {
  if (jax_) return jax_bytes_;
  const std::string what = "exported " + fun_name_ + " (jax format)";
  const std::string plat = platform.empty() ? platforms_.front() : platform;
  if (std::find(platforms_.begin(), platforms_.end(), plat) == platforms_.end())
    throw Error(what + ": it is for platforms other than " + plat);
  for (const auto& l : in_)
    if (l.sharding != "{replicated}" && !l.sharding.empty())
      throw Error(what + ": input " + l.path + " has sharding " + l.sharding +
                  "; only single-device exports are written");
  // One platform, so @main takes no platform index: the module as it is.
  const std::string module =
      ir::write_bytecode(*ir::parse_module(text_), ir::default_portable_artifact_target());

  Builder b(4096 + module.size());
  // in_tree: ((args...), {}) with each argument's structure where JAX rebuilds it the same way,
  // else the flat leaves as positional arguments.
  // flatten_arguments writes the arguments one after another: read them as one tuple.
  std::optional<flatbuffers::Offset<fb::PyTreeDef>> args_tree;
  try {
    args_tree = tree(b, DynamicTree::from_structure("tuple(" + in_tree_ + ")", placeholders(in_)));
  } catch (const Error&) {
  }
  const auto args = args_tree ? *args_tree : flat_tuple(b, in_.size());
  const auto kwargs = fb::CreatePyTreeDef(
      b, fb::TreeKind_dict, 0, b.CreateVector<flatbuffers::Offset<flatbuffers::String>>({}));
  const auto in_tree =
      fb::CreatePyTreeDef(b, fb::TreeKind_tuple, b.CreateVector(std::vector{args, kwargs}));
  std::optional<flatbuffers::Offset<fb::PyTreeDef>> out_tree;
  try {
    const DynamicTree t = DynamicTree::from_structure(out_tree_, placeholders(out_));
    out_tree = tree(b, t);
  } catch (const Error&) {
  }
  if (!out_tree)
    out_tree =
        out_.size() == 1 ? fb::CreatePyTreeDef(b, fb::TreeKind_leaf) : flat_tuple(b, out_.size());

  // Each distinct aval once (version 10), and the per-leaf lists (older readers).
  std::vector<ShapeDtype> unique;
  std::vector<uint32_t> in_idx, out_idx;
  auto index_of = [&](const ShapeDtype& a) {
    for (size_t i = 0; i < unique.size(); ++i)
      if (unique[i].shape == a.shape && unique[i].dtype == a.dtype) return static_cast<uint32_t>(i);
    unique.push_back(a);
    return static_cast<uint32_t>(unique.size() - 1);
  };
  for (const auto& l : in_) in_idx.push_back(index_of(l.aval));
  for (const auto& l : out_) out_idx.push_back(index_of(l.aval));
  auto aval = [&](const ShapeDtype& a) {
    std::vector<flatbuffers::Offset<flatbuffers::String>> dims;
    for (int64_t d : a.shape) dims.push_back(b.CreateString(std::to_string(d)));
    return fb::CreateAbstractValue(b, fb::AvalKind_shaped_array, b.CreateVector(dims),
                                   dtype_code(a.dtype, what), fb::MemorySpace_device);
  };
  auto avals = [&](const std::vector<ExportedLeaf>& leaves) {
    std::vector<flatbuffers::Offset<fb::AbstractValue>> v;
    for (const auto& l : leaves) v.push_back(aval(l.aval));
    return b.CreateVector(v);
  };
  auto unspecified = [&](size_t n) {
    std::vector<flatbuffers::Offset<fb::Sharding>> v;
    for (size_t i = 0; i < n; ++i) v.push_back(fb::CreateSharding(b));
    return b.CreateVector(v);
  };
  const auto in_avals = avals(in_), out_avals = avals(out_);
  std::vector<flatbuffers::Offset<fb::AbstractValue>> uniq;
  for (const auto& a : unique) uniq.push_back(aval(a));
  const auto unique_avals = b.CreateVector(uniq);
  const auto in_shardings = unspecified(in_.size()), out_shardings = unspecified(out_.size());
  std::vector<uint16_t> kept;
  for (size_t i = 0; i < in_.size(); ++i) kept.push_back(static_cast<uint16_t>(i));
  const auto name = b.CreateString(fun_name_);
  const auto platforms = b.CreateVector(std::vector{b.CreateString(plat)});
  const auto empty_effects = b.CreateVector<flatbuffers::Offset<fb::Effect>>({});
  const auto no_checks = b.CreateVector<flatbuffers::Offset<fb::DisabledCheck>>({});
  const auto module_bytes =
      b.CreateVector(reinterpret_cast<const int8_t*>(module.data()), module.size());
  const auto kept_vec = b.CreateVector(kept);
  const auto in_idx_vec = b.CreateVector(in_idx), out_idx_vec = b.CreateVector(out_idx);
  const auto in_sh_idx = b.CreateVector(std::vector<uint32_t>(in_.size(), 0));
  const auto out_sh_idx = b.CreateVector(std::vector<uint32_t>(out_.size(), 0));
  const auto meshes = b.CreateVector<flatbuffers::Offset<fb::AbstractMesh>>({});
  const auto named = b.CreateVector<flatbuffers::Offset<fb::NamedSharding>>({});

  fb::ExportedBuilder e(b);
  // JAX stores 3 for schema versions 6 to 11, which every JAX since version 3 accepts.
  e.add_serialization_version(3);
  e.add_function_name(name);
  e.add_in_tree(in_tree);
  e.add_in_avals(in_avals);
  e.add_out_tree(*out_tree);
  e.add_out_avals(out_avals);
  e.add_in_shardings(in_shardings);
  e.add_out_shardings(out_shardings);
  e.add_platforms(platforms);
  e.add_ordered_effects(empty_effects);
  e.add_unordered_effects(empty_effects);
  e.add_disabled_checks(no_checks);
  e.add_mlir_module_serialized(module_bytes);
  e.add_calling_convention_version(kJaxCallingConventionVersion);
  e.add_module_kept_var_idx(kept_vec);
  e.add_uses_global_constants(false);
  e.add_nr_devices(1);
  e.add_unique_avals(unique_avals);
  e.add_unique_abstract_meshes(meshes);
  e.add_unique_named_shardings(named);
  e.add_in_avals_idxs(in_idx_vec);
  e.add_out_avals_idxs(out_idx_vec);
  e.add_in_shardings_idxs(in_sh_idx);
  e.add_out_shardings_idxs(out_sh_idx);
  b.Finish(e.Finish());
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

}  // namespace cujax
