// MLIR bytecode container reader. Every length, index and offset from the file is checked
// against the bytes that remain before it is used; nesting is bounded by kMaxDepth.
#include "container.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>

#include "../asm_util.h"
#include "cujax/core/error.h"
#include "vhlo_ops.h"

namespace cujax::ir::bytecode {
namespace {

constexpr uint8_t kString = 0, kDialect = 1, kAttrType = 2, kAttrTypeOffset = 3, kIR = 4,
                  kResource = 5, kResourceOffset = 6, kDialectVersions = 7, kProperties = 8;
constexpr int kNumSections = 9;

// Bytecode versions that changed the encoding (LLVM's mlir/Bytecode/Encoding.h).
constexpr uint64_t kDialectVersioning = 1, kLazyLoading = 2, kUseListOrdering = 3,
                   kElideUnknownBlockArgLocation = 4, kNativePropertiesEncoding = 5,
                   kNewestBytecode = 6;

constexpr uint8_t kHasAttrs = 0x01, kHasResults = 0x02, kHasOperands = 0x04, kHasSuccessors = 0x08,
                  kHasInlineRegions = 0x10, kHasUseListOrders = 0x20, kHasProperties = 0x40;

struct Ctx {
  std::string_view file;
  std::string name;
  [[noreturn]] void fail(size_t at, const std::string& msg) const {
    throw Error(name + ": byte " + std::to_string(at) + ": " + msg);
  }
};

// A window [pos, end) of the file.
struct Cursor {
  const Ctx* ctx;
  size_t pos, end;

  bool empty() const { return pos >= end; }
  size_t left() const { return end - pos; }
  [[noreturn]] void fail(const std::string& msg) const { ctx->fail(pos, msg); }
  uint8_t byte() {
    if (pos >= end) fail("unexpected end of data");
    return static_cast<uint8_t>(ctx->file[pos++]);
  }
  std::string_view bytes(uint64_t n) {
    if (n > left()) fail("length " + std::to_string(n) + " runs past the end of its section");
    auto s = ctx->file.substr(pos, n);
    pos += n;
    return s;
  }
  // PrefixVarInt: the trailing zero bits of the first byte count the bytes that follow.
  uint64_t varint() {
    const size_t at = pos;
    const uint8_t first = byte();
    if (first & 1) return first >> 1;
    if (first == 0) {
      uint64_t v = 0;
      for (int i = 0; i < 8; ++i) v |= uint64_t(byte()) << (8 * i);
      return v;
    }
    const int extra = std::countr_zero(first);
    uint64_t v = first;
    for (int i = 1; i <= extra; ++i) v |= uint64_t(byte()) << (8 * i);
    (void)at;
    return v >> (extra + 1);
  }
  int64_t svarint() {
    const uint64_t v = varint();
    return static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1));
  }
  uint64_t varint_flag(bool& flag) {
    const uint64_t v = varint();
    flag = v & 1;
    return v >> 1;
  }
  // A count of items that each take at least one byte: bounded by what is left.
  uint64_t count() {
    const uint64_t n = varint();
    if (n > left())
      fail("count " + std::to_string(n) + " exceeds the " + std::to_string(left()) + " bytes left");
    return n;
  }
  std::string_view cstring() {
    const size_t at = pos;
    while (pos < end && ctx->file[pos] != '\0') ++pos;
    if (pos >= end) ctx->fail(at, "string without its terminating NUL");
    auto s = ctx->file.substr(at, pos - at);
    ++pos;
    return s;
  }
};

struct Section {
  bool present = false;
  size_t begin = 0, end = 0;
};

// section { idAndIsAligned: byte, length: varint, [alignment: varint, padding 0xCB...], data }
uint8_t read_section(Cursor& c, Section& s) {
  const uint8_t id_aligned = c.byte();
  const uint8_t id = id_aligned & 0x7f;
  uint64_t length = c.varint();
  if (id_aligned & 0x80) {
    const uint64_t align = c.varint();
    if (align == 0 || (align & (align - 1)) || align > 4096)
      c.fail("section alignment " + std::to_string(align) + " is not a power of two up to 4096");
    while (c.pos % align) {
      if (c.byte() != 0xCB) c.ctx->fail(c.pos - 1, "bad section padding byte");
    }
  }
  if (length > c.left())
    c.fail("section of " + std::to_string(length) + " bytes runs past the end");
  s.present = true;
  s.begin = c.pos;
  s.end = c.pos + length;
  c.pos = s.end;
  return id;
}

struct Entry {
  size_t dialect = 0, begin = 0, end = 0;
  bool custom = false;
};

struct OpName {
  size_t dialect = 0;
  std::string_view name;
  std::optional<bool> registered;
};

struct Scope {
  std::vector<int64_t> values;  // global value id per slot, -1 until defined or used
  std::vector<size_t> next;
};

class Reader final : public Container {
 public:
  Reader(std::string_view bytes, std::string_view name) {
    ctx_.file = bytes;
    ctx_.name = std::string(name);
  }

  [[noreturn]] void fail(size_t at, const std::string& msg) const override { ctx_.fail(at, msg); }

  BModule read() {
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

  AttrRef attribute(uint64_t index, size_t at) override {
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

  TypeRef type(uint64_t index, size_t at) {
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

 private:
  // ---- strings, dialects, properties -------------------------------------------------------
  void read_strings(const Section& s) {
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
  std::string_view string_at(Cursor& c) {
    const size_t at = c.pos;
    const uint64_t i = c.varint();
    if (i >= strings_.size()) ctx_.fail(at, "string index " + std::to_string(i) + " out of range");
    return strings_[i];
  }

  void read_properties(const Section& s) {
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

  void read_dialects(const Section& s) {
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
  size_t dialect_index(Cursor& c) {
    const size_t at = c.pos;
    const uint64_t d = c.varint();
    if (d >= dialects_.size())
      ctx_.fail(at, "dialect index " + std::to_string(d) + " out of range");
    return d;
  }

  void read_attr_type_offsets(const Section& data, const Section& offsets) {
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

  // ---- attributes and types ----------------------------------------------------------------
  AttrRef attr_ref(Cursor& c) {
    const size_t at = c.pos;
    return attribute(c.varint(), at);
  }
  TypeRef type_ref(Cursor& c) {
    const size_t at = c.pos;
    return type(c.varint(), at);
  }
  std::vector<AttrRef> attr_list(Cursor& c) {
    std::vector<AttrRef> v;
    const uint64_t n = c.count();
    for (uint64_t i = 0; i < n; ++i) v.push_back(attr_ref(c));
    return v;
  }
  std::vector<TypeRef> type_list(Cursor& c) {
    std::vector<TypeRef> v;
    const uint64_t n = c.count();
    for (uint64_t i = 0; i < n; ++i) v.push_back(type_ref(c));
    return v;
  }
  std::vector<int64_t> svarints(Cursor& c) {
    std::vector<int64_t> v;
    const uint64_t n = c.count();
    for (uint64_t i = 0; i < n; ++i) v.push_back(c.svarint());
    return v;
  }
  // APInt of a known width: one byte up to 8 bits, a signed varint up to 64.
  uint64_t apint(Cursor& c, int bits) {
    if (bits <= 0) c.fail("integer attribute of a type without a width");
    if (bits <= 8) return c.byte();
    if (bits <= 64) return static_cast<uint64_t>(c.svarint());
    c.fail("integers wider than 64 bits are not supported");
  }

  AttrRef asm_attr(Cursor& c) {
    auto a = std::make_shared<BAttr>();
    a->kind = BAttr::Kind::Verbatim;
    a->text = std::string(c.cstring());
    return a;
  }

  static std::shared_ptr<BType> element(std::string name, int bits, bool is_float = false) {
    auto t = std::make_shared<BType>();
    t->kind = BType::Kind::Element;
    t->elem = std::move(name);
    t->bits = bits;
    t->is_float = is_float;
    return t;
  }
  static TypeRef complex_of(const TypeRef& part) {
    auto t = std::make_shared<BType>();
    t->kind = BType::Kind::Element;
    t->elem = "complex<" + part->elem + ">";
    t->bits = part->bits * 2;
    t->is_complex = true;
    t->element = part;
    return t;
  }

  TypeRef custom_type(Cursor& c, size_t dialect) {
    const std::string_view d = dialects_[dialect];
    const size_t at = c.pos;
    const uint64_t code = c.varint();
    if (d == "vhlo") return vhlo_type(c, code, at);
    if (d == "builtin") return builtin_type(c, code, at);
    ctx_.fail(at, "type of dialect '" + std::string(d) + "' is not supported");
  }

  TypeRef tensor(Cursor& c, bool with_encoding, bool builtin) {
    auto t = std::make_shared<BType>();
    t->kind = BType::Kind::Tensor;
    if (with_encoding) {
      auto enc = attr_ref(c);
      t->encoding = encoding_text(*enc, c.pos);
    }
    t->shape = svarints(c);
    t->element = type_ref(c);
    (void)builtin;
    if (t->element->kind != BType::Kind::Element) c.fail("tensor of a non-element type");
    return t;
  }
  std::string encoding_text(const BAttr& a, size_t at) {
    if (a.kind == BAttr::Kind::TypeExtensions) {
      std::string s = "#stablehlo.bounds<";
      for (size_t i = 0; i < a.ints.size(); ++i) {
        if (i) s += ", ";
        s += a.ints[i] == INT64_MIN ? "?" : std::to_string(a.ints[i]);
      }
      return s + ">";
    }
    if (a.kind == BAttr::Kind::Verbatim) return a.text;
    fail(at, "unsupported tensor encoding");
  }

  TypeRef vhlo_type(Cursor& c, uint64_t code, size_t at) {
    switch (code) {
      case 0:
        return element("i1", 1);
      case 1: {
        auto part = type_ref(c);
        if (part->kind != BType::Kind::Element || !part->is_float)
          c.fail("complex of a non-float type");
        return complex_of(part);
      }
      case 2:
        return element("bf16", 16, true);
      case 3:
        return element("f16", 16, true);
      case 4:
        return element("f32", 32, true);
      case 5:
        return element("f64", 64, true);
      case 6:
        return element("f8E4M3FN", 8, true);
      case 7:
        return element("f8E5M2", 8, true);
      case 8: {
        auto t = std::make_shared<BType>();
        t->kind = BType::Kind::Function;
        t->inputs = type_list(c);
        t->outputs = type_list(c);
        return t;
      }
      case 9:
        return element("index", 64);
      case 10:
        return element("i4", 4);
      case 11:
        return element("i8", 8);
      case 12:
        return element("i16", 16);
      case 13:
        return element("i32", 32);
      case 14:
        return element("i64", 64);
      case 15:
        return element("ui4", 4);
      case 16:
        return element("ui8", 8);
      case 17:
        return element("ui16", 16);
      case 18:
        return element("ui32", 32);
      case 19:
        return element("ui64", 64);
      case 20:
        return tensor(c, false, false);
      case 21:
        return tensor(c, true, false);
      case 22: {
        auto t = std::make_shared<BType>();
        t->kind = BType::Kind::Token;
        return t;
      }
      case 23: {
        auto t = std::make_shared<BType>();
        t->kind = BType::Kind::Tuple;
        t->inputs = type_list(c);
        return t;
      }
      case 24:
      case 30:
        return quantized(c, code == 30);
      case 25: {
        auto t = std::make_shared<BType>();
        t->kind = BType::Kind::Unranked;
        t->element = type_ref(c);
        return t;
      }
      case 27:
        return element("f8E4M3FNUZ", 8, true);
      case 28:
        return element("f8E5M2FNUZ", 8, true);
      case 29:
        return element("f8E4M3B11FNUZ", 8, true);
      case 31:
        return element("i2", 2);
      case 32:
        return element("ui2", 2);
      case 33: {
        auto t = std::make_shared<BType>();
        t->kind = BType::Kind::None;
        return t;
      }
      case 34:
        return element("tf32", 19, true);
      case 35:
        return element("f8E4M3", 8, true);
      case 36:
        return element("f8E3M4", 8, true);
      case 37:
        return element("f4E2M1FN", 4, true);
      case 38:
        return element("f6E2M3FN", 6, true);
      case 39:
        return element("f6E3M2FN", 6, true);
      case 40:
        return element("f8E8M0FNU", 8, true);
      default:
        // 26 witness, 41 buffer, 42 future: not in cujax's IR yet.
        ctx_.fail(at, "VHLO type code " + std::to_string(code) + " (producer " + producer_ +
                          ") is not supported by cujax");
    }
  }

  // !quant.uniform<i8:f32, 0.5:-3> (per tensor) or <i8<-127:127>:f32:1, {0.5:-3, ...}> (per axis).
  TypeRef quantized(Cursor& c, bool per_axis) {
    const uint64_t flags = c.varint();
    auto storage = type_ref(c), expressed = type_ref(c);
    if (storage->kind != BType::Kind::Element || storage->is_float || storage->bits < 2 ||
        storage->bits > 32 || expressed->kind != BType::Kind::Element || !expressed->is_float)
      c.fail("quantized type of unsupported storage or expressed type");
    std::vector<uint64_t> scales;
    std::vector<int64_t> zero_points;
    uint64_t axis = 0;
    int64_t lo = 0, hi = 0;
    if (per_axis) {
      axis = c.varint();
      lo = c.svarint();
      hi = c.svarint();
      const uint64_t n = c.count();
      for (uint64_t i = 0; i < n; ++i) scales.push_back(static_cast<uint64_t>(c.svarint()));
      const uint64_t m = c.count();
      for (uint64_t i = 0; i < m; ++i) zero_points.push_back(c.svarint());
    } else {
      scales.push_back(static_cast<uint64_t>(c.svarint()));
      zero_points.push_back(c.svarint());
      lo = c.svarint();
      hi = c.svarint();
    }
    const bool is_signed = flags & 1;
    const int bits = storage->bits;
    const int64_t dlo = is_signed ? -(int64_t(1) << (bits - 1)) : 0;
    const int64_t dhi = is_signed ? (int64_t(1) << (bits - 1)) - 1 : (int64_t(1) << bits) - 1;
    std::string s = "!quant.uniform<" + std::string(is_signed ? "i" : "u") + std::to_string(bits);
    if (lo != dlo || hi != dhi) s += "<" + std::to_string(lo) + ":" + std::to_string(hi) + ">";
    s += ":" + expressed->elem;
    if (per_axis)
      s += ":" + std::to_string(axis) + ", {";
    else
      s += ", ";
    for (size_t i = 0; i < scales.size(); ++i)
      s += (i ? ", " : "") + asm_util::format_float(scales[i], DType::F64) + ":" +
           std::to_string(i < zero_points.size() ? zero_points[i] : 0);
    s += per_axis ? "}>" : ">";
    auto t = element(s, bits);
    return t;
  }

  TypeRef builtin_type(Cursor& c, uint64_t code, size_t at) {
    switch (code) {
      case 0: {
        const uint64_t ws = c.varint();
        const uint64_t width = ws >> 2, sign = ws & 3;
        if (width == 0 || width > 64) c.fail("integer type width " + std::to_string(width));
        const std::string prefix = sign == 2 ? "ui" : sign == 1 ? "si" : "i";
        return element(prefix + std::to_string(width), static_cast<int>(width));
      }
      case 1:
        return element("index", 64);
      case 2: {
        auto t = std::make_shared<BType>();
        t->kind = BType::Kind::Function;
        t->inputs = type_list(c);
        t->outputs = type_list(c);
        return t;
      }
      case 3:
        return element("bf16", 16, true);
      case 4:
        return element("f16", 16, true);
      case 5:
        return element("f32", 32, true);
      case 6:
        return element("f64", 64, true);
      case 9:
        return complex_of(type_ref(c));
      case 12: {
        auto t = std::make_shared<BType>();
        t->kind = BType::Kind::None;
        return t;
      }
      case 13:
        return tensor(c, false, true);
      case 14:
        return tensor(c, true, true);
      case 15: {
        auto t = std::make_shared<BType>();
        t->kind = BType::Kind::Tuple;
        t->inputs = type_list(c);
        return t;
      }
      default:
        ctx_.fail(at, "builtin type code " + std::to_string(code) + " is not supported");
    }
  }

  AttrRef custom_attr(Cursor& c, size_t dialect) {
    const std::string_view d = dialects_[dialect];
    const size_t at = c.pos;
    const uint64_t code = c.varint();
    if (d == "vhlo") return vhlo_attr(c, code, at);
    if (d == "builtin") return builtin_attr(c, code, at);
    ctx_.fail(
        at,
        "attribute of dialect '" + std::string(d) + "' (producer " + producer_ +
            ") is not supported: cujax reads VHLO and builtin attributes, not Shardy's or others'");
  }

  AttrRef make(BAttr::Kind k) {
    auto a = std::make_shared<BAttr>();
    a->kind = k;
    return a;
  }

  std::shared_ptr<BAttr> enum_attr(Cursor& c, const char* kind, std::vector<const char*> names) {
    const size_t at = c.pos;
    const uint64_t v = c.varint();
    if (v >= names.size() || !names[v])
      ctx_.fail(at, std::string("bad ") + kind + " value " + std::to_string(v));
    auto a = std::make_shared<BAttr>();
    a->kind = BAttr::Kind::Enum;
    a->text = kind;
    a->enum_value = names[v];
    return a;
  }

  AttrRef vhlo_attr(Cursor& c, uint64_t code, size_t at) {
    using K = BAttr::Kind;
    switch (code) {
      case 1: {
        auto a = std::make_shared<BAttr>();
        a->kind = K::Array;
        a->elements = attr_list(c);
        return a;
      }
      case 2: {
        const uint64_t v = c.varint();
        if (v > 1) c.fail("boolean value " + std::to_string(v));
        auto a = std::make_shared<BAttr>();
        a->kind = K::Bool;
        a->boolean = v == 1;
        return a;
      }
      case 3:
        return enum_attr(c, "comparison_direction", {"EQ", "NE", "GE", "GT", "LE", "LT"});
      case 4:
        return enum_attr(c, "comparison_type",
                         {"NOTYPE", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"});
      case 5:
        return enum_attr(
            c, "custom_call_api_version",
            {"API_VERSION_UNSPECIFIED", "API_VERSION_ORIGINAL", "API_VERSION_STATUS_RETURNING",
             "API_VERSION_STATUS_RETURNING_UNIFIED", "API_VERSION_TYPED_FFI"});
      case 6: {
        auto a = std::make_shared<BAttr>();
        a->kind = K::Dict;
        const uint64_t n = c.count();
        for (uint64_t i = 0; i < n; ++i) {
          auto name = attr_ref(c);
          auto value = attr_ref(c);
          a->entries.emplace_back(name, value);
        }
        return a;
      }
      case 7:
        return enum_attr(c, "fft_type", {"FFT", "IFFT", "RFFT", "IRFFT"});
      case 8:
      case 9: {
        auto a = std::make_shared<BAttr>();
        a->kind = code == 8 ? K::Float : K::Int;
        a->type = type_ref(c);
        if (a->type->kind != BType::Kind::Element) c.fail("number attribute of a non-scalar type");
        a->bits = apint(c, a->type->bits);
        return a;
      }
      case 10: {
        auto a = std::make_shared<BAttr>();
        a->kind = K::OutputOperandAlias;
        a->ints = svarints(c);
        a->index = c.svarint();
        a->ints2 = svarints(c);
        return a;
      }
      case 11:
        return enum_attr(c, "precision", {"DEFAULT", "HIGH", "HIGHEST"});
      case 12:
        return enum_attr(c, "rng_algorithm", {"DEFAULT", "THREE_FRY", "PHILOX"});
      case 13:
        return enum_attr(c, "rng_distribution", {nullptr, "UNIFORM", "NORMAL"});
      case 14: {
        auto a = std::make_shared<BAttr>();
        a->kind = K::String;
        a->text = std::string(string_at(c));
        return a;
      }
      case 15: {
        auto a = std::make_shared<BAttr>();
        a->kind = K::Tensor;
        a->type = type_ref(c);
        if (a->type->kind != BType::Kind::Tensor) c.fail("tensor attribute of a non-tensor type");
        a->blob = std::string(c.bytes(c.varint()));
        return a;
      }
      case 16:
        return enum_attr(c, "transpose",
                         {"TRANSPOSE_INVALID", "NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"});
      case 17: {
        auto a = std::make_shared<BAttr>();
        a->kind = K::TypeA;
        a->type = type_ref(c);
        return a;
      }
      case 18: {
        auto a = std::make_shared<BAttr>();
        a->kind = K::TypeExtensions;
        a->ints = svarints(c);
        return a;
      }
      case 19:
        return enum_attr(c, "result_accuracy_mode", {"DEFAULT", "HIGHEST", "TOLERANCE"});
      case 20: {  // ResultAccuracyV1Attr: atol, rtol (f64 bits), ulps, mode
        auto a = std::make_shared<BAttr>();
        a->kind = K::ResultAccuracy;
        a->bits = static_cast<uint64_t>(c.svarint());
        a->ints.push_back(c.svarint());
        a->index = c.svarint();
        a->elements.push_back(attr_ref(c));
        if (a->elements[0]->kind != K::Enum || a->elements[0]->text != "result_accuracy_mode")
          c.fail("result accuracy without its mode");
        return a;
      }
      default:
        ctx_.fail(at, "VHLO attribute code " + std::to_string(code) + " (producer " + producer_ +
                          ") is not supported by cujax");
    }
  }

  AttrRef builtin_attr(Cursor& c, uint64_t code, size_t at) {
    using K = BAttr::Kind;
    auto a = std::make_shared<BAttr>();
    a->is_builtin = true;
    switch (code) {
      case 0:
        a->kind = K::Array;
        a->elements = attr_list(c);
        return a;
      case 1: {
        a->kind = K::Dict;
        const uint64_t n = c.count();
        for (uint64_t i = 0; i < n; ++i) {
          auto name = attr_ref(c);
          auto value = attr_ref(c);
          a->entries.emplace_back(name, value);
        }
        return a;
      }
      case 2:
        a->kind = K::String;
        a->text = std::string(string_at(c));
        return a;
      case 4: {
        auto root = attr_ref(c);
        if (root->kind != K::String) c.fail("symbol reference without a string");
        a->kind = K::Symbol;
        a->text = root->text;
        return a;
      }
      case 6:
        a->kind = K::TypeA;
        a->type = type_ref(c);
        return a;
      case 7:
        a->kind = K::Unit;
        return a;
      case 8:
      case 9:
        a->kind = code == 8 ? K::Int : K::Float;
        a->type = type_ref(c);
        if (a->type->kind != BType::Kind::Element) c.fail("number attribute of a non-scalar type");
        a->bits = apint(c, a->type->bits);
        return a;
      case 10: {  // CallSiteLoc
        auto callee = attr_ref(c), caller = attr_ref(c);
        a->kind = K::Location;
        a->text = "callsite(" + callee->text + " at " + caller->text + ")";
        return a;
      }
      case 11: {  // FileLineColLoc
        auto file = attr_ref(c);
        const uint64_t line = c.varint(), col = c.varint();
        a->kind = K::Location;
        a->text = "\"" + file->text + "\":" + std::to_string(line) + ":" + std::to_string(col);
        return a;
      }
      case 12:
      case 13: {  // FusedLoc
        auto locs = attr_list(c);
        if (code == 13) attr_ref(c);
        a->kind = K::Location;
        a->text = "fused[";
        for (size_t i = 0; i < locs.size(); ++i) a->text += (i ? ", " : "") + locs[i]->text;
        a->text += "]";
        return a;
      }
      case 14: {  // NameLoc
        auto name = attr_ref(c), child = attr_ref(c);
        a->kind = K::Location;
        a->text =
            "\"" + name->text + "\"" + (child->text == "unknown" ? "" : "(" + child->text + ")");
        return a;
      }
      case 15:
        a->kind = K::Location;
        a->text = "unknown";
        return a;
      case 22: {  // FileLineColRange (newer MLIR): a file and 0 to 4 of line, column, end...
        auto file = attr_ref(c);
        const uint64_t n = c.varint();
        if (n > 4) c.fail("file location range of " + std::to_string(n) + " numbers");
        uint64_t lc[4] = {0, 0, 0, 0};
        for (uint64_t i = 0; i < n; ++i) lc[i] = c.varint();
        a->kind = K::Location;
        a->text = "\"" + file->text + "\":" + std::to_string(lc[0]) + ":" + std::to_string(lc[1]);
        return a;
      }
      case 17: {
        a->kind = K::DenseArray;
        a->type = type_ref(c);
        a->index = static_cast<int64_t>(c.varint());
        a->blob = std::string(c.bytes(c.varint()));
        return a;
      }
      case 18:
        a->kind = K::Tensor;
        a->type = type_ref(c);
        if (a->type->kind != BType::Kind::Tensor) c.fail("dense elements of a non-tensor type");
        a->blob = std::string(c.bytes(c.varint()));
        return a;
      default:
        ctx_.fail(at, "builtin attribute code " + std::to_string(code) + " is not supported");
    }
  }

  // ---- IR ------------------------------------------------------------------------------------
  int64_t slot(Scope& s, uint64_t index, size_t at) {
    if (index >= s.values.size())
      fail(at, "value index " + std::to_string(index) + " out of range");
    if (s.values[index] < 0) s.values[index] = next_value_++;
    return s.values[index];
  }
  void define(Scope& s, std::vector<int64_t>& ids, size_t n, size_t at) {
    if (s.next.empty()) fail(at, "value defined outside a region");
    size_t& next = s.next.back();
    if (n > s.values.size() - next) fail(at, "more values defined than the region declared");
    for (size_t i = 0; i < n; ++i) ids.push_back(slot(s, next++, at));
  }

  void use_lists(Cursor& c, uint64_t range) {
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

  void block_header(Cursor& c, BBlock& b, uint64_t& num_ops, int depth) {
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
    (void)depth;
    if (version_ < kUseListOrdering) return;
    const uint8_t has_orders = has_args ? c.byte() : 0;
    if (has_orders) use_lists(c, b.args.size());
  }

  void read_region(Cursor& c, BRegion& r, int depth) {
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
      block_header(c, *b, num_ops, depth);
      for (uint64_t i = 0; i < num_ops; ++i) b->ops.push_back(read_op(c, depth));
      r.blocks.push_back(std::move(b));
    }
    Scope& s2 = scopes_.back();
    s2.values.resize(s2.values.size() - num_values);
    s2.next.pop_back();
  }

  std::unique_ptr<BOp> read_op(Cursor& c, int depth) {
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

  // Native properties: VHLO ops store their attributes, all required, as attribute indices;
  // builtin.module stores its optional sym_name and sym_visibility.
  void read_properties_of(BOp& op, std::pair<size_t, size_t> range, size_t at) {
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
    } else {
      fail(at, "properties of op " + op.dialect + "." + op.name + " (producer " + producer_ +
                   ") cannot be read: cujax reads VHLO and builtin ops only");
    }
    if (!c.empty()) c.fail("trailing bytes in the properties of " + op.dialect + "." + op.name);
  }

  void read_ir(const Section& s, BModule& m) {
    Cursor c{&ctx_, s.begin, s.end};
    scopes_.emplace_back();
    BBlock top;
    uint64_t num_ops = 0;
    scopes_.back().next.push_back(0);
    block_header(c, top, num_ops, 0);
    for (uint64_t i = 0; i < num_ops; ++i) m.top.push_back(read_op(c, 1));
    if (!c.empty()) c.fail("trailing bytes in the IR section");
  }

  Ctx ctx_;
  uint64_t version_ = 0;
  std::string producer_;
  std::vector<std::string_view> strings_, dialects_;
  std::vector<OpName> op_names_;
  std::vector<std::pair<size_t, size_t>> props_;
  std::vector<Entry> attrs_, types_;
  std::vector<AttrRef> attr_cache_;
  std::vector<bool> attr_busy_;
  std::vector<TypeRef> type_cache_;
  std::vector<bool> type_busy_;
  std::vector<Scope> scopes_;
  int64_t next_value_ = 0;
  int depth_ = 0;
};

}  // namespace

BModule read_container(std::string_view bytes, std::string_view name,
                       std::unique_ptr<Container>* keep) {
  auto r = std::make_unique<Reader>(bytes, name);
  BModule m = r->read();
  if (keep) *keep = std::move(r);
  return m;
}

}  // namespace cujax::ir::bytecode
