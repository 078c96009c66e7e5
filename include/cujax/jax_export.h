// What jax.export's Exported.serialize() writes, read as JAX wrote it: a flatbuffer (schema
// versions 2 to 12 of jax/_src/export/serialization.fbs) holding the calling convention and a
// StableHLO portable artifact. Exported::load and `cujax run` use it to run such a file;
// jax_export::deserialize gives everything it records, including what cujax does not run
// (symbolic shapes, PRNG key types, ordered effects).
//
//   auto s = jax_export::deserialize(bytes, "model.jax");
//   s.in_tree.str();              // "PyTreeDef(((*, *), {}))"
//   s.in_avals[0].shape;          // {"b", "4"}: symbolic dimensions stay expressions
//   s.in_shardings[0].hlo_text(); // "{devices=[2,1]<=[2]}"
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cujax::jax_export {

// jax.tree_util's PyTreeDef as the flatbuffer spells it.
struct PyTreeDef {
  enum class Kind { leaf, none, tuple, list, dict, custom };
  Kind kind = Kind::leaf;
  std::vector<PyTreeDef> children;
  std::vector<std::string> children_names;  // dict keys, in the tree's order
  std::string custom_name;                  // custom nodes: the registered name
  std::string custom_auxdata;               // and their serialized auxiliary data
  // JAX's text: "PyTreeDef(((*, *), {'a': *}))"; a custom node is "CustomNode(name[<n bytes>],
  // [...])".
  std::string str() const;
  size_t num_leaves() const;
};

// core.ShapedArray: each dimension is a decimal or a symbolic expression ("b", "2*b").
struct AbstractValue {
  std::vector<std::string> shape;
  std::string dtype;                    // NumPy's name: "float32", "bfloat16", "key<fry>", "float0"
  std::string memory_space = "Device";  // "Device", "Host" or "Any"
  bool is_token = false;                // AbstractValueKind abstractToken (unused by JAX)
  // "f32[2,3]" with the dimensions as written.
  std::string str() const;
  // The dimensions as integers, or nullopt when any is symbolic.
  std::optional<std::vector<int64_t>> static_shape() const;
};

// xla.OpSharding, the fields JAX's shardings use.
struct OpSharding {
  enum Type {
    REPLICATED = 0,
    MAXIMAL = 1,
    TUPLE = 2,
    OTHER = 3,
    MANUAL = 4,
    UNKNOWN = 5,
    UNREDUCED = 6
  };
  int type = REPLICATED;
  std::vector<int64_t> tile_assignment_dimensions;
  std::vector<int64_t> tile_assignment_devices;
  std::vector<OpSharding> tuple_shardings;
  bool replicate_on_last_tile_dim = false;
  std::vector<int> last_tile_dims;  // OpSharding types of the trailing subgroup dimensions
  std::vector<int64_t> iota_reshape_dims;
  std::vector<int> iota_transpose_perm;
  // Reads the protobuf wire format; throws Error naming `what` and the byte offset.
  static OpSharding parse(std::string_view bytes, const std::string& what);
  // The device of each tile in row-major tile order: the explicit list, or the iota
  // iota(prod(reshape)).reshape(reshape).transpose(perm) flattened.
  std::vector<int64_t> devices() const;
  // XLA's HloSharding text: "{replicated}", "{devices=[2,1]<=[2]}", "{devices=[2,2]0,2,1,3
  // last_tile_dim_replicate}".
  std::string str() const;
};

struct AbstractMesh {
  std::vector<uint32_t> axis_sizes;
  std::vector<std::string> axis_names;
  std::vector<std::string> axis_types;  // "Auto", "Explicit", "Manual" (empty before v6 data)
  std::string device_kind;              // of the abstract device, "" when none was recorded
  std::optional<uint32_t> num_cores;
  std::string platform;  // schema version 11
  uint64_t size() const;
};

// jax.sharding.NamedSharding over an abstract mesh.
struct NamedSharding {
  AbstractMesh mesh;
  std::vector<std::vector<std::string>> spec;  // per dimension: no axis (None), one, or several
  std::vector<std::string> reduced, unreduced;
  std::optional<std::string> memory_kind;
  // "NamedSharding(mesh={'x': 2}, spec=P('x', None))".
  std::string str() const;
  // jax.export's named_to_hlo_sharding for an array of `rank` dimensions: each dimension tiled by
  // the product of its axes, the mesh's other axes replicated on a last tile dimension.
  OpSharding to_op_sharding(size_t rank) const;
};

// One input's or output's sharding: unspecified, an HloSharding (schema versions up to 8) and, from
// version 6, a NamedSharding.
struct Sharding {
  std::optional<OpSharding> hlo;
  std::optional<NamedSharding> named;
  bool specified() const { return hlo || named; }
  // HloSharding text for an array of `rank` dimensions; "" when unspecified.
  std::string hlo_text(size_t rank) const;
};

struct DisabledCheck {
  std::string kind;  // "platform", "custom_call", "shape_assertions"
  std::string custom_call_target;
};

// Everything Exported.serialize() records.
struct Serialized {
  // The stored field: 3 for schema versions 6 to 11 (JAX wrote 3 for older readers), else the
  // version itself.
  int serialization_version = 0;
  // The oldest schema version with every feature these bytes use (unique tables: 10, abstract
  // device platforms: 11, jax_version: 12, ...): what JAX's writer was at least.
  int min_schema_version = 0;
  std::string function_name;
  PyTreeDef in_tree, out_tree;  // in_tree: ((args...), {kwargs...})
  std::vector<AbstractValue> in_avals, out_avals;
  uint32_t nr_devices = 1;
  std::vector<Sharding> in_shardings, out_shardings;  // one per aval, or empty
  std::vector<std::string> platforms;                 // lowercase: "cpu", "cuda", "rocm", "tpu"
  std::vector<std::string> ordered_effects, unordered_effects;  // str() of the effect classes
  std::vector<DisabledCheck> disabled_checks;
  std::string mlir_module_serialized;  // a StableHLO portable artifact (MLIR bytecode)
  int calling_convention_version = 0;
  std::vector<int> module_kept_var_idx;  // the in_avals the module takes; the rest are unused
  bool uses_global_constants = false;
  std::shared_ptr<const Serialized> vjp;  // the exported VJP, when serialized with vjp_order > 0
  std::string jax_version;                // schema version 12
};

// True when `bytes` pass flatbuffers' verification as a jax.export Exported with a module.
bool is_serialized(std::string_view bytes);

// Reads Exported.serialize() bytes. Throws Error naming `what` and the byte offset for
// truncated or corrupt bytes, and the field for values JAX never writes (an unknown dtype).
Serialized deserialize(std::string_view bytes, const std::string& what);

}  // namespace cujax::jax_export
