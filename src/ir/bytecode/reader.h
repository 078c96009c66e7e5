// The bytecode reader's internals, shared by container.cpp (sections and IR) and attr_type.cpp
// (the attribute and type encodings).
#pragma once

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>
#include "../asm_util.h"
#include "container.h"
#include "cujax/core/error.h"
#include "vhlo_ops.h"

namespace cujax::ir::bytecode::detail {

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
inline uint8_t read_section(Cursor& c, Section& s) {
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

  BModule read();

  AttrRef attribute(uint64_t index, size_t at) override;

  TypeRef type(uint64_t index, size_t at);

 private:
  // ---- strings, dialects, properties -------------------------------------------------------
  void read_strings(const Section& s);
  std::string_view string_at(Cursor& c);

  void read_properties(const Section& s);

  void read_dialects(const Section& s);
  size_t dialect_index(Cursor& c);

  void read_attr_type_offsets(const Section& data, const Section& offsets);

  // ---- attributes and types (attr_type.cpp) --------------------------------------------

  AttrRef attr_ref(Cursor& c);

  TypeRef type_ref(Cursor& c);

  std::vector<AttrRef> attr_list(Cursor& c);
  // A dictionary's (name, value) pairs: a count, then each name and value reference.
  std::vector<std::pair<AttrRef, AttrRef>> attr_entries(Cursor& c);

  std::vector<TypeRef> type_list(Cursor& c);

  std::vector<int64_t> svarints(Cursor& c);
  // APInt of a known width: one byte up to 8 bits, a signed varint up to 64.

  uint64_t apint(Cursor& c, int bits);

  AttrRef asm_attr(Cursor& c);

  static std::shared_ptr<BType> element(std::string name, int bits, bool is_float = false);

  static TypeRef complex_of(const TypeRef& part);

  TypeRef custom_type(Cursor& c, size_t dialect);

  TypeRef tensor(Cursor& c, bool with_encoding);

  std::string encoding_text(const BAttr& a, size_t at);

  TypeRef vhlo_type(Cursor& c, uint64_t code, size_t at);
  // !quant.uniform<i8:f32, 0.5:-3> (per tensor) or <i8<-127:127>:f32:1, {0.5:-3, ...}> (per axis).

  TypeRef quantized(Cursor& c, bool per_axis);

  TypeRef builtin_type(Cursor& c, uint64_t code, size_t at);

  AttrRef custom_attr(Cursor& c, size_t dialect);

  std::shared_ptr<BAttr> enum_attr(Cursor& c, const char* kind, std::vector<const char*> names);

  AttrRef vhlo_attr(Cursor& c, uint64_t code, size_t at);

  AttrRef builtin_attr(Cursor& c, uint64_t code, size_t at);

  // Shardy's attributes (sdy_attrs.cpp), by the codes of Shardy's bytecode.td.
  AttrRef sdy_attr(Cursor& c, uint64_t code, size_t at);
  AttrRef sdy_ref(Cursor& c, const char* mnemonic);
  std::string sdy_list(Cursor& c, const char* mnemonic);

  // ---- IR ------------------------------------------------------------------------------------
  int64_t slot(Scope& s, uint64_t index, size_t at);
  void define(Scope& s, std::vector<int64_t>& ids, size_t n, size_t at);

  void use_lists(Cursor& c, uint64_t range);

  void block_header(Cursor& c, BBlock& b, uint64_t& num_ops);

  void read_region(Cursor& c, BRegion& r, int depth);

  std::unique_ptr<BOp> read_op(Cursor& c, int depth);

  // Native properties: VHLO ops store their attributes, all required, as attribute indices;
  // builtin.module stores its optional sym_name and sym_visibility.
  void read_properties_of(BOp& op, std::pair<size_t, size_t> range, size_t at);

  void read_ir(const Section& s, BModule& m);

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

}  // namespace cujax::ir::bytecode::detail
