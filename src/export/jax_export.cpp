// jax.export's Exported.serialize() bytes (include/cujax/jax_export.h): verified with flatbuffers'
// Verifier, then read through the accessors flatc generates from jax_export.fbs.
#include "cujax/jax_export.h"

#include <cstring>
#include <functional>

#include "cujax/core/error.h"
#include "jax_export_generated.h"

namespace cujax::jax_export {

namespace fb = cujax::jax_fb;

namespace {

// flatbuffers reads scalars in place: an 8-byte aligned copy keeps those reads aligned.
struct Aligned {
  std::vector<uint64_t> words;
  size_t size;
  explicit Aligned(std::string_view bytes) : words((bytes.size() + 7) / 8), size(bytes.size()) {
    if (size) std::memcpy(words.data(), bytes.data(), size);
  }
  const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(words.data()); }
};

// Verification, field by field, for one that passes only when each does.
bool check(flatbuffers::Verifier& v, const flatbuffers::String* s) {
  return v.VerifyString(s);
}
bool check(flatbuffers::Verifier& v,
           const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* x) {
  return v.VerifyVector(x) && v.VerifyVectorOfStrings(x);
}
template <class T>
bool check(flatbuffers::Verifier& v, const flatbuffers::Vector<flatbuffers::Offset<T>>* x) {
  return v.VerifyVector(x) && v.VerifyVectorOfTables(x);
}
template <class T>
requires std::is_scalar_v<T>
bool check(flatbuffers::Verifier& v, const flatbuffers::Vector<T>* x) {
  return v.VerifyVector(x);
}
template <class T>
bool check(flatbuffers::Verifier& v, const T* table) {
  return v.VerifyTable(table);
}

// Why bytes that fail verification do: the first of the root's fields that fails, and where.
std::string locate_failure(const uint8_t* buf, size_t n) {
  if (n < 8)
    return "truncated: " + std::to_string(n) +
           " bytes, fewer than a flatbuffer's root offset and table need";
  uint32_t root;
  std::memcpy(&root, buf, 4);
  if (root > n - 4)
    return "the root table offset at byte 0 points to byte " + std::to_string(root) +
           ", past the end";
  flatbuffers::Verifier v(buf, n);
  const auto* t = reinterpret_cast<const flatbuffers::Table*>(buf + root);
  if (!t->VerifyTableStart(v))
    return "the root table at byte " + std::to_string(root) + " has a vtable out of bounds";
  const auto* e = fb::GetExported(buf);
  using F = fb::Exported;
  struct Field {
    const char* name;
    flatbuffers::voffset_t slot;
    std::function<bool(flatbuffers::Verifier&)> ok;
  };
  auto offset = [&](flatbuffers::voffset_t slot, auto get) {
    return [&, slot, get](flatbuffers::Verifier& fv) {
      return t->VerifyOffset(fv, slot) && check(fv, get());
    };
  };
  auto scalar = [&](flatbuffers::voffset_t slot, size_t size) {
    return [&, slot, size](flatbuffers::Verifier& fv) {
      switch (size) {
        case 1:
          return t->VerifyField<uint8_t>(fv, slot, 1);
        case 2:
          return t->VerifyField<uint16_t>(fv, slot, 2);
        default:
          return t->VerifyField<uint32_t>(fv, slot, 4);
      }
    };
  };
  const Field fields[] = {
      {"serialization_version", F::VT_SERIALIZATION_VERSION,
       scalar(F::VT_SERIALIZATION_VERSION, 2)},
      {"function_name", F::VT_FUNCTION_NAME,
       offset(F::VT_FUNCTION_NAME, [&] { return e->function_name(); })},
      {"in_tree", F::VT_IN_TREE, offset(F::VT_IN_TREE, [&] { return e->in_tree(); })},
      {"in_avals", F::VT_IN_AVALS, offset(F::VT_IN_AVALS, [&] { return e->in_avals(); })},
      {"out_tree", F::VT_OUT_TREE, offset(F::VT_OUT_TREE, [&] { return e->out_tree(); })},
      {"out_avals", F::VT_OUT_AVALS, offset(F::VT_OUT_AVALS, [&] { return e->out_avals(); })},
      {"nr_devices_short", F::VT_NR_DEVICES_SHORT, scalar(F::VT_NR_DEVICES_SHORT, 2)},
      {"in_shardings", F::VT_IN_SHARDINGS,
       offset(F::VT_IN_SHARDINGS, [&] { return e->in_shardings(); })},
      {"out_shardings", F::VT_OUT_SHARDINGS,
       offset(F::VT_OUT_SHARDINGS, [&] { return e->out_shardings(); })},
      {"platforms", F::VT_PLATFORMS, offset(F::VT_PLATFORMS, [&] { return e->platforms(); })},
      {"ordered_effects", F::VT_ORDERED_EFFECTS,
       offset(F::VT_ORDERED_EFFECTS, [&] { return e->ordered_effects(); })},
      {"unordered_effects", F::VT_UNORDERED_EFFECTS,
       offset(F::VT_UNORDERED_EFFECTS, [&] { return e->unordered_effects(); })},
      {"disabled_checks", F::VT_DISABLED_CHECKS,
       offset(F::VT_DISABLED_CHECKS, [&] { return e->disabled_checks(); })},
      {"mlir_module_serialized", F::VT_MLIR_MODULE_SERIALIZED,
       offset(F::VT_MLIR_MODULE_SERIALIZED, [&] { return e->mlir_module_serialized(); })},
      {"calling_convention_version", F::VT_CALLING_CONVENTION_VERSION,
       scalar(F::VT_CALLING_CONVENTION_VERSION, 2)},
      {"module_kept_var_idx", F::VT_MODULE_KEPT_VAR_IDX,
       offset(F::VT_MODULE_KEPT_VAR_IDX, [&] { return e->module_kept_var_idx(); })},
      {"uses_global_constants", F::VT_USES_GLOBAL_CONSTANTS,
       scalar(F::VT_USES_GLOBAL_CONSTANTS, 1)},
      {"vjp", F::VT_VJP, offset(F::VT_VJP, [&] { return e->vjp(); })},
      {"nr_devices", F::VT_NR_DEVICES, scalar(F::VT_NR_DEVICES, 4)},
      {"unique_avals", F::VT_UNIQUE_AVALS,
       offset(F::VT_UNIQUE_AVALS, [&] { return e->unique_avals(); })},
      {"unique_abstract_meshes", F::VT_UNIQUE_ABSTRACT_MESHES,
       offset(F::VT_UNIQUE_ABSTRACT_MESHES, [&] { return e->unique_abstract_meshes(); })},
      {"unique_named_shardings", F::VT_UNIQUE_NAMED_SHARDINGS,
       offset(F::VT_UNIQUE_NAMED_SHARDINGS, [&] { return e->unique_named_shardings(); })},
      {"in_avals_idxs", F::VT_IN_AVALS_IDXS,
       offset(F::VT_IN_AVALS_IDXS, [&] { return e->in_avals_idxs(); })},
      {"out_avals_idxs", F::VT_OUT_AVALS_IDXS,
       offset(F::VT_OUT_AVALS_IDXS, [&] { return e->out_avals_idxs(); })},
      {"in_shardings_idxs", F::VT_IN_SHARDINGS_IDXS,
       offset(F::VT_IN_SHARDINGS_IDXS, [&] { return e->in_shardings_idxs(); })},
      {"out_shardings_idxs", F::VT_OUT_SHARDINGS_IDXS,
       offset(F::VT_OUT_SHARDINGS_IDXS, [&] { return e->out_shardings_idxs(); })},
      {"jax_version", F::VT_JAX_VERSION,
       offset(F::VT_JAX_VERSION, [&] { return e->jax_version(); })},
  };
  for (const Field& f : fields) {
    flatbuffers::Verifier fv(buf, n);
    if (f.ok(fv)) continue;
    const size_t at = root + t->GetOptionalFieldOffset(f.slot);
    std::string where = "field " + std::string(f.name) + " at byte " + std::to_string(at);
    if (at + 4 <= n && f.slot != F::VT_SERIALIZATION_VERSION) {
      uint32_t rel;
      std::memcpy(&rel, buf + at, 4);
      where += " (pointing to byte " + std::to_string(at + rel) + ")";
    }
    return where + " is corrupt or truncated";
  }
  return "the whole buffer fails verification (nesting deeper than 64 or too many tables)";
}

const char* dtype_name(int8_t d) {
  switch (d) {
    case fb::DType_bool_:
      return "bool";
    case fb::DType_i8:
      return "int8";
    case fb::DType_i16:
      return "int16";
    case fb::DType_i32:
      return "int32";
    case fb::DType_i64:
      return "int64";
    case fb::DType_ui8:
      return "uint8";
    case fb::DType_ui16:
      return "uint16";
    case fb::DType_ui32:
      return "uint32";
    case fb::DType_ui64:
      return "uint64";
    case fb::DType_f16:
      return "float16";
    case fb::DType_f32:
      return "float32";
    case fb::DType_f64:
      return "float64";
    case fb::DType_c64:
      return "complex64";
    case fb::DType_c128:
      return "complex128";
    case fb::DType_bf16:
      return "bfloat16";
    case fb::DType_i4:
      return "int4";
    case fb::DType_ui4:
      return "uint4";
    case fb::DType_f8_e4m3b11fnuz:
      return "float8_e4m3b11fnuz";
    case fb::DType_f8_e4m3fn:
      return "float8_e4m3fn";
    case fb::DType_f8_e4m3fnuz:
      return "float8_e4m3fnuz";
    case fb::DType_f8_e5m2:
      return "float8_e5m2";
    case fb::DType_f8_e5m2fnuz:
      return "float8_e5m2fnuz";
    case fb::DType_f0:
      return "float0";
    case fb::DType_f8_e4m3:
      return "float8_e4m3";
    case fb::DType_f8_e3m4:
      return "float8_e3m4";
    case fb::DType_f8_e8m0fnu:
      return "float8_e8m0fnu";
    case fb::DType_f4_e2m1fn:
      return "float4_e2m1fn";
    case fb::DType_key_fry:
      return "key<fry>";
    case fb::DType_key_rbg:
      return "key<rbg>";
    case fb::DType_key_unsafe_rbg:
      return "key<unsafe_rbg>";
    default:
      return nullptr;
  }
}

std::string str(const flatbuffers::String* s) {
  return s ? s->str() : "";
}

std::vector<std::string> strings(
    const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* v) {
  std::vector<std::string> out;
  if (v)
    for (const auto* s : *v) out.push_back(str(s));
  return out;
}

class Reader {
 public:
  Reader(const uint8_t* buf, const std::string& what) : buf_(buf), what_(what) {}

  // Byte offset of a table or vector inside the buffer, for messages.
  std::string at(const void* p) const {
    return "byte " + std::to_string(static_cast<const uint8_t*>(p) - buf_);
  }
  [[noreturn]] void fail(const void* p, const std::string& why) const {
    throw Error(what_ + ": " + at(p) + ": " + why);
  }

  PyTreeDef tree(const fb::PyTreeDef* t, int depth) {
    PyTreeDef out;
    if (!t) return out;  // an absent tree reads as a leaf, as flatbuffers' defaults do
    if (depth > 64) fail(t, "PyTreeDef nested more than 64 deep");
    if (t->kind() < fb::TreeKind_leaf || t->kind() > fb::TreeKind_custom)
      fail(t, "unknown PyTreeDef kind " + std::to_string(t->kind()));
    out.kind = static_cast<PyTreeDef::Kind>(t->kind());
    if (t->children())
      for (const auto* c : *t->children()) out.children.push_back(tree(c, depth + 1));
    out.children_names = strings(t->children_names());
    if (out.kind == PyTreeDef::Kind::dict && out.children_names.size() != out.children.size())
      fail(t, "a dict PyTreeDef has " + std::to_string(out.children_names.size()) + " keys for " +
                  std::to_string(out.children.size()) + " children");
    if ((out.kind == PyTreeDef::Kind::leaf || out.kind == PyTreeDef::Kind::none) &&
        !out.children.empty())
      fail(t, "a leaf or None PyTreeDef has children");
    out.custom_name = str(t->custom_name());
    if (const auto* aux = t->custom_auxdata())
      out.custom_auxdata.assign(reinterpret_cast<const char*>(aux->data()), aux->size());
    return out;
  }

  AbstractValue aval(const fb::AbstractValue* a) {
    if (!a) throw Error(what_ + ": an abstract value is missing");
    AbstractValue out;
    out.is_token = a->kind() == fb::AvalKind_abstract_token;
    out.shape = strings(a->shape());
    const char* dt = dtype_name(a->dtype());
    if (!dt) fail(a, "unknown dtype code " + std::to_string(a->dtype()));
    out.dtype = dt;
    switch (a->memory_space()) {
      case fb::MemorySpace_unset:
      case fb::MemorySpace_device:
        out.memory_space = "Device";
        break;
      case fb::MemorySpace_host:
        out.memory_space = "Host";
        break;
      case fb::MemorySpace_any:
        out.memory_space = "Any";
        break;
      default:
        fail(a, "unknown memory space " + std::to_string(a->memory_space()));
    }
    return out;
  }

  std::vector<AbstractValue> avals(
      const flatbuffers::Vector<flatbuffers::Offset<fb::AbstractValue>>* v) {
    std::vector<AbstractValue> out;
    if (v)
      for (const auto* a : *v) out.push_back(aval(a));
    return out;
  }

  AbstractMesh mesh(const fb::AbstractMesh* m) {
    AbstractMesh out;
    if (!m) return out;
    if (m->axis_sizes()) out.axis_sizes.assign(m->axis_sizes()->begin(), m->axis_sizes()->end());
    out.axis_names = strings(m->axis_names());
    if (m->axis_types())
      for (int8_t t : *m->axis_types()) {
        if (t < fb::AxisType_unset || t > fb::AxisType_manual)
          fail(m, "unknown mesh axis type " + std::to_string(t));
        static const char* const names[] = {"Auto", "Auto", "Explicit", "Manual"};
        out.axis_types.push_back(names[t]);
      }
    if (out.axis_names.size() != out.axis_sizes.size())
      fail(m, "a mesh has " + std::to_string(out.axis_names.size()) + " axis names for " +
                  std::to_string(out.axis_sizes.size()) + " sizes");
    if (const auto* d = m->abstract_device()) {
      out.device_kind = str(d->device_kind());
      if (d->num_cores()) out.num_cores = *d->num_cores();
      out.platform = str(d->platform());
    }
    return out;
  }

  NamedSharding named(const fb::NamedSharding* s, const std::vector<AbstractMesh>& meshes) {
    NamedSharding out;
    if (!meshes.empty()) {
      if (s->abstract_mesh_idx() >= meshes.size())
        fail(s, "abstract_mesh_idx " + std::to_string(s->abstract_mesh_idx()) + " is past the " +
                    std::to_string(meshes.size()) + " unique meshes");
      out.mesh = meshes[s->abstract_mesh_idx()];
    } else {
      out.mesh = mesh(s->mesh());
    }
    if (const auto* spec = s->spec()) {
      if (spec->partitions())
        for (const auto* p : *spec->partitions()) out.spec.push_back(strings(p->axes()));
      out.reduced = strings(spec->reduced());
      out.unreduced = strings(spec->unreduced());
    }
    if (s->memory_kind()) out.memory_kind = s->memory_kind()->str();
    return out;
  }

  Sharding sharding(const fb::Sharding* s, const std::vector<AbstractMesh>& meshes,
                    const std::string& which) {
    Sharding out;
    if (!s) return out;
    if (s->named_sharding()) out.named = named(s->named_sharding(), meshes);
    if (const auto* proto = s->hlo_sharding_proto())
      out.hlo = OpSharding::parse(
          std::string_view(reinterpret_cast<const char*>(proto->data()), proto->size()),
          what_ + ": " + which + " (hlo_sharding_proto at " + at(proto) + ")");
    return out;
  }

  Serialized exported(const fb::Exported* e, int depth) {
    if (depth > 8) fail(e, "vjp exports nested more than 8 deep");
    Serialized s;
    s.serialization_version = e->serialization_version();
    s.function_name = str(e->function_name());
    s.in_tree = tree(e->in_tree(), 0);
    s.out_tree = tree(e->out_tree(), 0);
    s.nr_devices = e->nr_devices() ? e->nr_devices()
                                   : static_cast<uint32_t>(std::max<int>(1, e->nr_devices_short()));
    s.platforms = strings(e->platforms());
    auto effects = [](const auto* v) {
      std::vector<std::string> out;
      if (v)
        for (const auto* x : *v) out.push_back(str(x->type_name()));
      return out;
    };
    s.ordered_effects = effects(e->ordered_effects());
    s.unordered_effects = effects(e->unordered_effects());
    if (e->disabled_checks())
      for (const auto* c : *e->disabled_checks()) {
        if (c->kind() < fb::DisabledCheckKind_platform ||
            c->kind() > fb::DisabledCheckKind_shape_assertions)
          fail(c, "unknown disabled check kind " + std::to_string(c->kind()));
        static const char* const kinds[] = {"platform", "custom_call", "shape_assertions"};
        s.disabled_checks.push_back({kinds[c->kind()], str(c->custom_call_target())});
      }
    if (const auto* m = e->mlir_module_serialized())
      s.mlir_module_serialized.assign(reinterpret_cast<const char*>(m->data()), m->size());
    s.calling_convention_version = e->calling_convention_version();
    if (e->module_kept_var_idx())
      s.module_kept_var_idx.assign(e->module_kept_var_idx()->begin(),
                                   e->module_kept_var_idx()->end());
    s.uses_global_constants = e->uses_global_constants();
    s.jax_version = str(e->jax_version());

    // Schema version 10 stores each distinct aval, mesh and sharding once, by index.
    const std::vector<AbstractValue> unique_avals = avals(e->unique_avals());
    std::vector<AbstractMesh> meshes;
    if (e->unique_abstract_meshes())
      for (const auto* m : *e->unique_abstract_meshes()) meshes.push_back(mesh(m));
    std::vector<NamedSharding> unique_shardings;
    if (e->unique_named_shardings())
      for (const auto* n : *e->unique_named_shardings())
        unique_shardings.push_back(named(n, meshes));
    auto by_index = [&](const flatbuffers::Vector<uint32_t>* idxs, const char* which) {
      std::vector<AbstractValue> out;
      for (uint32_t i : *idxs) {
        if (i >= unique_avals.size())
          fail(idxs, std::string(which) + " index " + std::to_string(i) + " is past the " +
                         std::to_string(unique_avals.size()) + " unique avals");
        out.push_back(unique_avals[i]);
      }
      return out;
    };
    s.in_avals = e->in_avals_idxs() && e->in_avals_idxs()->size()
                     ? by_index(e->in_avals_idxs(), "in_avals_idxs")
                     : avals(e->in_avals());
    s.out_avals = e->out_avals_idxs() && e->out_avals_idxs()->size()
                      ? by_index(e->out_avals_idxs(), "out_avals_idxs")
                      : avals(e->out_avals());
    auto shardings = [&](const flatbuffers::Vector<uint32_t>* idxs, const auto* full,
                         const char* which) {
      std::vector<Sharding> out;
      if (idxs && idxs->size()) {
        for (uint32_t i : *idxs) {
          Sharding sh;
          if (i > unique_shardings.size())
            fail(idxs, std::string(which) + " index " + std::to_string(i) + " is past the " +
                           std::to_string(unique_shardings.size()) + " unique shardings");
          if (i) sh.named = unique_shardings[i - 1];
          out.push_back(std::move(sh));
        }
      } else if (full) {
        for (size_t i = 0; i < full->size(); ++i)
          out.push_back(sharding(full->Get(static_cast<flatbuffers::uoffset_t>(i)), meshes,
                                 std::string(which) + "[" + std::to_string(i) + "]"));
      }
      return out;
    };
    s.in_shardings = shardings(e->in_shardings_idxs(), e->in_shardings(), "in_shardings");
    s.out_shardings = shardings(e->out_shardings_idxs(), e->out_shardings(), "out_shardings");
    if (!s.in_shardings.empty() && s.in_shardings.size() != s.in_avals.size())
      fail(e, std::to_string(s.in_shardings.size()) + " input shardings for " +
                  std::to_string(s.in_avals.size()) + " input avals");
    if (!s.out_shardings.empty() && s.out_shardings.size() != s.out_avals.size())
      fail(e, std::to_string(s.out_shardings.size()) + " output shardings for " +
                  std::to_string(s.out_avals.size()) + " output avals");
    if (s.in_tree.num_leaves() != s.in_avals.size() && e->in_tree())
      fail(e->in_tree(), "in_tree has " + std::to_string(s.in_tree.num_leaves()) + " leaves for " +
                             std::to_string(s.in_avals.size()) + " input avals");
    if (s.out_tree.num_leaves() != s.out_avals.size() && e->out_tree())
      fail(e->out_tree(), "out_tree has " + std::to_string(s.out_tree.num_leaves()) +
                              " leaves for " + std::to_string(s.out_avals.size()) +
                              " output avals");
    for (int k : s.module_kept_var_idx)
      if (static_cast<size_t>(k) >= s.in_avals.size())
        fail(e->module_kept_var_idx(), "module_kept_var_idx " + std::to_string(k) +
                                           " is past the " + std::to_string(s.in_avals.size()) +
                                           " inputs");

    s.min_schema_version = min_version(e, s);
    if (e->vjp()) s.vjp = std::make_shared<const Serialized>(exported(e->vjp(), depth + 1));
    return s;
  }

 private:
  static int min_version(const fb::Exported* e, const Serialized& s) {
    int v = s.serialization_version;
    auto at_least = [&](int x) { v = std::max(v, x); };
    bool named = false, hlo = false, device = false, device_platform = false;
    auto look = [&](const AbstractMesh& m) {
      device = device || !m.device_kind.empty();
      device_platform = device_platform || !m.platform.empty();
    };
    for (const auto* list : {&s.in_shardings, &s.out_shardings})
      for (const Sharding& sh : *list) {
        hlo = hlo || sh.hlo.has_value();
        if (sh.named) {
          named = true;
          look(sh.named->mesh);
        }
      }
    if (e->nr_devices() != 0) at_least(5);
    for (const auto* list : {&s.in_avals, &s.out_avals})
      for (const AbstractValue& a : *list)
        if (a.memory_space != "Device") at_least(5);
    if (named) at_least(hlo ? 6 : 9);
    if (device) at_least(8);
    if (e->unique_avals() || e->in_avals_idxs()) at_least(10);
    if (device_platform) at_least(11);
    if (e->jax_version()) at_least(12);
    return v;
  }

  const uint8_t* buf_;
  const std::string& what_;
};

}  // namespace

std::string PyTreeDef::str() const {
  std::function<std::string(const PyTreeDef&)> node = [&](const PyTreeDef& t) -> std::string {
    auto list = [&](const char* open, const char* close) {
      std::string s = open;
      for (size_t i = 0; i < t.children.size(); ++i) {
        s += i ? ", " : "";
        if (t.kind == Kind::dict) s += "'" + t.children_names[i] + "': ";
        s += node(t.children[i]);
      }
      if (t.kind == Kind::tuple && t.children.size() == 1) s += ",";
      return s + close;
    };
    switch (t.kind) {
      case Kind::leaf:
        return "*";
      case Kind::none:
        return "None";
      case Kind::tuple:
        return list("(", ")");
      case Kind::list:
        return list("[", "]");
      case Kind::dict:
        return list("{", "}");
      case Kind::custom:
        return "CustomNode(" + t.custom_name + "[<" + std::to_string(t.custom_auxdata.size()) +
               " bytes>], " + list("[", "]") + ")";
    }
    return "?";
  };
  return "PyTreeDef(" + node(*this) + ")";
}

size_t PyTreeDef::num_leaves() const {
  if (kind == Kind::leaf) return 1;
  size_t n = 0;
  for (const auto& c : children) n += c.num_leaves();
  return n;
}

std::string AbstractValue::str() const {
  static const std::pair<const char*, const char*> short_names[] = {
      {"float32", "f32"},   {"float64", "f64"},    {"float16", "f16"}, {"bfloat16", "bf16"},
      {"int8", "i8"},       {"int16", "i16"},      {"int32", "i32"},   {"int64", "i64"},
      {"uint8", "u8"},      {"uint16", "u16"},     {"uint32", "u32"},  {"uint64", "u64"},
      {"complex64", "c64"}, {"complex128", "c128"}};
  std::string s = dtype;
  for (const auto& [name, abbrev] : short_names)
    if (dtype == name) s = abbrev;
  s += "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + shape[i];
  return s + "]";
}

std::optional<std::vector<int64_t>> AbstractValue::static_shape() const {
  std::vector<int64_t> out;
  for (const std::string& d : shape) {
    if (d.empty() || d.size() > 18 || d.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    out.push_back(std::stoll(d));
  }
  return out;
}

bool is_serialized(std::string_view bytes) {
  const Aligned a(bytes);
  flatbuffers::Verifier v(a.data(), a.size);
  if (!fb::VerifyExportedBuffer(v)) return false;
  const auto* m = fb::GetExported(a.data())->mlir_module_serialized();
  return m && m->size() > 0;
}

Serialized deserialize(std::string_view bytes, const std::string& what) {
  const Aligned a(bytes);
  flatbuffers::Verifier v(a.data(), a.size);
  if (a.size >= FLATBUFFERS_MAX_BUFFER_SIZE)
    throw Error(what + ": " + std::to_string(a.size) + " bytes, more than a flatbuffer holds");
  if (!fb::VerifyExportedBuffer(v))
    throw Error(what + ": not a valid jax.export serialization (" + std::to_string(a.size) +
                " bytes): " + locate_failure(a.data(), a.size));
  const fb::Exported* e = fb::GetExported(a.data());
  if (!e->mlir_module_serialized() || e->mlir_module_serialized()->size() == 0)
    throw Error(what + ": not a jax.export serialization: it holds no mlir_module_serialized");
  return Reader(a.data(), what).exported(e, 0);
}

}  // namespace cujax::jax_export
