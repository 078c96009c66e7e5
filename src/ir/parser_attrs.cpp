// The parser's attributes: numbers, #stablehlo structs, #stablehlo.conv in its compact form,
// dense arrays and dense literals with their splat budget (parser_state.h).
#include "ir/parser_state.h"

namespace cujax::ir::parse_detail {

std::vector<NamedAttribute> Parser::parse_dict() {
  ws();
  const size_t at = pos_;
  DepthGuard g(*this, at);
  expect('{', "to start an attribute dictionary");
  std::vector<NamedAttribute> out;
  if (consume('}')) return out;
  do {
    std::string name = parse_attr_name();
    AttrRef v = consume('=') ? parse_attribute() : Attribute::unit();
    out.push_back({std::move(name), std::move(v)});
  } while (consume(','));
  expect('}', "to close the attribute dictionary");
  check_unique(out, at, "attribute dictionary");
  return out;
}

AttrRef Parser::parse_attribute() {
  ws();
  const size_t at = pos_;
  DepthGuard g(*this, at);
  const char c = cur();
  if (c == '[') {
    ++pos_;
    std::vector<AttrRef> elems;
    if (!consume(']')) {
      do {
        elems.push_back(parse_attribute());
      } while (consume(','));
      expect(']', "to close the array attribute");
    }
    return Attribute::array(std::move(elems));
  }
  if (c == '{') {
    auto a = std::make_shared<Attribute>();
    a->kind = Attribute::Kind::Dictionary;
    a->fields = parse_dict();
    return a;
  }
  if (c == '"') return Attribute::string_attr(parse_string());
  if (c == '@') {
    std::string s = parse_symbol();
    if (cur() == ':' && peek(1) == ':') {  // nested reference @a::@b: keep as written
      while (cur() == ':' && peek(1) == ':') {
        pos_ += 2;
        parse_symbol();
      }
      return Attribute::opaque(std::string(src_.substr(at, pos_ - at)));
    }
    return Attribute::symbol(std::move(s));
  }
  if (c == '#') return parse_hash_attr();
  if (c == '!') {
    if (src_.substr(pos_, 16) == "!stablehlo.token") {
      const size_t save = pos_;
      try {
        return Attribute::type_attr(parse_type());
      } catch (const ParseError&) {
        pos_ = save;
      }
    }
    skip_type_text();
    return Attribute::opaque(std::string(src_.substr(at, pos_ - at)));
  }
  if (c == '-' || is_digit(c)) return parse_number_attr();
  std::string_view w = peek_ident();
  if (w.empty()) fail(at, "expected attribute value, found " + found());
  const char after = pos_ + w.size() < src_.size() ? src_[pos_ + w.size()] : '\0';
  if (w == "true" || w == "false") {
    pos_ += w.size();
    return Attribute::boolean_attr(w == "true");
  }
  if (w == "unit") {
    pos_ += w.size();
    return Attribute::unit();
  }
  if (w == "dense" && after == '<') return parse_dense(false);
  if (w == "array" && after == '<') {
    pos_ += w.size();
    return parse_dense_array();
  }
  if (w == "tensor" && after == '<') {
    try {
      return Attribute::type_attr(parse_type());
    } catch (const ParseError&) {
      pos_ = at;
      skip_type_text();
      return Attribute::opaque(std::string(src_.substr(at, pos_ - at)));
    }
  }
  if (w == "loc" && after == '(') return Attribute::opaque(parse_loc());
  if (after == '<' || is_type_keyword(w)) {
    // affine_map<...>, dense_resource<...> : type, complex<f32>, f32, index, ...
    pos_ += w.size();
    if (cur() == '<') pos_ = skip_balanced(pos_);
    if (w == "dense_resource" || w == "sparse" || w == "opaque") {
      const size_t save = pos_;
      if (consume(':')) {
        skip_type_text();
      } else {
        pos_ = save;
      }
    }
    return Attribute::opaque(std::string(src_.substr(at, pos_ - at)));
  }
  fail(at, "expected attribute value, found " + found());
}

AttrRef Parser::parse_number_attr() {
  NumTok t;
  if (!scan_number(&t)) fail(pos_, "expected number, found " + found());
  const size_t save = pos_;
  ws();
  if (cur() == ':' && peek(1) != ':') {
    ++pos_;
    ws();
    const size_t tpos = pos_;
    std::string_view tn = peek_ident();
    auto dt = dtype_from_mlir_name(tn);
    if (!dt) {
      if (!is_type_keyword(tn)) fail(tpos, "expected a scalar type after ':', found " + found());
      pos_ += tn.size();
      return Attribute::opaque(std::string(src_.substr(t.pos, pos_ - t.pos)));
    }
    pos_ += tn.size();
    if (is_float(*dt)) {
      const uint64_t bits = float_bits(t, *dt);
      return make_float_attr(double_from_float_bits(bits, *dt), *dt);
    }
    const uint64_t bits = int_bits(t, *dt);
    const int64_t v = is_unsigned_int(*dt) || *dt == DType::Bool
                          ? static_cast<int64_t>(bits)
                          : sign_extend(bits, bit_width(*dt));
    return Attribute::integer_attr(v, *dt);
  }
  pos_ = save;
  if (t.kind == NumKind::Float) {
    uint64_t bits = 0;
    if (!decimal_to_float_bits(t.text, DType::F64, &bits))
      fail(t.pos, "bad float literal " + quoted_text(t.text));
    return make_float_attr(double_from_float_bits(bits, DType::F64), std::nullopt);
  }
  if (t.overflow || (t.neg ? t.mag > (uint64_t{1} << 63) : t.mag > INT64_MAX))
    fail(t.pos, "integer " + std::string(t.text) + " is out of range for 64 bits");
  return Attribute::integer_attr(
      t.neg ? static_cast<int64_t>(~t.mag + 1) : static_cast<int64_t>(t.mag), std::nullopt);
}

AttrRef Parser::parse_hash_attr() {
  const size_t at = pos_;
  ++pos_;
  const size_t s = pos_;
  while (is_ident_char(cur())) ++pos_;
  std::string_view name = src_.substr(s, pos_ - s);
  if (name.empty()) fail(at, "expected attribute name after '#'");
  if (cur() != '<') return Attribute::opaque("#" + std::string(name));
  const size_t lt = pos_;
  const size_t end = skip_balanced(lt);
  auto opaque = [&] {
    pos_ = end;
    return Attribute::opaque(std::string(src_.substr(at, end - at)));
  };
  if (name == "stablehlo") {
    pos_ = lt + 1;
    std::string_view kind = peek_ident();
    pos_ += kind.size();
    std::string_view value = peek_ident();
    pos_ += value.size();
    ws();
    if (!kind.empty() && !value.empty() && pos_ == end - 1) {
      pos_ = end;
      return Attribute::enum_attr(std::string(kind), std::string(value));
    }
    return opaque();
  }
  for (std::string_view dialect : {std::string_view("stablehlo."), std::string_view("chlo.")}) {
    if (name.size() > dialect.size() && name.substr(0, dialect.size()) == dialect) {
      AttrRef r = try_parse_struct(dialect, name.substr(dialect.size()), lt + 1, end - 1);
      if (r) return r;
    }
  }
  return opaque();
}

AttrRef Parser::try_parse_struct(std::string_view dialect, std::string_view kind, size_t body_begin,
                                 size_t body_end) {
  const size_t save = pos_;
  try {
    pos_ = body_begin;
    AttrRef r;
    if (kind == "conv" && !consume_word("raw")) {
      r = parse_conv_dims();
    } else {
      std::vector<NamedAttribute> fields;
      ws();
      while (pos_ < body_end) {
        std::string key(ident("struct field name"));
        expect('=', "after struct field name");
        fields.push_back({std::move(key), parse_attribute()});
        ws();
        if (pos_ >= body_end) break;
        expect(',', "between struct fields");
        ws();
      }
      check_unique(fields, body_begin, "attribute");
      r = Attribute::struct_attr(std::string(dialect) + std::string(kind), std::move(fields));
    }
    ws();
    if (pos_ != body_end) {
      pos_ = save;
      return nullptr;
    }
    pos_ = body_end + 1;
    return r;
  } catch (const ParseError&) {
    pos_ = save;
    return nullptr;
  }
}

AttrRef Parser::parse_conv_dims() {
  struct Dims {
    int64_t first = -1, second = -1;
    std::vector<int64_t> spatial;
  };
  auto parse_list = [&](char a, char b) {
    ws();
    const size_t open = pos_;
    expect('[', "to start convolution dimensions");
    Dims d;
    std::vector<std::pair<int64_t, int64_t>> spatial;  // (spatial index, position)
    int64_t position = 0;
    if (!consume(']')) {
      do {
        ws();
        const size_t at = pos_;
        if (is_digit(cur())) {
          spatial.emplace_back(parse_int64("spatial dimension"), position);
        } else {
          std::string_view w = ident("convolution dimension");
          int64_t* slot = w.size() == 1 && w[0] == a   ? &d.first
                          : w.size() == 1 && w[0] == b ? &d.second
                                                       : nullptr;
          if (!slot)
            fail(at, std::string("expected '") + a + "', '" + b +
                         "' or a spatial dimension number, found " + quoted_text(w));
          if (*slot != -1) fail(at, "duplicate convolution dimension " + quoted_text(w));
          *slot = position;
        }
        ++position;
      } while (consume(','));
      expect(']', "to close convolution dimensions");
    }
    if (d.first < 0 || d.second < 0)
      fail(open, std::string("convolution dimensions need '") + a + "' and '" + b + "'");
    d.spatial.assign(spatial.size(), -1);
    for (auto [k, p] : spatial) {
      if (k < 0 || k >= static_cast<int64_t>(spatial.size()) || d.spatial[k] != -1)
        fail(open,
             "spatial dimensions must be 0.." + std::to_string(spatial.size() - 1) + ", each once");
      d.spatial[k] = p;
    }
    return d;
  };
  ws();
  const size_t at = pos_;
  Dims in = parse_list('b', 'f');
  expect_word("x", "between convolution dimension lists");
  Dims kernel = parse_list('i', 'o');
  expect_arrow("in convolution dimensions");
  Dims out = parse_list('b', 'f');
  if (in.spatial.size() != kernel.spatial.size() || in.spatial.size() != out.spatial.size())
    fail(at, "convolution dimension lists have different numbers of spatial dimensions");
  auto i = [](int64_t v) { return Attribute::integer_attr(v, std::nullopt); };
  return Attribute::struct_attr("stablehlo.conv",
                                {{"input_batch_dimension", i(in.first)},
                                 {"input_feature_dimension", i(in.second)},
                                 {"input_spatial_dimensions", Attribute::int_list(in.spatial)},
                                 {"kernel_input_feature_dimension", i(kernel.first)},
                                 {"kernel_output_feature_dimension", i(kernel.second)},
                                 {"kernel_spatial_dimensions", Attribute::int_list(kernel.spatial)},
                                 {"output_batch_dimension", i(out.first)},
                                 {"output_feature_dimension", i(out.second)},
                                 {"output_spatial_dimensions", Attribute::int_list(out.spatial)}});
}

AttrRef Parser::parse_dense_array() {
  expect('<', "after 'array'");
  ws();
  const size_t tpos = pos_;
  std::string_view tn = peek_ident();
  auto dt = dtype_from_mlir_name(tn);
  if (!dt) fail(tpos, "unsupported dense array element type " + found());
  pos_ += tn.size();
  auto a = std::make_shared<Attribute>();
  a->kind = Attribute::Kind::DenseArray;
  a->dtype = *dt;
  if (consume(':')) {
    do {
      ws();
      if (*dt == DType::Bool && (peek_ident() == "true" || peek_ident() == "false")) {
        a->ints.push_back(peek_ident() == "true" ? 1 : 0);
        pos_ += peek_ident().size();
        continue;
      }
      NumTok t;
      if (!scan_number(&t)) fail(pos_, "expected array element, found " + found());
      if (is_float(*dt)) {
        a->floats.push_back(double_from_float_bits(float_bits(t, *dt), *dt));
      } else {
        const uint64_t bits = int_bits(t, *dt);
        a->ints.push_back(is_unsigned_int(*dt) || *dt == DType::Bool
                              ? static_cast<int64_t>(bits)
                              : sign_extend(bits, bit_width(*dt)));
      }
    } while (consume(','));
  }
  expect('>', "to close the dense array");
  return a;
}

AttrRef Parser::parse_dense(bool strict) {
  ws();
  const size_t at = pos_;
  pos_ += 5;  // "dense"
  const size_t lt = pos_;
  const size_t end = skip_balanced(lt);
  pos_ = end;
  expect(':', "and a type after the dense literal");
  ws();
  const size_t type_at = pos_;
  Type type;
  if (strict) {
    type = parse_type();
  } else {
    try {
      type = parse_type();
    } catch (const ParseError&) {
      pos_ = type_at;
      skip_type_text();
      return Attribute::opaque(std::string(src_.substr(at, pos_ - at)));
    }
  }
  if (type.is_token) fail(type_at, "a dense literal needs a tensor type");
  const size_t after = pos_;
  pos_ = lt + 1;
  HostTensor t = parse_dense_content(type, lt, end - 1);
  pos_ = after;
  if (!type.is_quantized()) return Attribute::dense_elements(std::move(t));
  // The elements are the stored integers; the attribute keeps the type they stand in.
  auto a = std::make_shared<Attribute>(*Attribute::dense_elements(std::move(t)));
  a->type = std::move(type);
  return a;
}

void Parser::parse_element(DType dt, std::byte* out) {
  ws();
  const size_t at = pos_;
  std::string_view w = peek_ident();
  if (w == "true" || w == "false") {
    if (dt != DType::Bool)
      fail(at, "boolean literal for an element of type " + std::string(mlir_name(dt)));
    out[0] = static_cast<std::byte>(w == "true" ? 1 : 0);
    pos_ += w.size();
    return;
  }
  if (is_complex(dt)) {
    // (re, im), each part a literal of the component type.
    const DType part = complex_component(dt);
    const size_t half = size_of(part);
    expect('(', "to start a complex element of the dense literal");
    parse_element(part, out);
    expect(',', "between the real and imaginary parts of a complex element");
    parse_element(part, out + half);
    expect(')', "to close a complex element of the dense literal");
    return;
  }
  NumTok t;
  if (!scan_number(&t)) fail(at, "expected a number in the dense literal, found " + found());
  uint64_t bits = is_float(dt) ? float_bits(t, dt) : int_bits(t, dt);
  // i2/i4 elements hold their value sign-extended to the byte, as ml_dtypes stores them.
  if (is_narrow_int(dt)) bits = narrow_int_from_int64(dt, static_cast<int64_t>(bits));
  std::memcpy(out, &bits, size_of(dt));  // little-endian host
}

HostTensor Parser::expand_splat(const Type& type, const std::byte* elem, size_t at) {
  const uint64_t esize = size_of(type.dtype);
  const uint64_t bytes = static_cast<uint64_t>(type.num_elements()) * esize;
  if (bytes > splat_budget_)
    fail(at, "splat constant " + type.str() + " expands to " + std::to_string(bytes) +
                 " bytes, over the limit of " +
                 std::to_string(ir::detail::splat_expansion_limit()) + " bytes per module");
  splat_budget_ -= bytes;
  HostTensor t(type.dtype, type.shape);
  bool zero = true;
  for (uint64_t i = 0; i < esize; ++i) zero = zero && elem[i] == std::byte{0};
  if (zero || bytes == 0) return t;
  auto* p = static_cast<std::byte*>(t.data());
  std::memcpy(p, elem, esize);
  uint64_t done = esize;
  while (done < bytes) {
    const uint64_t n = std::min(done, bytes - done);
    std::memcpy(p + done, p, n);
    done += n;
  }
  return t;
}

HostTensor Parser::parse_dense_content(const Type& type, size_t lt, size_t gt) {
  const DType dt = type.dtype;
  const size_t esize = size_of(dt);
  const uint64_t n = static_cast<uint64_t>(type.num_elements());
  ws();
  const size_t at = pos_;
  HostTensor result;
  if (pos_ == gt) {
    if (n != 0)
      fail(lt, "empty dense literal for " + type.str() + ", which has " + std::to_string(n) +
                   " elements");
    result = HostTensor(dt, type.shape);
  } else if (cur() == '"') {
    const size_t close = skip_string(pos_) - 1;
    const std::string_view s = src_.substr(pos_ + 1, close - pos_ - 1);
    if (s.size() < 2 || s[0] != '0' || s[1] != 'x')
      fail(at, "expected a hex string \"0x...\" in the dense literal");
    const std::string_view hex = s.substr(2);
    if (hex.size() % 2) fail(at, "hex dense literal has an odd number of digits");
    const uint64_t nbytes = hex.size() / 2;
    auto decode = [&](std::byte* out, uint64_t count) {
      for (uint64_t i = 0; i < count; ++i) {
        const char hi = hex[2 * i], lo = hex[2 * i + 1];
        if (!is_hex_digit(hi) || !is_hex_digit(lo))
          fail(pos_ + 3 + 2 * i, "bad hex digit in dense literal");
        out[i] = static_cast<std::byte>(hex_value(hi) * 16 + hex_value(lo));
      }
    };
    if (nbytes == n * esize) {
      result = HostTensor(dt, type.shape);
      decode(static_cast<std::byte*>(result.data()), nbytes);
    } else if (nbytes == esize) {
      std::byte elem[16] = {};  // the widest element: complex<f64>
      decode(elem, esize);
      result = expand_splat(type, elem, at);
    } else {
      fail(at, "hex dense literal has " + std::to_string(nbytes) + " bytes, but " + type.str() +
                   " needs " + std::to_string(n * esize));
    }
    if (dt == DType::Bool) {
      auto* p = static_cast<uint8_t*>(result.data());
      for (uint64_t i = 0; i < n; ++i) p[i] = p[i] != 0;
    } else if (is_narrow(dt)) {
      // Each byte holds one element in its low bits: keep those, sign-extended for i2/i4.
      auto* p = static_cast<uint8_t*>(result.data());
      const uint8_t mask = static_cast<uint8_t>((1u << bit_width(dt)) - 1);
      for (uint64_t i = 0; i < n; ++i)
        p[i] = is_narrow_int(dt) ? narrow_int_from_int64(dt, p[i]) : p[i] & mask;
    }
    pos_ = close + 1;
  } else if (cur() == '[') {
    if (type.rank() == 0) fail(at, "list literal for the rank-0 type " + type.str());
    std::vector<std::byte> buf;
    buf.reserve(std::min<uint64_t>(n, gt - lt) * esize);
    parse_dense_list(0, type, buf);
    result = HostTensor::from_bytes(dt, type.shape, buf);
  } else {
    std::byte elem[16] = {};  // the widest element: complex<f64>
    parse_element(dt, elem);
    result = expand_splat(type, elem, at);
  }
  ws();
  if (pos_ != gt) fail(pos_, "expected '>' to close the dense literal, found " + found());
  return result;
}

void Parser::parse_dense_list(size_t dim, const Type& type, std::vector<std::byte>& buf) {
  ws();
  const size_t open = pos_;
  DepthGuard g(*this, open);
  expect('[', "in dense literal");
  const int64_t expected = type.shape[dim];
  const size_t esize = size_of(type.dtype);
  int64_t count = 0;
  ws();
  if (cur() != ']') {
    do {
      ws();
      if (count >= expected)
        fail(pos_, "too many elements in dimension " + std::to_string(dim) +
                       " of the dense literal for " + type.str() + " (expected " +
                       std::to_string(expected) + ")");
      if (dim + 1 < type.shape.size()) {
        if (cur() != '[')
          fail(pos_, "expected '[' for dimension " + std::to_string(dim + 1) +
                         " of the dense literal for " + type.str() + ", found " + found());
        parse_dense_list(dim + 1, type, buf);
      } else {
        if (cur() == '[')
          fail(pos_, "too many nested lists in the dense literal for " + type.str());
        const size_t old = buf.size();
        buf.resize(old + esize);
        parse_element(type.dtype, buf.data() + old);
      }
      ++count;
    } while (consume(','));
  }
  expect(']', "to close the dense literal list");
  if (count != expected)
    fail(open, "dense literal has " + std::to_string(count) + " elements in dimension " +
                   std::to_string(dim) + ", but " + type.str() + " needs " +
                   std::to_string(expected));
}

}  // namespace cujax::ir::parse_detail
