// MLIR bytecode writer (format: LLVM's mlir/docs/BytecodeFormat.md). It numbers the module the
// way MLIR's writer does, so that a module StableHLO would write the same way comes out the same:
// attributes, types and op names in order of first use in a walk that numbers each op's name,
// result types, attribute dictionary, properties and location, and visits nested regions last
// in, first out; then sorted by use count, and within each run of indices of one varint width,
// grouped by dialect. Strings are numbered in the order the sections are written.
#include "writer.h"

#include <algorithm>
#include <unordered_map>

#include "cujax/core/error.h"

namespace cujax::ir::bytecode::write {

namespace {

// Structural hash and equality of nodes whose nested nodes are already uniqued (so compared by
// address): equal attributes and types become one table entry, as in MLIR's context. Blobs
// (tensor data) are hashed in place, never copied into a key.
size_t hash_node(const Node& n) {
  size_t h = std::hash<std::string>()(n.dialect) ^ (n.is_type ? 0x9e3779b97f4a7c15ull : 0) ^
             (std::hash<std::string>()(n.asm_text) << 1);
  for (const Item& it : n.items) {
    size_t x = static_cast<size_t>(it.kind) * 0x100000001b3ull;
    x ^= std::hash<uint64_t>()(it.v) + (x << 6) + (x >> 2);
    x ^= std::hash<const void*>()(it.ref) + (x << 6) + (x >> 2);
    if (!it.s.empty()) x ^= std::hash<std::string_view>()(it.s) + (x << 6) + (x >> 2);
    h = h * 1099511628211ull ^ x;
  }
  return h;
}

bool same_node(const Node& a, const Node& b) {
  if (a.is_type != b.is_type || a.custom != b.custom || a.dialect != b.dialect ||
      a.asm_text != b.asm_text || a.items.size() != b.items.size())
    return false;
  for (size_t i = 0; i < a.items.size(); ++i) {
    const Item &x = a.items[i], &y = b.items[i];
    if (x.kind != y.kind || x.v != y.v || x.ref != y.ref || x.s != y.s) return false;
  }
  return true;
}

}  // namespace

NodeP Nodes::get(Node n) {
  auto& bucket = by_hash_[hash_node(n)];
  for (NodeP p : bucket)
    if (same_node(*p, n)) return p;
  nodes_.push_back(std::move(n));
  bucket.push_back(&nodes_.back());
  return &nodes_.back();
}

namespace {

// Bytecode versions that changed the encoding (LLVM's mlir/Bytecode/Encoding.h).
constexpr uint64_t kDialectVersioning = 1, kLazyLoading = 2, kUseListOrdering = 3,
                   kElideUnknownBlockArgLocation = 4, kNativePropertiesEncoding = 5;
constexpr uint8_t kString = 0, kDialect = 1, kAttrType = 2, kAttrTypeOffset = 3, kIR = 4,
                  kResource = 5, kResourceOffset = 6, kProperties = 8;
constexpr uint8_t kHasAttrs = 0x01, kHasResults = 0x02, kHasOperands = 0x04,
                  kHasInlineRegions = 0x10, kHasProperties = 0x40;

struct Out {
  std::string b;
  void byte(uint8_t v) { b += static_cast<char>(v); }
  // PrefixVarInt: the count of trailing zero bits of the first byte is the count of extra bytes.
  void varint(uint64_t v) {
    if (v < (uint64_t(1) << 56)) {
      int extra = 0;
      while (extra < 7 && v >= (uint64_t(1) << (7 * (extra + 1)))) ++extra;
      const uint64_t enc = ((v << 1) | 1) << extra;
      for (int i = 0; i <= extra; ++i) byte(static_cast<uint8_t>(enc >> (8 * i)));
      return;
    }
    byte(0);
    for (int i = 0; i < 8; ++i) byte(static_cast<uint8_t>(v >> (8 * i)));
  }
  void svarint(int64_t v) {
    varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
  }
  void varint_flag(uint64_t v, bool flag) { varint((v << 1) | (flag ? 1 : 0)); }
  void section(uint8_t id, const Out& body) {
    byte(id);
    varint(body.b.size());
    b += body.b;
  }
};

struct Entry {
  NodeP node;
  size_t dialect = 0;
  uint64_t refs = 1;
  size_t number = 0;
};

struct OpNameEntry {
  size_t dialect = 0;
  std::string name;
  uint64_t refs = 0;
  size_t number = 0;
};

// MLIR's groupByDialectPerByte: within each run of entries whose indices take the same number
// of varint bytes, a stable sort by dialect, the previous run's last dialect first.
template <typename T>
void group_by_dialect(std::vector<T*>& v) {
  if (v.empty()) return;
  size_t first = 0, in_group = 0, begin = 0;
  for (unsigned i = 1; i < 9 && begin < v.size(); ++i) {
    in_group = (size_t(1) << (7 * i)) - in_group;
    const size_t end = std::min(v.size(), begin + in_group);
    std::stable_sort(v.begin() + begin, v.begin() + end, [&](const T* a, const T* b) {
      if (a->dialect == first) return b->dialect != first;
      if (b->dialect == first) return false;
      return a->dialect < b->dialect;
    });
    first = v[end - 1]->dialect;
    begin = end;
  }
  for (size_t i = 0; i < v.size(); ++i) v[i]->number = i;
}

class Writer {
 public:
  Writer(uint64_t version, Nodes& nodes) : version_(version), nodes_(nodes) {
    unknown_loc_ = nodes_.get(NodeBuilder(false, "builtin", 15).n);
  }

  std::string run(const WOp& module, const std::string& producer) {
    number_op(module);
    std::vector<std::pair<const WRegion*, int64_t>> work;
    auto push_regions = [&](const WOp& op) {
      const int64_t first = op.isolated ? 0 : next_value_;
      for (const auto& r : op.regions) work.emplace_back(&r, first);
    };
    push_regions(module);
    while (!work.empty()) {
      auto [r, first] = work.back();
      work.pop_back();
      next_value_ = first;
      number_region(*r);
      for (const auto& b : r->blocks)
        for (const auto& op : b.ops) push_regions(op);
    }
    finish(attrs_);
    finish(types_);
    std::vector<OpNameEntry*> names;
    for (auto& e : op_names_) names.push_back(&e);
    std::stable_sort(names.begin(), names.end(),
                     [](const OpNameEntry* a, const OpNameEntry* b) { return a->refs > b->refs; });
    group_by_dialect(names);
    ordered_names_ = names;

    Out file;
    file.b = std::string("ML\xefR", 4);
    file.varint(version_);
    file.b += producer;
    file.byte(0);
    write_dialects(file);
    write_attr_types(file);
    Out ir;
    ir.varint_flag(1, false);
    write_op(ir, module);
    file.section(kIR, ir);
    // No resources: the offset section holds only the count (zero) of external resource groups.
    Out res_offsets;
    res_offsets.varint(0);
    file.section(kResourceOffset, res_offsets);
    file.section(kResource, Out{});
    Out strings;
    strings.varint(strings_.size());
    for (size_t i = strings_.size(); i-- > 0;) strings.varint(strings_[i].size() + 1);
    for (const auto& s : strings_) {
      strings.b += s;
      strings.byte(0);
    }
    file.section(kString, strings);
    if (version_ >= kNativePropertiesEncoding) {
      Out props;
      props.varint(properties_.size());
      for (const auto& p : properties_) props.b += p;
      file.section(kProperties, props);
    }
    return file.b;
  }

 private:
  size_t dialect(const std::string& name) {
    auto it = dialect_index_.find(name);
    if (it != dialect_index_.end()) return it->second;
    dialects_.push_back(name);
    return dialect_index_[name] = dialects_.size() - 1;
  }
  size_t string(const std::string& s) {
    auto it = string_index_.find(s);
    if (it != string_index_.end()) return it->second;
    strings_.push_back(s);
    return string_index_[s] = strings_.size() - 1;
  }

  void number(NodeP n) {
    auto& table = n->is_type ? type_index_ : attr_index_;
    auto it = table.find(n);
    if (it != table.end()) {
      ++it->second->refs;
      return;
    }
    auto& list = n->is_type ? types_ : attrs_;
    list.push_back(std::make_unique<Entry>());
    Entry* e = list.back().get();
    e->node = n;
    e->dialect = dialect(n->dialect);
    table[n] = e;
    if (!n->custom) return;
    for (const Item& item : n->items)
      if (item.ref) number(item.ref);
  }

  // The attribute dictionary an op writes: all attributes before native properties, the
  // discardable ones from then on.
  NodeP dictionary(const WOp& op) {
    auto it = dicts_.find(&op);
    if (it != dicts_.end()) return it->second;
    std::vector<std::pair<std::string, NodeP>> all = op.discardable;
    if (version_ < kNativePropertiesEncoding)
      all.insert(all.end(), op.inherent.begin(), op.inherent.end());
    NodeP d = nullptr;
    if (!all.empty()) {
      std::stable_sort(all.begin(), all.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      NodeBuilder b(false, "builtin", 1);
      b.varint(all.size());
      for (const auto& [k, v] : all)
        b.attr(nodes_.get(NodeBuilder(false, "builtin", 2).string(k).n)).attr(v);
      d = nodes_.get(std::move(b.n));
    }
    return dicts_[&op] = d;
  }

  // Native properties: VHLO ops' attributes in name order, builtin.module's optional sym_name
  // and sym_visibility.
  std::vector<NodeP> properties(const WOp& op) const {
    std::vector<NodeP> out;
    if (version_ < kNativePropertiesEncoding) return out;
    if (op.is_module) {
      for (const char* n : {"sym_name", "sym_visibility"}) {
        NodeP v = nullptr;
        for (const auto& [k, a] : op.inherent)
          if (k == n) v = a;
        out.push_back(v);
      }
      return out;
    }
    auto sorted = op.inherent;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [k, v] : sorted) out.push_back(v);
    return out;
  }
  bool has_properties(const WOp& op) const {
    return version_ >= kNativePropertiesEncoding && (op.is_module || !op.inherent.empty());
  }

  void number_op(const WOp& op) {
    auto key = std::make_pair(op.dialect, op.name);
    auto it = op_name_index_.find(key);
    if (it == op_name_index_.end()) {
      op_names_.push_back({dialect(op.dialect), op.name, 0, 0});
      it = op_name_index_.emplace(key, op_names_.size() - 1).first;
    }
    ++op_names_[it->second].refs;
    for (size_t i = 0; i < op.results.size(); ++i) {
      values_[op.results[i]] = next_value_++;
      number(op.result_types[i]);
    }
    if (NodeP d = dictionary(op)) number(d);
    if (has_properties(op))
      for (NodeP p : properties(op))
        if (p) number(p);
    number(op.loc ? op.loc : unknown_loc_);
  }

  void number_region(const WRegion& r) {
    if (r.blocks.empty()) return;
    const int64_t first = next_value_;
    for (const auto& b : r.blocks) {
      for (size_t i = 0; i < b.args.size(); ++i) {
        values_[b.args[i]] = next_value_++;
        number(b.arg_locs[i] ? b.arg_locs[i] : unknown_loc_);
        number(b.arg_types[i]);
      }
      for (const auto& op : b.ops) number_op(op);
    }
    region_values_[&r] = next_value_ - first;
  }

  void finish(std::vector<std::unique_ptr<Entry>>& list) {
    std::vector<Entry*> v;
    for (auto& e : list) v.push_back(e.get());
    std::stable_sort(v.begin(), v.end(),
                     [](const Entry* a, const Entry* b) { return a->refs > b->refs; });
    group_by_dialect(v);
    (&list == &attrs_ ? ordered_attrs_ : ordered_types_) = v;
  }

  size_t attr_number(NodeP n) const { return attr_index_.at(n)->number; }
  size_t type_number(NodeP n) const { return type_index_.at(n)->number; }

  template <typename T, typename F>
  void grouped(Out& out, const std::vector<T*>& v, F&& each) {
    size_t i = 0;
    while (i < v.size()) {
      size_t j = i;
      while (j < v.size() && v[j]->dialect == v[i]->dialect) ++j;
      out.varint(v[i]->dialect);
      out.varint(j - i);
      for (size_t k = i; k < j; ++k) each(*v[k]);
      i = j;
    }
  }

  void write_dialects(Out& file) {
    Out d;
    d.varint(dialects_.size());
    for (const auto& name : dialects_) {
      const size_t id = string(name);
      if (version_ < kDialectVersioning)
        d.varint(id);
      else
        d.varint_flag(id, false);  // VHLO's version is in the producer, not a dialect section
    }
    if (version_ >= kElideUnknownBlockArgLocation) d.varint(ordered_names_.size());
    grouped(d, ordered_names_, [&](const OpNameEntry& e) {
      const size_t id = string(e.name);
      if (version_ < kNativePropertiesEncoding)
        d.varint(id);
      else
        d.varint_flag(id, true);
    });
    file.section(kDialect, d);
  }

  void encode(Out& out, const Node& n) {
    if (!n.custom) {
      out.b += n.asm_text;
      out.byte(0);
      return;
    }
    for (const Item& it : n.items) {
      switch (it.kind) {
        case Item::Kind::Varint:
          out.varint(it.v);
          break;
        case Item::Kind::SVarint:
          out.svarint(static_cast<int64_t>(it.v));
          break;
        case Item::Kind::Byte:
          out.byte(static_cast<uint8_t>(it.v));
          break;
        case Item::Kind::AttrRef:
          out.varint(attr_number(it.ref));
          break;
        case Item::Kind::TypeRef:
          out.varint(type_number(it.ref));
          break;
        case Item::Kind::String:
          out.varint(string(it.s));
          break;
        case Item::Kind::Blob:
          out.varint(it.s.size());
          out.b += it.s;
          break;
      }
    }
  }

  void write_attr_types(Out& file) {
    Out data, offsets;
    offsets.varint(ordered_attrs_.size());
    offsets.varint(ordered_types_.size());
    auto each = [&](const Entry& e) {
      const size_t before = data.b.size();
      encode(data, *e.node);
      offsets.varint_flag(data.b.size() - before, e.node->custom);
    };
    grouped(offsets, ordered_attrs_, each);
    grouped(offsets, ordered_types_, each);
    file.section(kAttrTypeOffset, offsets);
    file.section(kAttrType, data);
  }

  size_t property_index(const WOp& op) {
    Out p;
    for (NodeP n : properties(op)) {
      if (op.is_module) {
        // Optional attributes: the index with a presence flag.
        p.varint_flag(n ? attr_number(n) : 0, n != nullptr);
      } else {
        p.varint(attr_number(n));
      }
    }
    Out entry;
    entry.varint(p.b.size());
    entry.b += p.b;
    auto it = property_index_.find(entry.b);
    if (it != property_index_.end()) return it->second;
    properties_.push_back(entry.b);
    return property_index_[entry.b] = properties_.size() - 1;
  }

  void write_op(Out& out, const WOp& op) {
    out.varint(op_names_[op_name_index_.at({op.dialect, op.name})].number);
    const size_t mask_at = out.b.size();
    out.byte(0);
    uint8_t mask = 0;
    out.varint(attr_number(op.loc ? op.loc : unknown_loc_));
    if (NodeP d = dictionary(op)) {
      mask |= kHasAttrs;
      out.varint(attr_number(d));
    }
    if (has_properties(op)) {
      mask |= kHasProperties;
      out.varint(property_index(op));
    }
    if (!op.results.empty()) {
      mask |= kHasResults;
      out.varint(op.results.size());
      for (NodeP t : op.result_types) out.varint(type_number(t));
    }
    if (!op.operands.empty()) {
      mask |= kHasOperands;
      out.varint(op.operands.size());
      for (const Value* v : op.operands) {
        auto it = values_.find(v);
        if (it == values_.end())
          throw Error("bytecode writer: " + op.dialect + "." + op.name +
                      " uses a value defined outside its function");
        out.varint(static_cast<uint64_t>(it->second));
      }
    }
    if (!op.regions.empty()) mask |= kHasInlineRegions;
    out.b[mask_at] = static_cast<char>(mask);
    if (op.regions.empty()) return;
    out.varint_flag(op.regions.size(), op.isolated);
    if (!op.isolated || version_ < kLazyLoading) {
      for (const auto& r : op.regions) write_region(out, r);
      return;
    }
    Out inner;
    for (const auto& r : op.regions) write_region(inner, r);
    out.section(kIR, inner);
  }

  void write_region(Out& out, const WRegion& r) {
    out.varint(r.blocks.size());
    if (r.blocks.empty()) return;
    out.varint(static_cast<uint64_t>(region_values_.at(&r)));
    for (const auto& b : r.blocks) {
      out.varint_flag(b.ops.size(), !b.args.empty());
      if (!b.args.empty()) {
        out.varint(b.args.size());
        for (size_t i = 0; i < b.args.size(); ++i) {
          if (version_ >= kElideUnknownBlockArgLocation) {
            const bool has_loc = b.arg_locs[i] && b.arg_locs[i] != unknown_loc_;
            out.varint_flag(type_number(b.arg_types[i]), has_loc);
            if (has_loc) out.varint(attr_number(b.arg_locs[i]));
          } else {
            out.varint(type_number(b.arg_types[i]));
            out.varint(attr_number(b.arg_locs[i] ? b.arg_locs[i] : unknown_loc_));
          }
        }
        if (version_ >= kUseListOrdering) out.byte(0);  // uses in the order they are read
      }
      for (const auto& op : b.ops) write_op(out, op);
    }
  }

  uint64_t version_;
  Nodes& nodes_;
  NodeP unknown_loc_;
  std::vector<std::string> dialects_;
  std::map<std::string, size_t> dialect_index_;
  std::vector<std::string> strings_;
  std::unordered_map<std::string, size_t> string_index_;
  std::vector<std::unique_ptr<Entry>> attrs_, types_;
  std::unordered_map<NodeP, Entry*> attr_index_, type_index_;
  std::vector<Entry*> ordered_attrs_, ordered_types_;
  std::vector<OpNameEntry> op_names_;
  std::map<std::pair<std::string, std::string>, size_t> op_name_index_;
  std::vector<OpNameEntry*> ordered_names_;
  std::unordered_map<const Value*, int64_t> values_;
  std::unordered_map<const WRegion*, int64_t> region_values_;
  std::unordered_map<const WOp*, NodeP> dicts_;
  std::vector<std::string> properties_;
  std::unordered_map<std::string, size_t> property_index_;
  int64_t next_value_ = 0;
};

}  // namespace

std::string emit(const WOp& module, uint64_t version, const std::string& producer, Nodes& nodes) {
  return Writer(version, nodes).run(module, producer);
}

}  // namespace cujax::ir::bytecode::write
