// The attribute and type encodings of MLIR bytecode: the builtin dialect's (LLVM's
// BuiltinDialectBytecode.td) and VHLO's (StableHLO's VhloBytecode.cpp codes), mapped to the
// terms StableHLO prints.
#include "reader.h"

namespace cujax::ir::bytecode::detail {

using K = BAttr::Kind;

AttrRef Reader::attr_ref(Cursor& c) {
  const size_t at = c.pos;
  return attribute(c.varint(), at);
}

TypeRef Reader::type_ref(Cursor& c) {
  const size_t at = c.pos;
  return type(c.varint(), at);
}

std::vector<AttrRef> Reader::attr_list(Cursor& c) {
  std::vector<AttrRef> v;
  const uint64_t n = c.count();
  for (uint64_t i = 0; i < n; ++i) v.push_back(attr_ref(c));
  return v;
}

std::vector<std::pair<AttrRef, AttrRef>> Reader::attr_entries(Cursor& c) {
  std::vector<std::pair<AttrRef, AttrRef>> v;
  const uint64_t n = c.count();
  for (uint64_t i = 0; i < n; ++i) {
    AttrRef name = attr_ref(c);  // named first: the name precedes the value in the bytes
    v.emplace_back(std::move(name), attr_ref(c));
  }
  return v;
}

std::vector<TypeRef> Reader::type_list(Cursor& c) {
  std::vector<TypeRef> v;
  const uint64_t n = c.count();
  for (uint64_t i = 0; i < n; ++i) v.push_back(type_ref(c));
  return v;
}

std::vector<int64_t> Reader::svarints(Cursor& c) {
  std::vector<int64_t> v;
  const uint64_t n = c.count();
  for (uint64_t i = 0; i < n; ++i) v.push_back(c.svarint());
  return v;
}

uint64_t Reader::apint(Cursor& c, int bits) {
  if (bits <= 0) c.fail("integer attribute of a type without a width");
  if (bits <= 8) return c.byte();
  if (bits <= 64) return static_cast<uint64_t>(c.svarint());
  c.fail("integers wider than 64 bits are not supported");
}

AttrRef Reader::asm_attr(Cursor& c) {
  auto a = std::make_shared<BAttr>();
  a->kind = BAttr::Kind::Verbatim;
  a->text = std::string(c.cstring());
  return a;
}

std::shared_ptr<BType> Reader::element(std::string name, int bits, bool is_float) {
  auto t = std::make_shared<BType>();
  t->kind = BType::Kind::Element;
  t->elem = std::move(name);
  t->bits = bits;
  t->is_float = is_float;
  return t;
}

TypeRef Reader::complex_of(const TypeRef& part) {
  auto t = std::make_shared<BType>();
  t->kind = BType::Kind::Element;
  t->elem = "complex<" + part->elem + ">";
  t->bits = part->bits * 2;
  t->is_complex = true;
  t->element = part;
  return t;
}

TypeRef Reader::custom_type(Cursor& c, size_t dialect) {
  const std::string_view d = dialects_[dialect];
  const size_t at = c.pos;
  const uint64_t code = c.varint();
  if (d == "vhlo") return vhlo_type(c, code, at);
  if (d == "builtin") return builtin_type(c, code, at);
  ctx_.fail(at, "type of dialect '" + std::string(d) + "' is not supported");
}

TypeRef Reader::tensor(Cursor& c, bool with_encoding) {
  auto t = std::make_shared<BType>();
  t->kind = BType::Kind::Tensor;
  if (with_encoding) {
    auto enc = attr_ref(c);
    t->encoding = encoding_text(*enc, c.pos);
  }
  t->shape = svarints(c);
  t->element = type_ref(c);
  if (t->element->kind != BType::Kind::Element) c.fail("tensor of a non-element type");
  return t;
}

std::string Reader::encoding_text(const BAttr& a, size_t at) {
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

TypeRef Reader::vhlo_type(Cursor& c, uint64_t code, size_t at) {
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
      return tensor(c, false);
    case 21:
      return tensor(c, true);
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

TypeRef Reader::quantized(Cursor& c, bool per_axis) {
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

TypeRef Reader::builtin_type(Cursor& c, uint64_t code, size_t at) {
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
      return tensor(c, false);
    case 14:
      return tensor(c, true);
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

AttrRef Reader::custom_attr(Cursor& c, size_t dialect) {
  const std::string_view d = dialects_[dialect];
  const size_t at = c.pos;
  const uint64_t code = c.varint();
  if (d == "vhlo") return vhlo_attr(c, code, at);
  if (d == "builtin") return builtin_attr(c, code, at);
  if (d == "sdy") return sdy_attr(c, code, at);
  ctx_.fail(at, "attribute of dialect '" + std::string(d) + "' (producer " + producer_ +
                    ") is not supported: cujax reads VHLO, builtin and Shardy (sdy) attributes");
}

std::shared_ptr<BAttr> Reader::enum_attr(Cursor& c, const char* kind,
                                         std::vector<const char*> names) {
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

AttrRef Reader::vhlo_attr(Cursor& c, uint64_t code, size_t at) {
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
      a->entries = attr_entries(c);
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

AttrRef Reader::builtin_attr(Cursor& c, uint64_t code, size_t at) {
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
      a->entries = attr_entries(c);
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

}  // namespace cujax::ir::bytecode::detail
