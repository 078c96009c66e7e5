// MLIR bytecode container reader. Every length, index and offset from the file is checked
// against the bytes that remain before it is used; nesting is bounded by kMaxDepth. The reader
// class is in reader.h; the attribute and type encodings are in attr_type.cpp.
#include "reader.h"

namespace cujax::ir::bytecode {

namespace detail {

BModule Reader::read() {
  BModule m;
  Cursor c{&ctx_, 0, ctx_.file.size()};
  if (ctx_.file.size() < 4 || ctx_.file.substr(0, 4) != std::string_view("ML\xefR", 4))
    c.fail("not MLIR bytecode (no \"ML\\xefR\" magic)");
  c.pos = 4;
  version_ = m.version = c.varint();
  if (version_ > kNewestBytecode)
    c.fail("bytecode version " + std::to_string(version_) +
           " is newer than the newest cujax reads (" + std::to_string(kNewestBytecode) + ")");
  m.producer = std::string(c.cstring());
  producer_ = m.producer;
  Section sections[kNumSections];
  while (!c.empty()) {
    const size_t at = c.pos;
    Section s;
    const uint8_t id = read_section(c, s);
    if (id >= kNumSections || id == kDialectVersions)
      ctx_.fail(at, "unknown top-level section " + std::to_string(id));
    if (sections[id].present) ctx_.fail(at, "duplicate section " + std::to_string(id));
    sections[id] = s;
  }
  for (uint8_t id : {kString, kDialect, kAttrType, kAttrTypeOffset, kIR})
    if (!sections[id].present) c.fail("missing section " + std::to_string(id));
  if (sections[kResource].present != sections[kResourceOffset].present)
    c.fail("resource and resource offset sections must come together");
  read_strings(sections[kString]);
  if (sections[kProperties].present) read_properties(sections[kProperties]);
  read_dialects(sections[kDialect]);
  read_attr_type_offsets(sections[kAttrType], sections[kAttrTypeOffset]);
  read_ir(sections[kIR], m);
  return m;
}

AttrRef Reader::attribute(uint64_t index, size_t at) {
  if (index >= attrs_.size())
    fail(at, "attribute index " + std::to_string(index) + " out of range");
  if (attr_cache_[index]) return attr_cache_[index];
  if (attr_busy_[index]) fail(at, "attribute " + std::to_string(index) + " refers to itself");
  if (++depth_ > kMaxDepth) fail(at, "attributes nested too deeply");
  attr_busy_[index] = true;
  const Entry& e = attrs_[index];
  Cursor c{&ctx_, e.begin, e.end};
  AttrRef a = e.custom ? custom_attr(c, e.dialect) : asm_attr(c);
  if (!c.empty()) c.fail("trailing bytes after attribute " + std::to_string(index));
  attr_busy_[index] = false;
  --depth_;
  attr_cache_[index] = a;
  return a;
}

TypeRef Reader::type(uint64_t index, size_t at) {
  if (index >= types_.size()) fail(at, "type index " + std::to_string(index) + " out of range");
  if (type_cache_[index]) return type_cache_[index];
  if (type_busy_[index]) fail(at, "type " + std::to_string(index) + " refers to itself");
  if (++depth_ > kMaxDepth) fail(at, "types nested too deeply");
  type_busy_[index] = true;
  const Entry& e = types_[index];
  Cursor c{&ctx_, e.begin, e.end};
  TypeRef t;
  if (e.custom) {
    t = custom_type(c, e.dialect);
  } else {
    auto bt = std::make_shared<BType>();
    bt->text = std::string(c.cstring());
    t = bt;
  }
  if (!c.empty()) c.fail("trailing bytes after type " + std::to_string(index));
  type_busy_[index] = false;
  --depth_;
  type_cache_[index] = t;
  return t;
}

void Reader::read_strings(const Section& s) {
  Cursor c{&ctx_, s.begin, s.end};
  const uint64_t n = c.count();
  strings_.resize(n);
  size_t data_end = s.end;
  for (uint64_t i = n; i-- > 0;) {
    const uint64_t size = c.varint();
    if (size == 0 || data_end < c.pos || size > data_end - c.pos)
      c.fail("string length " + std::to_string(size) + " out of range");
    strings_[i] = ctx_.file.substr(data_end - size, size - 1);
    data_end -= size;
  }
  if (data_end < c.pos) c.fail("string data overlaps the string lengths");
}

std::string_view Reader::string_at(Cursor& c) {
  const size_t at = c.pos;
  const uint64_t i = c.varint();
  if (i >= strings_.size()) ctx_.fail(at, "string index " + std::to_string(i) + " out of range");
  return strings_[i];
}

void Reader::read_properties(const Section& s) {
  Cursor c{&ctx_, s.begin, s.end};
  const uint64_t n = c.count();
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t size = c.varint();
    const size_t begin = c.pos;
    c.bytes(size);
    props_.push_back({begin, begin + size});
  }
  if (!c.empty()) c.fail("trailing bytes in the properties section");
}

void Reader::read_dialects(const Section& s) {
  Cursor c{&ctx_, s.begin, s.end};
  const uint64_t n = c.count();
  for (uint64_t i = 0; i < n; ++i) {
    if (version_ < kDialectVersioning) {
      dialects_.push_back(string_at(c));
      continue;
    }
    const size_t at = c.pos;
    bool versioned = false;
    const uint64_t idx = c.varint_flag(versioned);
    if (idx >= strings_.size()) ctx_.fail(at, "dialect name index out of range");
    dialects_.push_back(strings_[idx]);
    if (versioned) {
      Section v;
      if (read_section(c, v) != kDialectVersions)
        ctx_.fail(at, "expected a dialect version section");
    }
  }
  if (version_ >= kElideUnknownBlockArgLocation) c.varint();  // number of op names
  while (!c.empty()) {
    const size_t dialect = dialect_index(c);
    const uint64_t count = c.count();
    for (uint64_t i = 0; i < count; ++i) {
      OpName op;
      op.dialect = dialect;
      if (version_ < kNativePropertiesEncoding) {
        op.name = string_at(c);
      } else {
        const size_t at = c.pos;
        bool reg = false;
        const uint64_t idx = c.varint_flag(reg);
        if (idx >= strings_.size()) ctx_.fail(at, "op name index out of range");
        op.name = strings_[idx];
        op.registered = reg;
      }
      op_names_.push_back(op);
    }
  }
}

size_t Reader::dialect_index(Cursor& c) {
  const size_t at = c.pos;
  const uint64_t d = c.varint();
  if (d >= dialects_.size()) ctx_.fail(at, "dialect index " + std::to_string(d) + " out of range");
  return d;
}

void Reader::read_attr_type_offsets(const Section& data, const Section& offsets) {
  Cursor c{&ctx_, offsets.begin, offsets.end};
  const uint64_t num_attrs = c.count(), num_types = c.count();
  size_t offset = data.begin;
  auto fill = [&](std::vector<Entry>& out, uint64_t n) {
    out.reserve(n);
    while (out.size() < n) {
      const size_t dialect = dialect_index(c);
      const uint64_t count = c.count();
      if (count > n - out.size()) c.fail("attribute/type group larger than the table");
      for (uint64_t i = 0; i < count; ++i) {
        Entry e;
        e.dialect = dialect;
        const uint64_t size = c.varint_flag(e.custom);
        if (size > data.end - offset) c.fail("attribute/type entry runs past its section");
        e.begin = offset;
        e.end = offset + size;
        offset += size;
        out.push_back(e);
      }
    }
  };
  fill(attrs_, num_attrs);
  fill(types_, num_types);
  if (!c.empty()) c.fail("trailing bytes in the attribute/type offset section");
  attr_cache_.assign(attrs_.size(), nullptr);
  attr_busy_.assign(attrs_.size(), false);
  type_cache_.assign(types_.size(), nullptr);
  type_busy_.assign(types_.size(), false);
}

int64_t Reader::slot(Scope& s, uint64_t index, size_t at) {
  if (index >= s.values.size()) fail(at, "value index " + std::to_string(index) + " out of range");
  if (s.values[index] < 0) s.values[index] = next_value_++;
  return s.values[index];
}

void Reader::define(Scope& s, std::vector<int64_t>& ids, size_t n, size_t at) {
  if (s.next.empty()) fail(at, "value defined outside a region");
  size_t& next = s.next.back();
  if (n > s.values.size() - next) fail(at, "more values defined than the region declared");
  for (size_t i = 0; i < n; ++i) ids.push_back(slot(s, next++, at));
}

void Reader::use_lists(Cursor& c, uint64_t range) {
  uint64_t n = 1;
  if (range > 1) n = c.count();
  for (uint64_t i = 0; i < n; ++i) {
    if (range > 1) c.varint();
    bool pairs = false;
    const uint64_t k = c.varint_flag(pairs);
    if (k > c.left()) c.fail("use-list order longer than its section");
    for (uint64_t j = 0; j < k; ++j) c.varint();
  }
}

void Reader::block_header(Cursor& c, BBlock& b, uint64_t& num_ops) {
  bool has_args = false;
  num_ops = c.varint_flag(has_args);
  if (num_ops > c.left())
    c.fail("block of " + std::to_string(num_ops) + " ops larger than its section");
  if (has_args) {
    const uint64_t n = c.count();
    std::vector<int64_t> ids;
    for (uint64_t i = 0; i < n; ++i) {
      TypeRef t;
      if (version_ >= kElideUnknownBlockArgLocation) {
        bool has_loc = false;
        const size_t at = c.pos;
        t = type(c.varint_flag(has_loc), at);
        if (has_loc) attr_ref(c);
      } else {
        t = type_ref(c);
        attr_ref(c);
      }
      b.args.emplace_back(t, 0);
    }
    define(scopes_.back(), ids, n, c.pos);
    for (uint64_t i = 0; i < n; ++i) b.args[i].second = ids[i];
  }
  if (version_ < kUseListOrdering) return;
  const uint8_t has_orders = has_args ? c.byte() : 0;
  if (has_orders) use_lists(c, b.args.size());
}

void Reader::read_region(Cursor& c, BRegion& r, int depth) {
  const uint64_t num_blocks = c.count();
  if (num_blocks == 0) return;
  const uint64_t num_values = c.varint();
  if (num_values > ctx_.file.size())
    c.fail("region declares " + std::to_string(num_values) + " values");
  Scope& s = scopes_.back();
  if (s.values.size() + num_values > 4 * ctx_.file.size()) c.fail("too many values");
  s.next.push_back(s.values.size());
  s.values.resize(s.values.size() + num_values, -1);
  for (uint64_t bi = 0; bi < num_blocks; ++bi) {
    auto b = std::make_unique<BBlock>();
    uint64_t num_ops = 0;
    block_header(c, *b, num_ops);
    for (uint64_t i = 0; i < num_ops; ++i) b->ops.push_back(read_op(c, depth));
    r.blocks.push_back(std::move(b));
  }
  Scope& s2 = scopes_.back();
  s2.values.resize(s2.values.size() - num_values);
  s2.next.pop_back();
}

std::unique_ptr<BOp> Reader::read_op(Cursor& c, int depth) {
  if (depth > kMaxDepth) c.fail("regions nested too deeply");
  auto op = std::make_unique<BOp>();
  op->offset = c.pos;
  const size_t at = c.pos;
  const uint64_t name_index = c.varint();
  if (name_index >= op_names_.size()) ctx_.fail(at, "op name index out of range");
  const OpName& name = op_names_[name_index];
  op->dialect = std::string(dialects_[name.dialect]);
  op->name = std::string(name.name);
  const uint8_t mask = c.byte();
  op->loc = attr_ref(c);
  if (mask & kHasAttrs) {
    auto dict = attr_ref(c);
    if (dict->kind != BAttr::Kind::Dict) c.fail("op attributes are not a dictionary");
    for (const auto& [k, v] : dict->entries) {
      if (k->kind != BAttr::Kind::String) c.fail("attribute name is not a string");
      op->attrs.emplace_back(k->text, v);
    }
  }
  if (mask & kHasProperties) {
    if (!name.registered) c.fail("properties in bytecode that does not record registration");
    if (*name.registered) {
      const size_t pat = c.pos;
      const uint64_t idx = c.varint();
      if (idx >= props_.size()) ctx_.fail(pat, "properties index out of range");
      read_properties_of(*op, props_[idx], pat);
    } else {
      op->properties_attr = attr_ref(c);
    }
  }
  if (mask & kHasResults) {
    const uint64_t n = c.count();
    for (uint64_t i = 0; i < n; ++i) op->result_types.push_back(type_ref(c));
  }
  if (mask & kHasOperands) {
    const uint64_t n = c.count();
    for (uint64_t i = 0; i < n; ++i) {
      const size_t vat = c.pos;
      op->operands.push_back(slot(scopes_.back(), c.varint(), vat));
    }
  }
  if (mask & kHasSuccessors) c.fail("ops with successor blocks are not StableHLO");
  if (version_ >= kUseListOrdering && (mask & kHasUseListOrders))
    use_lists(c, op->result_types.size());
  uint64_t num_regions = 0;
  if (mask & kHasInlineRegions) num_regions = c.varint_flag(op->isolated);
  if (num_regions > c.left()) c.fail("op declares " + std::to_string(num_regions) + " regions");
  if (!op->result_types.empty())
    define(scopes_.back(), op->result_ids, op->result_types.size(), c.pos);
  if (num_regions == 0) return op;
  if (op->isolated) {
    scopes_.emplace_back();
    if (version_ >= kLazyLoading) {
      const size_t sat = c.pos;
      Section s;
      if (read_section(c, s) != kIR)
        ctx_.fail(sat, "expected an IR section for an isolated region");
      Cursor inner{&ctx_, s.begin, s.end};
      for (uint64_t i = 0; i < num_regions; ++i) {
        op->regions.push_back(std::make_unique<BRegion>());
        read_region(inner, *op->regions.back(), depth + 1);
      }
      if (!inner.empty()) inner.fail("trailing bytes in a region section");
    } else {
      for (uint64_t i = 0; i < num_regions; ++i) {
        op->regions.push_back(std::make_unique<BRegion>());
        read_region(c, *op->regions.back(), depth + 1);
      }
    }
    scopes_.pop_back();
  } else {
    for (uint64_t i = 0; i < num_regions; ++i) {
      op->regions.push_back(std::make_unique<BRegion>());
      read_region(c, *op->regions.back(), depth + 1);
    }
  }
  return op;
}

void Reader::read_properties_of(BOp& op, std::pair<size_t, size_t> range, size_t at) {
  Cursor c{&ctx_, range.first, range.second};
  op.has_native_properties = true;
  if (op.dialect == "builtin" && op.name == "module") {
    for (const char* n : {"sym_name", "sym_visibility"}) {
      bool present = false;
      const size_t aat = c.pos;
      const uint64_t idx = c.varint_flag(present);
      if (present) op.attrs.emplace_back(n, attribute(idx, aat));
    }
  } else if (op.dialect == "vhlo") {
    const VhloOpInfo* info = find_vhlo_op(op.name);
    if (!info)
      fail(at, "op vhlo." + op.name + " is unknown to cujax (producer " + producer_ +
                   ", newest known StableHLO " + newest_known_stablehlo_version() + ")");
    // ODS writes properties in the order of the attribute names, not of their declaration.
    std::vector<std::string> names(info->attributes.begin(), info->attributes.end());
    std::sort(names.begin(), names.end());
    for (const auto& n : names) op.attrs.emplace_back(n, attr_ref(c));
  } else if (op.dialect == "sdy" && (op.name == "mesh" || op.name == "sharding_constraint")) {
    // ODS properties, in the order of their names: sdy.mesh's mesh and sym_name, a constraint's
    // sharding.
    const std::vector<const char*> names = op.name == "mesh"
                                               ? std::vector<const char*>{"mesh", "sym_name"}
                                               : std::vector<const char*>{"sharding"};
    for (const char* n : names) op.attrs.emplace_back(n, attr_ref(c));
  } else {
    fail(at, "properties of op " + op.dialect + "." + op.name + " (producer " + producer_ +
                 ") cannot be read: cujax reads VHLO and builtin ops, and Shardy's sdy.mesh and "
                 "sdy.sharding_constraint");
  }
  if (!c.empty()) c.fail("trailing bytes in the properties of " + op.dialect + "." + op.name);
}

void Reader::read_ir(const Section& s, BModule& m) {
  Cursor c{&ctx_, s.begin, s.end};
  scopes_.emplace_back();
  BBlock top;
  uint64_t num_ops = 0;
  scopes_.back().next.push_back(0);
  block_header(c, top, num_ops);
  for (uint64_t i = 0; i < num_ops; ++i) m.top.push_back(read_op(c, 1));
  if (!c.empty()) c.fail("trailing bytes in the IR section");
}

}  // namespace detail

using detail::Reader;

BModule read_container(std::string_view bytes, std::string_view name,
                       std::unique_ptr<Container>* keep) {
  auto r = std::make_unique<Reader>(bytes, name);
  BModule m = r->read();
  if (keep) *keep = std::move(r);
  return m;
}

}  // namespace cujax::ir::bytecode
