// Shardy's (sdy) attributes in MLIR bytecode: the encodings of Shardy's bytecode.td (written since
// Shardy added its bytecode interface; before that, sdy attributes were their assembly text, which
// asm_attr keeps). Each becomes the text Shardy's printer writes, nested forms kept apart from the
// standalone `#sdy...` form (sdy_attr_text) so that enclosing attributes can print them stripped.
#include "../asm_util.h"
#include "reader.h"

namespace cujax::ir::bytecode::detail {

namespace {

using K = BAttr::Kind;

std::shared_ptr<BAttr> make(const char* mnemonic, std::string body) {
  auto a = std::make_shared<BAttr>();
  a->kind = K::Sdy;
  a->enum_value = mnemonic;
  a->text = std::move(body);
  return a;
}

std::string join(const std::vector<int64_t>& v, const char* sep = ", ") {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + std::to_string(v[i]);
  return s;
}

// Factors print as i, j, ..., z, then z_1, z_2, ... (Shardy's factorSymbolString).
std::string factor(int64_t f) {
  constexpr int64_t kStartAtZ = 'z' - 'i';
  if (f <= kStartAtZ) return std::string(1, static_cast<char>('i' + f));
  return "z_" + std::to_string(f - kStartAtZ);
}

std::string factors(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + factor(v[i]);
  return s;
}

}  // namespace

// An attribute reference that must be the sdy attribute `mnemonic`.
AttrRef Reader::sdy_ref(Cursor& c, const char* mnemonic) {
  const size_t at = c.pos;
  AttrRef a = attr_ref(c);
  if (a->kind != K::Sdy || a->enum_value != mnemonic)
    ctx_.fail(at, std::string("expected an sdy ") + mnemonic + " attribute");
  return a;
}

// A list of sdy `mnemonic` attributes, their nested forms joined by ", ".
std::string Reader::sdy_list(Cursor& c, const char* mnemonic) {
  std::string s;
  const uint64_t n = c.count();
  for (uint64_t i = 0; i < n; ++i) s += (i ? ", " : "") + sdy_ref(c, mnemonic)->text;
  return s;
}

AttrRef Reader::sdy_attr(Cursor& c, uint64_t code, size_t at) {
  // The optional lists after the dimension shardings: `, replicated={...}, unreduced=max{...}`.
  auto axes_lists = [&](std::string& s, bool unreduced, bool reduction) {
    const std::string replicated = sdy_list(c, "axis_ref");
    if (!replicated.empty()) s += ", replicated={" + replicated + "}";
    if (!unreduced) return;
    const std::string axes = sdy_list(c, "axis_ref");
    std::string op;
    if (reduction) {
      const size_t rat = c.pos;
      const int64_t r = c.svarint();
      if (r < 0 || r > 2) ctx_.fail(rat, "sdy reduction op " + std::to_string(r) + " is unknown");
      op = r == 1 ? "max" : r == 2 ? "min" : "";
    }
    if (!axes.empty()) s += ", unreduced=" + op + "{" + axes + "}";
  };
  switch (code) {
    case 0: {  // ManualAxesAttr: string attributes
      std::string s = "{";
      const uint64_t n = c.count();
      for (uint64_t i = 0; i < n; ++i) {
        const size_t sat = c.pos;
        AttrRef name = attr_ref(c);
        if (name->kind != K::String) ctx_.fail(sat, "sdy manual axis is not a string");
        s += (i ? ", " : "") + asm_util::quote_string(name->text);
      }
      return make("manual_axes", s + "}");
    }
    case 1: {  // MeshAxisAttr: name, size
      std::string s = asm_util::quote_string(string_at(c));
      return make("mesh_axis", s + "=" + std::to_string(c.svarint()));
    }
    case 2: {  // MeshAttr: axes, device ids
      std::string s = "<[" + sdy_list(c, "mesh_axis") + "]";
      const std::vector<int64_t> ids = svarints(c);
      if (!ids.empty()) s += ", device_ids=[" + join(ids) + "]";
      return make("mesh", s + ">");
    }
    case 3: {  // SubAxisInfoAttr: pre-size, size
      const int64_t pre = c.svarint();
      return make("sub_axis_info", "(" + std::to_string(pre) + ")" + std::to_string(c.svarint()));
    }
    case 4: {  // AxisRefAttr: name, optional sub-axis
      std::string s = asm_util::quote_string(string_at(c));
      bool present = false;
      const size_t sat = c.pos;
      const uint64_t idx = c.varint_flag(present);
      if (present) {
        AttrRef sub = attribute(idx, sat);
        if (sub->kind != K::Sdy || sub->enum_value != "sub_axis_info")
          ctx_.fail(sat, "expected an sdy sub_axis_info attribute");
        s += ":" + sub->text;
      }
      return make("axis_ref", s);
    }
    case 5: {  // DimensionShardingAttr: axes, is_closed, optional priority
      const std::string axes = sdy_list(c, "axis_ref");
      const size_t bat = c.pos;
      const uint8_t closed = c.byte();
      if (closed > 1) ctx_.fail(bat, "sdy is_closed flag " + std::to_string(closed));
      std::string s = "{" + axes;
      if (!closed) s += axes.empty() ? "?" : ", ?";
      s += "}";
      bool has_priority = false;
      const uint64_t priority = c.varint_flag(has_priority);
      if (has_priority) s += "p" + std::to_string(priority);
      return make("dimension_sharding", s);
    }
    case 6:     // TensorShardingAttr V1: mesh or @ref, dimension shardings, replicated axes
    case 15:    // V2: and unreduced axes (summed)
    case 17: {  // V3: and their reduction
      const size_t mat = c.pos;
      AttrRef mesh = attr_ref(c);
      std::string s = "<";
      if (mesh->kind == K::Symbol)
        s += "@" + (asm_util::is_bare_identifier(mesh->text) ? mesh->text
                                                             : asm_util::quote_string(mesh->text));
      else if (mesh->kind == K::Sdy && mesh->enum_value == "mesh")
        s += "mesh" + mesh->text;
      else
        ctx_.fail(mat, "sdy sharding's mesh is neither an sdy mesh nor a symbol reference");
      s += ", [" + sdy_list(c, "dimension_sharding") + "]";
      axes_lists(s, code != 6, code == 17);
      return make("sharding", s + ">");
    }
    case 7:   // TensorShardingPerValueAttr V1
    case 16:  // V2 (shardings with unreduced axes)
      return make("sharding_per_value", "<[" + sdy_list(c, "sharding") + "]>");
    case 8: {  // DimMappingAttr: factor indices, printed run together
      std::string s;
      for (int64_t f : svarints(c)) s += factor(f);
      return make("dim_mapping", s);
    }
    case 9:  // TensorMappingAttr: dimension mappings
      return make("tensor_mapping", "[" + sdy_list(c, "dim_mapping") + "]");
    case 10: {  // OpShardingRuleAttr
      const std::vector<int64_t> sizes = svarints(c);
      const std::string operands = sdy_list(c, "tensor_mapping");
      const std::string results = sdy_list(c, "tensor_mapping");
      std::string s = "<(" + operands + ")->(" + results + ")";
      if (!sizes.empty()) {
        s += " {";
        for (size_t i = 0; i < sizes.size(); ++i)
          s += (i ? ", " : "") + factor(static_cast<int64_t>(i)) + "=" + std::to_string(sizes[i]);
        s += "}";
      }
      for (const char* kind :
           {"reduction", "need_replication", "permutation", "blocked_propagation"}) {
        const std::vector<int64_t> fs = svarints(c);
        if (!fs.empty()) s += std::string(" ") + kind + "={" + factors(fs) + "}";
      }
      const size_t bat = c.pos;
      const uint8_t custom = c.byte();
      if (custom > 1) ctx_.fail(bat, "sdy is_custom_rule flag " + std::to_string(custom));
      if (custom) s += ", custom";
      return make("op_sharding_rule", s + ">");
    }
    default:
      ctx_.fail(at, "sdy attribute code " + std::to_string(code) + " (producer " + producer_ +
                        ") is not supported: cujax reads Shardy's meshes, shardings and sharding "
                        "rules, not its collective parameters");
  }
}

}  // namespace cujax::ir::bytecode::detail
