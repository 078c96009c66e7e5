// Types and attributes in MLIR's spelling: dense literals, integer lists, #stablehlo structs
// (#stablehlo.conv in its compact form where it has one), dictionaries.
#include "ir/printer_attr.h"

#include <cstring>
#include <optional>

#include "cujax/core/dynamic_shape.h"
#include "cujax/ir/printer.h"
#include "ir/asm_util.h"

namespace cujax::ir::print_detail {

using namespace asm_util;
using Kind = Attribute::Kind;

void append_type(std::string& out, const Type& t) {
  if (t.is_token) {
    out += "!stablehlo.token";
    return;
  }
  out += "tensor<";
  for (int64_t d : t.shape) {
    out += d == kDynamicDim ? std::string("?") : std::to_string(d);
    out += 'x';
  }
  out += t.quantized ? t.quantized->str() : std::string(mlir_name(t.dtype));
  out += '>';
}

void append_symbol(std::string& out, std::string_view name) {
  out += '@';
  if (is_bare_identifier(name)) {
    out += name;
  } else {
    out += quote_string(name);
  }
}

void append_attr_name(std::string& out, std::string_view name) {
  if (is_bare_identifier(name)) {
    out += name;
  } else {
    out += quote_string(name);
  }
}

namespace {

// Element `i` of a tensor as MLIR prints it.
void append_element(std::string& out, const HostTensor& t, int64_t i) {
  const DType dt = t.dtype();
  const auto* base = static_cast<const std::byte*>(t.data()) + static_cast<size_t>(i) * size_of(dt);
  if (is_complex(dt)) {  // (re,im), as MLIR prints complex elements
    const DType part = complex_component(dt);
    const size_t half = size_of(part);
    uint64_t re = 0, im = 0;
    std::memcpy(&re, base, half);
    std::memcpy(&im, base + half, half);
    out += '(';
    out += format_float(re, part);
    out += ',';
    out += format_float(im, part);
    out += ')';
    return;
  }
  uint64_t bits = 0;
  std::memcpy(&bits, base, size_of(dt));
  if (dt == DType::Bool) {
    out += bits & 0xff ? "true" : "false";
  } else if (is_float(dt)) {
    out += format_float(bits, dt);
  } else if (is_narrow_int(dt)) {
    out += std::to_string(narrow_int_to_int64(dt, static_cast<uint8_t>(bits)));
  } else if (is_unsigned_int(dt)) {
    out += std::to_string(bits);
  } else {
    const int w = bit_width(dt);
    const uint64_t sign = w >= 64 ? 0 : uint64_t{1} << (w - 1);
    const int64_t v =
        w >= 64 ? static_cast<int64_t>(bits) : static_cast<int64_t>((bits ^ sign) - sign);
    out += std::to_string(v);
  }
}

void append_dense_list(std::string& out, const HostTensor& t, size_t dim, int64_t& next) {
  out += '[';
  const int64_t n = t.shape()[dim];
  for (int64_t i = 0; i < n; ++i) {
    if (i) out += ", ";
    if (dim + 1 < t.shape().size()) {
      append_dense_list(out, t, dim + 1, next);
    } else {
      append_element(out, t, next++);
    }
  }
  out += ']';
}

// `type`: the literal's type where it is not the tensor's own (a quantized type).
void append_dense(std::string& out, const HostTensor& t, const std::optional<Type>& type) {
  out += "dense<";
  const int64_t n = t.size();
  const size_t esize = size_of(t.dtype());
  const auto* p = static_cast<const std::byte*>(t.data());
  bool splat = n > 0;
  for (int64_t i = 1; splat && i < n; ++i)
    splat = std::memcmp(p, p + static_cast<size_t>(i) * esize, esize) == 0;
  if (n == 0) {
    // dense<>
  } else if (splat) {
    append_element(out, t, 0);
  } else if (n > 100) {
    static const char* kHex = "0123456789ABCDEF";
    out += "\"0x";
    const size_t nbytes = t.nbytes();
    const size_t start = out.size();
    out.resize(start + 2 * nbytes);
    for (size_t i = 0; i < nbytes; ++i) {
      const auto b = static_cast<unsigned>(p[i]);
      out[start + 2 * i] = kHex[b >> 4];
      out[start + 2 * i + 1] = kHex[b & 15];
    }
    out += '"';
  } else {
    int64_t next = 0;
    append_dense_list(out, t, 0, next);
  }
  out += "> : ";
  append_type(out, type ? *type : Type::tensor(t.shape(), t.dtype()));
}

}  // namespace

bool is_int_list(const Attribute& a) {
  if (a.kind != Kind::Array) return false;
  for (const auto& e : a.elements)
    if (e->kind != Kind::Integer || e->dtype) return false;
  return true;
}

void append_int_list(std::string& out, const std::vector<int64_t>& v) {
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(v[i]);
  }
  out += ']';
}

std::vector<int64_t> list_values(const Attribute& a) {
  std::vector<int64_t> v;
  for (const auto& e : a.elements) v.push_back(e->integer);
  return v;
}

// The compact `[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]` spelling of #stablehlo.conv, when the
// struct has exactly the canonical fields and each list is a permutation.
bool conv_compact(const Attribute& a, std::string* out) {
  static constexpr std::string_view kFields[] = {
      "input_batch_dimension",           "input_feature_dimension",
      "input_spatial_dimensions",        "kernel_input_feature_dimension",
      "kernel_output_feature_dimension", "kernel_spatial_dimensions",
      "output_batch_dimension",          "output_feature_dimension",
      "output_spatial_dimensions"};
  if (a.fields.size() != 9) return false;
  for (size_t i = 0; i < 9; ++i) {
    const auto& f = a.fields[i];
    if (f.name != kFields[i]) return false;
    const bool list = i % 3 == 2;
    if (list ? !is_int_list(*f.value) : (f.value->kind != Kind::Integer || f.value->dtype))
      return false;
  }
  std::string s;
  const char letters[3][2] = {{'b', 'f'}, {'i', 'o'}, {'b', 'f'}};
  for (int g = 0; g < 3; ++g) {
    const int64_t d0 = a.fields[3 * g].value->integer;
    const int64_t d1 = a.fields[3 * g + 1].value->integer;
    const std::vector<int64_t> sp = list_values(*a.fields[3 * g + 2].value);
    const int64_t n = static_cast<int64_t>(sp.size()) + 2;
    std::vector<std::string> slots(static_cast<size_t>(n));
    auto put = [&](int64_t pos, std::string v) {
      if (pos < 0 || pos >= n || !slots[pos].empty()) return false;
      slots[pos] = std::move(v);
      return true;
    };
    if (!put(d0, std::string(1, letters[g][0])) || !put(d1, std::string(1, letters[g][1])))
      return false;
    for (size_t k = 0; k < sp.size(); ++k)
      if (!put(sp[k], std::to_string(k))) return false;
    if (g == 1) s += "x";
    if (g == 2) s += "->";
    s += '[';
    for (int64_t i = 0; i < n; ++i) {
      if (i) s += ", ";
      s += slots[i];
    }
    s += ']';
  }
  if (out) *out = std::move(s);
  return true;
}

void append_attr(std::string& out, const Attribute& a);

void append_dict_body(std::string& out, const std::vector<NamedAttribute>& fields) {
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) out += ", ";
    append_attr_name(out, fields[i].name);
    if (fields[i].value && fields[i].value->kind != Kind::Unit) {
      out += " = ";
      append_attr(out, *fields[i].value);
    }
  }
}

namespace {

void append_scalar_float(std::string& out, double v, DType t) {
  out += format_float(float_bits_from_double(v, t), t);
}

}  // namespace

void append_attr(std::string& out, const Attribute& a) {
  switch (a.kind) {
    case Kind::Unit:
      out += "unit";
      return;
    case Kind::Bool:
      out += a.boolean ? "true" : "false";
      return;
    case Kind::Integer:
      if (a.dtype && *a.dtype == DType::U64) {
        out += std::to_string(static_cast<uint64_t>(a.integer));
      } else {
        out += std::to_string(a.integer);
      }
      if (a.dtype) {
        out += " : ";
        out += mlir_name(*a.dtype);
      }
      return;
    case Kind::Float:
      if (a.dtype && is_float(*a.dtype)) {
        append_scalar_float(out, a.floating, *a.dtype);
        out += " : ";
        out += mlir_name(*a.dtype);
      } else {
        append_scalar_float(out, a.floating, DType::F64);
      }
      return;
    case Kind::String:
      out += quote_string(a.text);
      return;
    case Kind::Symbol:
      append_symbol(out, a.text);
      return;
    case Kind::TypeAttr:
      if (a.type) {
        append_type(out, *a.type);
      } else {
        out += "none";
      }
      return;
    case Kind::Array:
      out += '[';
      for (size_t i = 0; i < a.elements.size(); ++i) {
        if (i) out += ", ";
        append_attr(out, *a.elements[i]);
      }
      out += ']';
      return;
    case Kind::DenseArray: {
      const DType dt = a.dtype.value_or(DType::I64);
      out += "array<";
      out += mlir_name(dt);
      const size_t n = is_float(dt) ? a.floats.size() : a.ints.size();
      if (n) out += ": ";
      for (size_t i = 0; i < n; ++i) {
        if (i) out += ", ";
        if (is_float(dt)) {
          append_scalar_float(out, a.floats[i], dt);
        } else if (dt == DType::Bool) {
          out += a.ints[i] ? "true" : "false";
        } else if (dt == DType::U64) {
          out += std::to_string(static_cast<uint64_t>(a.ints[i]));
        } else {
          out += std::to_string(a.ints[i]);
        }
      }
      out += '>';
      return;
    }
    case Kind::DenseElements:
      append_dense(out, a.tensor, a.type);
      return;
    case Kind::Dictionary:
      out += '{';
      append_dict_body(out, a.fields);
      out += '}';
      return;
    case Kind::Enum:
      out += "#stablehlo<";
      out += a.text;
      out += ' ';
      out += a.enum_value;
      out += '>';
      return;
    case Kind::Struct: {
      out += '#';
      out += a.text;
      out += '<';
      std::string compact;
      if (a.text == "stablehlo.conv") {
        if (conv_compact(a, &compact)) {
          out += compact;
        } else {
          out += "raw ";
          append_dict_body(out, a.fields);
        }
      } else {
        append_dict_body(out, a.fields);
      }
      out += '>';
      return;
    }
    case Kind::Opaque:
      out += a.text;
      return;
  }
}

}  // namespace cujax::ir::print_detail

namespace cujax::ir {

std::string print_type(const Type& type) {
  std::string s;
  print_detail::append_type(s, type);
  return s;
}

std::string print_attribute(const Attribute& attr) {
  std::string s;
  print_detail::append_attr(s, attr);
  return s;
}

}  // namespace cujax::ir
