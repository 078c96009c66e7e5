// The parser's types: tensors (bounded and dynamic dimensions, encodings), quantized types,
// tokens and the element types (parser_state.h).
#include "ir/parser_state.h"

namespace cujax::ir::parse_detail {

Type Parser::parse_type() {
  ws();
  const size_t at = pos_;
  if (cur() == '!') {
    constexpr std::string_view kToken = "!stablehlo.token";
    if (src_.substr(pos_, kToken.size()) == kToken &&
        !is_ident_char(pos_ + kToken.size() < src_.size() ? src_[pos_ + kToken.size()] : ' ')) {
      pos_ += kToken.size();
      return Type::token();
    }
    fail(at, "unsupported type " + found());
  }
  std::string_view id = peek_ident();
  if (id == "tensor") {
    pos_ += id.size();
    return parse_tensor_body();
  }
  if (id.empty()) fail(at, "expected type, found " + found());
  if (id == "tuple") fail(at, "tuple types are not supported");
  fail(at, "expected a tensor type, found " + quoted_text(id));
}

Type Parser::parse_tensor_body() {
  expect('<', "after 'tensor'");
  Shape shape;
  uint64_t elems = 1;
  bool too_big = false;
  while (true) {
    ws();
    if (cur() == '*') fail(pos_, "unranked tensors are not supported");
    if (cur() == '?') {  // refined to a size before compiling (compiler/refine_shapes.h)
      ++pos_;
      if (cur() != 'x') fail(pos_, "expected 'x' after '?' in tensor type, found " + found());
      ++pos_;
      shape.push_back(kDynamicDim);
      continue;
    }
    if (!is_digit(cur())) break;
    const size_t dpos = pos_;
    uint64_t d = 0;
    while (is_digit(cur())) {
      d = d * 10 + static_cast<uint64_t>(cur() - '0');
      if (d > static_cast<uint64_t>(INT64_MAX)) fail(dpos, "tensor dimension is too large");
      ++pos_;
    }
    if (cur() != 'x') fail(pos_, "expected 'x' after dimension in tensor type, found " + found());
    ++pos_;
    shape.push_back(static_cast<int64_t>(d));
    uint64_t next = 0;
    if (__builtin_mul_overflow(elems, d, &next)) too_big = true;
    elems = next;
  }
  ws();
  const size_t epos = pos_;
  if (src_.substr(pos_).starts_with("!quant.")) {
    QuantizedType q = parse_quantized_type();
    ws();
    expect('>', "to close tensor type");
    if (q.quantization_dimension) {
      const int64_t d = *q.quantization_dimension;
      if (d >= static_cast<int64_t>(shape.size()))
        fail(epos, "quantization dimension " + std::to_string(d) + " is out of range for rank " +
                       std::to_string(shape.size()));
      if (static_cast<int64_t>(q.scales.size()) != shape[d])
        fail(epos, std::to_string(q.scales.size()) + " scales for dimension " + std::to_string(d) +
                       " of size " + std::to_string(shape[d]) +
                       ": a per-axis quantized type needs one per index");
    }
    uint64_t bytes = 0;
    if (too_big || __builtin_mul_overflow(elems, size_of(q.storage), &bytes) ||
        bytes > static_cast<uint64_t>(INT64_MAX))
      fail(epos, "tensor type is too large");
    return Type::quantized_tensor(std::move(shape), std::move(q));
  }
  std::string_view e = peek_ident();
  if (e == "complex") {
    // complex<f32> / complex<f64>: the whole spelling is the dtype's name.
    const size_t close = src_.find('>', pos_);
    if (close != std::string_view::npos) e = src_.substr(pos_, close + 1 - pos_);
  }
  auto dt = dtype_from_mlir_name(e);
  if (!dt) {
    if (e.empty()) fail(epos, "expected element type in tensor type, found " + found());
    fail(epos, "unknown element type " + quoted_text(e));
  }
  pos_ += e.size();
  ws();
  if (cur() == ',') fail(pos_, "tensor encodings are not supported");
  expect('>', "to close tensor type");
  uint64_t bytes = 0;
  if (too_big || __builtin_mul_overflow(elems, size_of(*dt), &bytes) ||
      bytes > static_cast<uint64_t>(INT64_MAX))
    fail(epos, "tensor type is too large");
  return Type::tensor(std::move(shape), *dt);
}

QuantizedType Parser::parse_quantized_type() {
  const size_t at = pos_;
  constexpr std::string_view kUniform = "!quant.uniform";
  if (!src_.substr(pos_).starts_with(kUniform) || peek(kUniform.size()) != '<')
    fail(at, "unsupported quantized type " + found() + ": only !quant.uniform<...> is read");
  pos_ += kUniform.size() + 1;
  QuantizedType q;
  ws();
  const size_t spos = pos_;
  const std::string_view sname = peek_ident();
  std::optional<DType> storage;
  if (sname.size() > 1 && (sname[0] == 'i' || sname[0] == 'u')) {
    // i8, u8 (the quant dialect's spellings) or si8, ui8
    const std::string_view width = sname.substr(sname[1] == 'i' ? 2 : 1);
    const bool is_unsigned = sname[0] == 'u';
    if (width == "2") storage = is_unsigned ? DType::U2 : DType::I2;
    if (width == "4") storage = is_unsigned ? DType::U4 : DType::I4;
    if (width == "8") storage = is_unsigned ? DType::U8 : DType::I8;
    if (width == "16") storage = is_unsigned ? DType::U16 : DType::I16;
    if (width == "32") storage = is_unsigned ? DType::U32 : DType::I32;
  }
  if (!storage)
    fail(spos, "expected the storage type of a quantized type (i8, u8, i4, i16, i32, ...), found " +
                   found());
  pos_ += sname.size();
  q.storage = *storage;
  q.storage_min = QuantizedType::storage_type_min(q.storage);
  q.storage_max = QuantizedType::storage_type_max(q.storage);
  if (consume('<')) {
    const size_t rpos = pos_;
    q.storage_min = parse_int64("for the storage minimum");
    expect(':', "between the storage minimum and maximum");
    q.storage_max = parse_int64("for the storage maximum");
    expect('>', "to close the storage range");
    if (q.storage_min < QuantizedType::storage_type_min(q.storage) ||
        q.storage_max > QuantizedType::storage_type_max(q.storage) ||
        q.storage_min >= q.storage_max)
      fail(rpos, "storage range " + std::to_string(q.storage_min) + ":" +
                     std::to_string(q.storage_max) + " does not fit " + std::string(sname) +
                     " (it needs min < max within the type)");
  }
  expect(':', "after the storage type");
  ws();
  const size_t epos = pos_;
  const std::string_view ename = peek_ident();
  const auto expressed = dtype_from_mlir_name(ename);
  if (!expressed || !is_float(*expressed) || is_narrow_float(*expressed))
    fail(epos,
         "expected the expressed type of a quantized type (f16, bf16, f32, f64), found " + found());
  pos_ += ename.size();
  q.expressed = *expressed;
  if (bit_width(q.storage) >= bit_width(q.expressed))
    fail(epos,
         "the storage type " + std::string(sname) + " must be narrower than " + std::string(ename));
  if (consume(':')) {
    const size_t dpos = pos_;
    const int64_t d = parse_int64("for the quantization dimension");
    if (d < 0) fail(dpos, "quantization dimension " + std::to_string(d) + " is negative");
    q.quantization_dimension = d;
  }
  expect(',', "before the quantization parameters");
  const bool per_axis = consume('{');
  if (per_axis != q.quantization_dimension.has_value())
    fail(pos_, per_axis ? "a list of quantization parameters needs a quantization dimension"
                        : "a per-axis quantized type needs its parameters in {...}");
  do {
    ws();
    NumTok t;
    const size_t ppos = pos_;
    if (!scan_number(&t)) fail(ppos, "expected a scale, found " + found());
    uint64_t bits = 0;
    if (t.kind == NumKind::Hex || !decimal_to_float_bits(t.text, DType::F64, &bits))
      fail(ppos, "bad scale " + quoted_text(t.text));
    const double scale = std::bit_cast<double>(bits);
    if (!(scale > 0) || !std::isfinite(scale))
      fail(ppos, "scale " + std::string(t.text) + " must be positive and finite");
    int64_t zero_point = 0;
    if (consume(':')) {
      const size_t zpos = pos_;
      zero_point = parse_int64("for the zero point");
      if (zero_point < q.storage_min || zero_point > q.storage_max)
        fail(zpos, "zero point " + std::to_string(zero_point) + " is outside the storage range " +
                       std::to_string(q.storage_min) + ":" + std::to_string(q.storage_max));
    }
    q.scales.push_back(scale);
    q.zero_points.push_back(zero_point);
  } while (per_axis && consume(','));
  if (per_axis) expect('}', "to close the quantization parameters");
  expect('>', "to close the quantized type");
  return q;
}

}  // namespace cujax::ir::parse_detail
