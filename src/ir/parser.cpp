// StableHLO text parser: the pretty syntax JAX prints and MLIR's generic op form.
//
// A hand-written recursive-descent parser over the raw text (no token buffer: the pretty syntax is
// context sensitive, `2x3xf32`, `[0:4:2]`, `e5m10`). Every recursion goes through a depth guard,
// every loop consumes input, and every allocation is bounded by the input size, except splat
// constants, which have a byte budget (parser_limits.h).
#include "cujax/ir/parser.h"
#include "cujax/core/dynamic_shape.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "cujax/core/error.h"
#include "ir/asm_util.h"
#include "ir/op_table.h"
#include "ir/parser_limits.h"
#include "ir/sdy.h"

namespace cujax::ir {

namespace detail {
namespace {
std::atomic<uint64_t> g_splat_limit{uint64_t{4} << 30};
}  // namespace
void set_splat_expansion_limit(uint64_t bytes) {
  g_splat_limit.store(bytes);
}
uint64_t splat_expansion_limit() {
  return g_splat_limit.load();
}
}  // namespace detail

namespace {

using namespace asm_util;
using syntax::Form;

struct SvHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct ValueRef {
  std::string_view name;
  uint64_t index = 0;
  bool has_index = false;
  size_t pos = 0;
};

struct ArgDef {
  std::string name;  // empty: anonymous
  Type type;
  std::string loc;
  size_t pos = 0;
};

// An op while it is parsed; becomes an Operation once its result types are known.
struct PendingOp {
  std::string name;
  size_t pos = 0;
  std::vector<Value*> operands;
  std::vector<size_t> operand_pos;
  std::vector<NamedAttribute> attrs;
  std::vector<Type> result_types;
  std::vector<std::unique_ptr<Region>> regions;
};

enum class NumKind { Int, Hex, Float };
struct NumTok {
  NumKind kind = NumKind::Int;
  bool neg = false;
  bool overflow = false;  // integer magnitude does not fit 64 bits
  uint64_t mag = 0;       // Int / Hex magnitude
  std::string_view text;  // whole literal, sign included
  size_t pos = 0;
};

std::string quoted(std::string_view s) {
  return "'" + std::string(s) + "'";
}

bool is_type_keyword(std::string_view w) {
  if (w == "index" || w == "none" || w == "tf32" || w == "bf16") return true;
  size_t i = 0;
  if (w.size() > 1 && (w[0] == 's' || w[0] == 'u') && w[1] == 'i')
    i = 2;
  else if (!w.empty() && (w[0] == 'i' || w[0] == 'f'))
    i = 1;
  else
    return false;
  return i < w.size() && is_digit(w[i]);
}

class Parser {
 public:
  explicit Parser(std::string_view text) : src_(text) {
    const char* b = text.data();
    const char* e = b + text.size();
    for (const char* p = b; p < e;) {
      const void* nl = std::memchr(p, '\n', static_cast<size_t>(e - p));
      if (!nl) break;
      const char* q = static_cast<const char*>(nl);
      newlines_.push_back(static_cast<size_t>(q - b));
      p = q + 1;
    }
    splat_budget_ = ir::detail::splat_expansion_limit();
  }

  std::unique_ptr<Module> parse_top();

 private:
  friend class SdyAdapter;

  // ---- positions and errors ----------------------------------------------------------------

  std::pair<int, int> line_col(size_t at) const {
    at = std::min(at, src_.size());
    auto it = std::lower_bound(newlines_.begin(), newlines_.end(), at);
    const size_t line = static_cast<size_t>(it - newlines_.begin());
    const size_t line_start = line == 0 ? 0 : newlines_[line - 1] + 1;
    return {static_cast<int>(line + 1), static_cast<int>(at - line_start + 1)};
  }

  [[noreturn]] void fail(size_t at, const std::string& msg) const {
    auto [l, c] = line_col(at);
    throw ParseError(l, c, msg);
  }

  // A short description of the text at pos_ for messages.
  std::string found() const {
    if (pos_ >= src_.size()) return "end of input";
    const char c = src_[pos_];
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      static const char* kHex = "0123456789ABCDEF";
      const auto u = static_cast<unsigned char>(c);
      return std::string("character 0x") + kHex[u >> 4] + kHex[u & 15];
    }
    size_t e = pos_;
    auto word = [](char ch) { return is_ident_char(ch) || ch == '%' || ch == '#' || ch == '@'; };
    if (word(c)) {
      while (e < src_.size() && e - pos_ < 24 && word(src_[e])) ++e;
    } else {
      e = pos_ + 1;
    }
    return quoted(src_.substr(pos_, e - pos_));
  }

  struct DepthGuard {
    Parser& p;
    DepthGuard(Parser& parser, size_t at) : p(parser) {
      if (++p.depth_ > ir::detail::kMaxNestingDepth) {
        --p.depth_;
        p.fail(at, "nesting is too deep (more than " +
                       std::to_string(ir::detail::kMaxNestingDepth) + " levels)");
      }
    }
    ~DepthGuard() { --p.depth_; }
  };

  // ---- lexing ---------------------------------------------------------------------------------

  char cur() const { return pos_ < src_.size() ? src_[pos_] : '\0'; }
  char peek(size_t i) const { return pos_ + i < src_.size() ? src_[pos_ + i] : '\0'; }
  bool eof() const { return pos_ >= src_.size(); }

  void ws() {
    while (pos_ < src_.size()) {
      const char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '/' && peek(1) == '/') {
        const void* nl = std::memchr(src_.data() + pos_, '\n', src_.size() - pos_);
        pos_ =
            nl ? static_cast<size_t>(static_cast<const char*>(nl) - src_.data()) + 1 : src_.size();
      } else {
        break;
      }
    }
  }

  bool consume(char c) {
    ws();
    if (cur() == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expect(char c, std::string_view context) {
    ws();
    if (cur() != c) {
      std::string msg = "expected '";
      msg += c;
      msg += "'";
      if (!context.empty()) msg += " " + std::string(context);
      fail(pos_, msg + ", found " + found());
    }
    ++pos_;
  }

  bool consume_arrow() {
    ws();
    if (cur() == '-' && peek(1) == '>') {
      pos_ += 2;
      return true;
    }
    return false;
  }

  void expect_arrow(std::string_view context) {
    if (!consume_arrow())
      fail(pos_, "expected '->' " + std::string(context) + ", found " + found());
  }

  std::string_view peek_ident() {
    ws();
    size_t e = pos_;
    if (e < src_.size() && is_ident_start(src_[e])) {
      ++e;
      while (e < src_.size() && is_ident_char(src_[e])) ++e;
    }
    return src_.substr(pos_, e - pos_);
  }

  bool consume_word(std::string_view w) {
    if (peek_ident() == w) {
      pos_ += w.size();
      return true;
    }
    return false;
  }

  void expect_word(std::string_view w, std::string_view context = {}) {
    if (!consume_word(w)) {
      std::string msg = "expected '" + std::string(w) + "'";
      if (!context.empty()) msg += " " + std::string(context);
      fail(pos_, msg + ", found " + found());
    }
  }

  std::string_view ident(std::string_view what) {
    std::string_view s = peek_ident();
    if (s.empty()) fail(pos_, "expected " + std::string(what) + ", found " + found());
    pos_ += s.size();
    return s;
  }

  bool at_loc() {
    ws();
    return peek_ident() == "loc" && peek(3) == '(';
  }

  std::string parse_loc() {
    ws();
    const size_t at = pos_;
    pos_ += 3;
    const size_t end = skip_balanced(pos_);
    pos_ = end;
    return std::string(src_.substr(at, end - at));
  }

  // Position after the bracket that closes the one at `open`; strings and `->` are skipped.
  size_t skip_balanced(size_t open) {
    auto closer = [](char c) {
      switch (c) {
        case '<':
          return '>';
        case '(':
          return ')';
        case '[':
          return ']';
        default:
          return '}';
      }
    };
    std::vector<char> stack{closer(src_[open])};
    size_t p = open + 1;
    while (p < src_.size()) {
      const char c = src_[p];
      if (c == '"') {
        p = skip_string(p);
      } else if (c == '-' && p + 1 < src_.size() && src_[p + 1] == '>') {
        p += 2;
      } else if (c == '<' || c == '(' || c == '[' || c == '{') {
        stack.push_back(closer(c));
        ++p;
      } else if (c == '>' || c == ')' || c == ']' || c == '}') {
        if (c != stack.back())
          fail(p, std::string("unbalanced '") + c + "', expected '" + stack.back() + "'");
        stack.pop_back();
        ++p;
        if (stack.empty()) return p;
      } else {
        ++p;
      }
    }
    fail(open, std::string("unterminated '") + src_[open] + "'");
  }

  // Position after the string literal that starts at `open` (a '"').
  size_t skip_string(size_t open) {
    size_t p = open + 1;
    while (p < src_.size()) {
      const char c = src_[p];
      if (c == '"') return p + 1;
      if (c == '\\') {
        p += 2;
        continue;
      }
      if (c == '\n') break;
      ++p;
    }
    fail(open, "unterminated string literal");
  }

  std::string parse_string() {
    ws();
    const size_t open = pos_;
    if (cur() != '"') fail(pos_, "expected string literal, found " + found());
    ++pos_;
    std::string out;
    while (true) {
      if (eof() || cur() == '\n') fail(open, "unterminated string literal");
      const char c = src_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      const char e = peek(1);
      if (e == '"' || e == '\\') {
        out += e;
        pos_ += 2;
      } else if (e == 'n') {
        out += '\n';
        pos_ += 2;
      } else if (e == 't') {
        out += '\t';
        pos_ += 2;
      } else if (is_hex_digit(e) && is_hex_digit(peek(2))) {
        out += static_cast<char>(hex_value(e) * 16 + hex_value(peek(2)));
        pos_ += 3;
      } else {
        fail(pos_, "unknown escape in string literal");
      }
    }
  }

  // @name or @"quoted name".
  std::string parse_symbol() {
    ws();
    if (cur() != '@') fail(pos_, "expected symbol name, found " + found());
    ++pos_;
    if (cur() == '"') return parse_string();
    const size_t s = pos_;
    if (!is_ident_start(cur()) && !is_digit(cur())) fail(pos_, "expected symbol name after '@'");
    while (is_ident_char(cur())) ++pos_;
    return std::string(src_.substr(s, pos_ - s));
  }

  // ---- numbers ---------------------------------------------------------------------------------

  // [-] digits [. digits] [e[+-]digits] or [-]0x hex. False (nothing consumed) when no number.
  bool scan_number(NumTok* t) {
    ws();
    size_t p = pos_;
    const size_t n = src_.size();
    t->neg = false;
    t->overflow = false;
    t->mag = 0;
    t->pos = pos_;
    if (p < n && src_[p] == '-') {
      t->neg = true;
      ++p;
    }
    if (p >= n || !is_digit(src_[p])) return false;
    if (src_[p] == '0' && p + 2 < n && src_[p + 1] == 'x' && is_hex_digit(src_[p + 2])) {
      p += 2;
      t->kind = NumKind::Hex;
      while (p < n && is_hex_digit(src_[p])) {
        if (t->mag >> 60) t->overflow = true;
        t->mag = (t->mag << 4) | static_cast<uint64_t>(hex_value(src_[p]));
        ++p;
      }
    } else {
      t->kind = NumKind::Int;
      while (p < n && is_digit(src_[p])) {
        const uint64_t d = static_cast<uint64_t>(src_[p] - '0');
        if (t->mag > (UINT64_MAX - d) / 10) t->overflow = true;
        t->mag = t->mag * 10 + d;
        ++p;
      }
      if (p < n && src_[p] == '.') {
        t->kind = NumKind::Float;
        ++p;
        while (p < n && is_digit(src_[p])) ++p;
      }
      if (p < n && (src_[p] == 'e' || src_[p] == 'E')) {
        size_t q = p + 1;
        if (q < n && (src_[q] == '+' || src_[q] == '-')) ++q;
        if (q < n && is_digit(src_[q])) {
          t->kind = NumKind::Float;
          p = q;
          while (p < n && is_digit(src_[p])) ++p;
        }
      }
    }
    if (p < n && (is_ident_char(src_[p]) && src_[p] != '.')) {
      pos_ = p;
      fail(t->pos, "malformed number literal");
    }
    t->text = src_.substr(pos_, p - pos_);
    pos_ = p;
    return true;
  }

  int64_t parse_int64(std::string_view what) {
    NumTok t;
    if (!scan_number(&t) || t.kind == NumKind::Float)
      fail(pos_, "expected integer " + std::string(what) + ", found " + found());
    if (t.overflow || (t.neg ? t.mag > (uint64_t{1} << 63) : t.mag > INT64_MAX))
      fail(t.pos, "integer " + std::string(t.text) + " is out of range for 64 bits");
    return t.neg ? static_cast<int64_t>(~t.mag + 1) : static_cast<int64_t>(t.mag);
  }

  // [1, 2, 3] of 64-bit integers.
  std::vector<int64_t> parse_int_list(std::string_view what) {
    expect('[', "to start " + std::string(what));
    std::vector<int64_t> v;
    if (consume(']')) return v;
    do {
      v.push_back(parse_int64("in " + std::string(what)));
    } while (consume(','));
    expect(']', "to close " + std::string(what));
    return v;
  }

  // Integer bits for an element of integer type `dt` (two's complement, truncated to its width).
  uint64_t int_bits(const NumTok& t, DType dt) {
    if (t.kind == NumKind::Float)
      fail(t.pos, "floating-point literal " + quoted(t.text) + " for integer type " +
                      std::string(mlir_name(dt)));
    const int w = bit_width(dt);
    const uint64_t umax = w == 64 ? UINT64_MAX : (uint64_t{1} << w) - 1;
    bool ok = !t.overflow;
    if (dt == DType::Bool) {
      ok = ok && !t.neg && t.mag <= 1;
    } else if (is_unsigned_int(dt)) {
      ok = ok && (t.mag <= umax) && (!t.neg || t.mag == 0);
    } else if (t.neg) {
      ok = ok && t.mag <= (uint64_t{1} << (w - 1));
    } else {
      ok = ok && t.mag <= umax;
    }
    if (!ok)
      fail(t.pos,
           "integer " + std::string(t.text) + " is out of range for " + std::string(mlir_name(dt)));
    const uint64_t bits = t.neg ? ~t.mag + 1 : t.mag;
    return bits & umax;
  }

  // Bits of an element of float type `dt`.
  uint64_t float_bits(const NumTok& t, DType dt) {
    const int w = bit_width(dt);
    if (t.kind == NumKind::Hex) {
      if (t.neg) fail(t.pos, "hexadecimal float literal cannot be negative");
      if (t.overflow || (w < 64 && (t.mag >> w)))
        fail(t.pos, "hexadecimal literal " + std::string(t.text) + " is too wide for " +
                        std::string(mlir_name(dt)));
      return t.mag;
    }
    uint64_t bits = 0;
    if (!decimal_to_float_bits(t.text, dt, &bits))
      fail(t.pos, "bad float literal " + quoted(t.text));
    return bits;
  }

  static int64_t sign_extend(uint64_t bits, int width) {
    if (width >= 64) return static_cast<int64_t>(bits);
    const uint64_t sign = uint64_t{1} << (width - 1);
    return static_cast<int64_t>((bits ^ sign) - sign);
  }

  // ---- types ---------------------------------------------------------------------------------

  Type parse_type() {
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
    fail(at, "expected a tensor type, found " + quoted(id));
  }

  Type parse_tensor_body() {
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
          fail(epos, std::to_string(q.scales.size()) + " scales for dimension " +
                         std::to_string(d) + " of size " + std::to_string(shape[d]) +
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
      fail(epos, "unknown element type " + quoted(e));
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

  // !quant.uniform<i8[<min:max>]:f32[:dim], scale[:zero_point] | {scale[:zero_point], ...}>
  QuantizedType parse_quantized_type() {
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
      fail(spos,
           "expected the storage type of a quantized type (i8, u8, i4, i16, i32, ...), found " +
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
      fail(epos, "expected the expressed type of a quantized type (f16, bf16, f32, f64), found " +
                     found());
    pos_ += ename.size();
    q.expressed = *expressed;
    if (bit_width(q.storage) >= bit_width(q.expressed))
      fail(epos, "the storage type " + std::string(sname) + " must be narrower than " +
                     std::string(ename));
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
        fail(ppos, "bad scale " + quoted(t.text));
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

  std::vector<Type> parse_type_list() {
    std::vector<Type> v;
    do {
      v.push_back(parse_type());
    } while (consume(','));
    return v;
  }

  // type | ( type, ... )
  std::vector<Type> parse_result_types() {
    ws();
    if (cur() != '(') return {parse_type()};
    ++pos_;
    std::vector<Type> v;
    if (consume(')')) return v;
    v = parse_type_list();
    expect(')', "to close the result types");
    return v;
  }

  void parse_function_type(std::vector<Type>* ins, std::vector<Type>* outs) {
    expect('(', "to start a function type");
    if (!consume(')')) {
      *ins = parse_type_list();
      expect(')', "to close the operand types");
    }
    expect_arrow("in function type");
    *outs = parse_result_types();
  }

  // Skips a type we do not model (for opaque attributes): `name`, `!name`, `name<...>`.
  void skip_type_text() {
    ws();
    const size_t at = pos_;
    if (cur() == '!') ++pos_;
    while (is_ident_char(cur())) ++pos_;
    if (pos_ == at) fail(at, "expected type, found " + found());
    if (cur() == '<') pos_ = skip_balanced(pos_);
  }

  // ---- attributes ----------------------------------------------------------------------------

  std::string parse_attr_name() {
    ws();
    if (cur() == '"') return parse_string();
    std::string_view s = peek_ident();
    if (s.empty()) fail(pos_, "expected attribute name, found " + found());
    pos_ += s.size();
    return std::string(s);
  }

  void check_unique(const std::vector<NamedAttribute>& attrs, size_t at, std::string_view what) {
    if (attrs.size() < 2) return;
    std::vector<std::string_view> names;
    names.reserve(attrs.size());
    for (const auto& a : attrs) names.push_back(a.name);
    std::sort(names.begin(), names.end());
    for (size_t i = 1; i < names.size(); ++i)
      if (names[i] == names[i - 1])
        fail(at, "duplicate attribute " + quoted(names[i]) + " in " + std::string(what));
  }

  // { name = value, name, ... }
  std::vector<NamedAttribute> parse_dict() {
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

  void parse_optional_attr_dict(std::vector<NamedAttribute>& attrs) {
    ws();
    if (cur() != '{') return;
    for (auto& a : parse_dict()) attrs.push_back(std::move(a));
  }

  AttrRef make_float_attr(double v, std::optional<DType> t) {
    auto a = std::make_shared<Attribute>();
    a->kind = Attribute::Kind::Float;
    a->floating = v;
    a->dtype = t;
    return a;
  }

  AttrRef parse_attribute() {
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

  AttrRef parse_number_attr() {
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
        fail(t.pos, "bad float literal " + quoted(t.text));
      return make_float_attr(double_from_float_bits(bits, DType::F64), std::nullopt);
    }
    if (t.overflow || (t.neg ? t.mag > (uint64_t{1} << 63) : t.mag > INT64_MAX))
      fail(t.pos, "integer " + std::string(t.text) + " is out of range for 64 bits");
    return Attribute::integer_attr(
        t.neg ? static_cast<int64_t>(~t.mag + 1) : static_cast<int64_t>(t.mag), std::nullopt);
  }

  // #alias, #stablehlo<enum VALUE>, #stablehlo.name<fields>, #dialect.anything<...>
  AttrRef parse_hash_attr() {
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

  // The fields of #stablehlo.<kind><...> between body_begin and body_end (the closing '>');
  // nullptr (position restored) when the body is not a plain `key = value` list.
  // #<dialect>.<kind><field = value, ...>; `dialect` is "stablehlo." or "chlo.".
  AttrRef try_parse_struct(std::string_view dialect, std::string_view kind, size_t body_begin,
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

  // [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]
  AttrRef parse_conv_dims() {
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
                           "' or a spatial dimension number, found " + quoted(w));
            if (*slot != -1) fail(at, "duplicate convolution dimension " + quoted(w));
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
          fail(open, "spatial dimensions must be 0.." + std::to_string(spatial.size() - 1) +
                         ", each once");
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
    return Attribute::struct_attr(
        "stablehlo.conv", {{"input_batch_dimension", i(in.first)},
                           {"input_feature_dimension", i(in.second)},
                           {"input_spatial_dimensions", Attribute::int_list(in.spatial)},
                           {"kernel_input_feature_dimension", i(kernel.first)},
                           {"kernel_output_feature_dimension", i(kernel.second)},
                           {"kernel_spatial_dimensions", Attribute::int_list(kernel.spatial)},
                           {"output_batch_dimension", i(out.first)},
                           {"output_feature_dimension", i(out.second)},
                           {"output_spatial_dimensions", Attribute::int_list(out.spatial)}});
  }

  // array<i64: 1, 2>, array<i1: true, false>, array<f32: 1.0>, array<i64>
  AttrRef parse_dense_array() {
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

  // dense<...> : tensor<...>. `strict`: an unsupported type is an error instead of an opaque
  // attribute.
  AttrRef parse_dense(bool strict) {
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

  void parse_element(DType dt, std::byte* out) {
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

  HostTensor expand_splat(const Type& type, const std::byte* elem, size_t at) {
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

  HostTensor parse_dense_content(const Type& type, size_t lt, size_t gt) {
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

  void parse_dense_list(size_t dim, const Type& type, std::vector<std::byte>& buf) {
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

  // ---- values --------------------------------------------------------------------------------

  ValueRef parse_value_ref(bool allow_index = true) {
    ws();
    ValueRef r;
    r.pos = pos_;
    if (cur() != '%') fail(pos_, "expected SSA value, found " + found());
    ++pos_;
    const size_t s = pos_;
    if (is_digit(cur())) {
      while (is_digit(cur())) ++pos_;
    } else {
      while (is_value_id_char(cur())) ++pos_;
    }
    if (pos_ == s) fail(r.pos, "expected value name after '%'");
    r.name = src_.substr(s, pos_ - s);
    if (allow_index && cur() == '#') {
      ++pos_;
      if (!is_digit(cur())) fail(pos_, "expected result number after '#'");
      uint64_t v = 0;
      while (is_digit(cur())) {
        v = v * 10 + static_cast<uint64_t>(cur() - '0');
        if (v > (uint64_t{1} << 32)) fail(r.pos, "result number is too large");
        ++pos_;
      }
      r.index = v;
      r.has_index = true;
    }
    return r;
  }

  Value* resolve(const ValueRef& r) {
    auto it = values_.find(r.name);
    if (it == values_.end()) fail(r.pos, "use of undefined value '%" + std::string(r.name) + "'");
    if (r.index >= it->second.size())
      fail(r.pos, "'%" + std::string(r.name) + "' has " + std::to_string(it->second.size()) +
                      " results, no result #" + std::to_string(r.index));
    return it->second[r.index];
  }

  void define(std::string_view name, std::vector<Value*> vals, size_t at) {
    auto [it, inserted] = values_.try_emplace(std::string(name), std::move(vals));
    if (!inserted) fail(at, "redefinition of value '%" + std::string(name) + "'");
    scopes_.back().push_back(it->first);
  }

  struct Scope {
    Parser& p;
    explicit Scope(Parser& parser) : p(parser) { p.scopes_.emplace_back(); }
    ~Scope() {
      for (const auto& n : p.scopes_.back()) p.values_.erase(n);
      p.scopes_.pop_back();
    }
  };

  // ---- ops -------------------------------------------------------------------------------------

  void add_operand(PendingOp& p) {
    ValueRef r = parse_value_ref();
    p.operands.push_back(resolve(r));
    p.operand_pos.push_back(r.pos);
  }

  // %a, %b, ... ; empty when the next token is not a value.
  void parse_operand_list(PendingOp& p) {
    ws();
    if (cur() != '%') return;
    do {
      add_operand(p);
    } while (consume(','));
  }

  // %a, %b, ..., each followed by a comma (before a `keyword = ...`).
  void parse_operands_with_commas(PendingOp& p, int count) {
    if (count < 0) {
      ws();
      while (cur() == '%') {
        add_operand(p);
        expect(',', "after operand");
        ws();
      }
      return;
    }
    for (int i = 0; i < count; ++i) {
      add_operand(p);
      expect(',', "after operand");
    }
  }

  void check_arity(const PendingOp& p, int expected) {
    if (expected >= 0 && p.operands.size() != static_cast<size_t>(expected))
      fail(p.pos, p.name + " takes " + std::to_string(expected) + " operands, got " +
                      std::to_string(p.operands.size()));
  }

  void check_operand_types(const PendingOp& p, const std::vector<Type>& types, size_t at) {
    if (types.size() != p.operands.size())
      fail(at, std::to_string(p.operands.size()) + " operands present, but the type of " + p.name +
                   " lists " + std::to_string(types.size()));
    for (size_t i = 0; i < types.size(); ++i)
      if (p.operands[i]->type != types[i])
        fail(p.operand_pos[i], "operand #" + std::to_string(i) + " of " + p.name + " has type " +
                                   p.operands[i]->type.str() + ", but the op's type says " +
                                   types[i].str());
  }

  // `: type` (operands and the result all have it) or `: (types) -> type`.
  void type_spec_same(PendingOp& p) {
    expect(':', "before the type of " + p.name);
    ws();
    const size_t at = pos_;
    if (cur() == '(') {
      std::vector<Type> ins, outs;
      parse_function_type(&ins, &outs);
      check_operand_types(p, ins, at);
      if (outs.size() != 1)
        fail(at, p.name + " has one result, the type lists " + std::to_string(outs.size()));
      p.result_types = std::move(outs);
      return;
    }
    Type t = parse_type();
    // `stablehlo.complex %re, %im : tensor<...xcomplex<f32>>`: the type is the result's; the
    // operands have its part type.
    const Type operand_type = p.name == "stablehlo.complex" && !t.is_token && is_complex(t.dtype)
                                  ? Type::tensor(t.shape, complex_component(t.dtype))
                                  : t;
    check_operand_types(p, std::vector<Type>(p.operands.size(), operand_type), at);
    p.result_types = {std::move(t)};
  }

  void type_spec_functional(PendingOp& p, int num_results = -1) {
    expect(':', "before the type of " + p.name);
    ws();
    const size_t at = pos_;
    std::vector<Type> ins, outs;
    parse_function_type(&ins, &outs);
    check_operand_types(p, ins, at);
    if (num_results >= 0 && outs.size() != static_cast<size_t>(num_results))
      fail(at, p.name + " has " + std::to_string(num_results) + " result(s), the type lists " +
                   std::to_string(outs.size()));
    p.result_types = std::move(outs);
  }

  std::unique_ptr<Operation> finish(PendingOp& p) {
    std::stable_sort(
        p.attrs.begin(), p.attrs.end(),
        [](const NamedAttribute& a, const NamedAttribute& b) { return a.name < b.name; });
    for (size_t i = 1; i < p.attrs.size(); ++i)
      if (p.attrs[i].name == p.attrs[i - 1].name)
        fail(p.pos, "duplicate attribute " + quoted(p.attrs[i].name) + " on " + p.name);
    auto op = std::make_unique<Operation>();
    op->name = std::move(p.name);
    op->operands = std::move(p.operands);
    op->attributes = std::move(p.attrs);
    for (auto& t : p.result_types) op->add_result(std::move(t));
    for (auto& r : p.regions) {
      r->parent_op = op.get();
      op->regions.push_back(std::move(r));
    }
    return op;
  }

  // ^bb0(%arg0: type loc(...), ...):
  ArgDef parse_arg_def() {
    ValueRef r = parse_value_ref(false);
    ArgDef a;
    a.name = std::string(r.name);
    a.pos = r.pos;
    expect(':', "after block argument name");
    a.type = parse_type();
    if (at_loc()) a.loc = parse_loc();
    return a;
  }

  Block& add_block_with_args(Region& region, const std::vector<ArgDef>& args) {
    Block& b = region.add_block();
    for (const auto& a : args) {
      Value* v = b.add_argument(a.type);
      v->loc = a.loc;
      v->name_hint = a.name;
      if (!a.name.empty()) define(a.name, {v}, a.pos);
    }
    return b;
  }

  void parse_block_ops(Block& b) {
    while (true) {
      ws();
      if (eof()) fail(pos_, "unexpected end of input, expected '}' to close the region");
      if (cur() == '}' || cur() == '^') return;
      parse_op_into(b);
    }
  }

  // { ops } with optional ^bb labels. `entry_args`: arguments of the entry block declared outside
  // the braces (functions, while, reduce).
  void parse_region_into(Region& region, const std::vector<ArgDef>* entry_args) {
    ws();
    const size_t at = pos_;
    DepthGuard g(*this, at);
    expect('{', "to start a region");
    Scope scope(*this);
    ws();
    if (entry_args) {
      parse_block_ops(add_block_with_args(region, *entry_args));
    } else if (cur() != '}' && cur() != '^') {
      parse_block_ops(region.add_block());
    }
    while (true) {
      ws();
      if (cur() != '^') break;
      ++pos_;
      while (is_value_id_char(cur())) ++pos_;
      std::vector<ArgDef> args;
      if (consume('(')) {
        if (!consume(')')) {
          do {
            args.push_back(parse_arg_def());
          } while (consume(','));
          expect(')', "to close the block arguments");
        }
      }
      expect(':', "after the block label");
      parse_block_ops(add_block_with_args(region, args));
    }
    expect('}', "to close the region");
  }

  std::unique_ptr<Region> parse_region(const std::vector<ArgDef>* entry_args) {
    auto r = std::make_unique<Region>();
    parse_region_into(*r, entry_args);
    return r;
  }

  // "name"(operands) <{props}> (regions) {attrs} : (types) -> types
  void parse_generic_body(PendingOp& p) {
    expect('(', "to start the operands of " + p.name);
    parse_operand_list(p);
    expect(')', "to close the operands of " + p.name);
    ws();
    if (cur() == '[') fail(pos_, "successor blocks are not supported");
    if (cur() == '<') {
      ++pos_;
      ws();
      if (cur() != '{') fail(pos_, "expected '{' for the properties of " + p.name);
      for (auto& a : parse_dict()) p.attrs.push_back(std::move(a));
      expect('>', "to close the properties");
    }
    ws();
    if (cur() == '(') {
      ++pos_;
      do {
        p.regions.push_back(parse_region(nullptr));
      } while (consume(','));
      expect(')', "to close the regions of " + p.name);
    }
    parse_optional_attr_dict(p.attrs);
    type_spec_functional(p);
  }

  std::vector<AttrRef> parse_precision_list() {
    expect('[', "to start the precision list");
    std::vector<AttrRef> v;
    if (consume(']')) return v;
    do {
      v.push_back(Attribute::enum_attr("precision", std::string(ident("precision"))));
    } while (consume(','));
    expect(']', "to close the precision list");
    return v;
  }

  void parse_custom_op(PendingOp& p, const syntax::OpSyntax& s);
  void parse_reduce(PendingOp& p);
  void parse_chlo_types(PendingOp& p);
  void parse_chlo_top_k(PendingOp& p);
  void parse_chlo_scan(PendingOp& p);
  void parse_convolution_window(PendingOp& p);
  void parse_interpreter_op(PendingOp& p);

  void parse_op_into(Block& block);

  // ---- functions and modules --------------------------------------------------------------------

  void parse_function(Module& m, size_t at);
  void parse_alias(Module& m);

  std::string_view src_;
  size_t pos_ = 0;
  std::vector<size_t> newlines_;
  int depth_ = 0;
  uint64_t splat_budget_ = 0;
  std::unordered_map<std::string, std::vector<Value*>, SvHash, std::equal_to<>> values_;
  std::vector<std::vector<std::string>> scopes_;
  std::unordered_set<std::string> function_names_;
  bool compact_reduce_ = false;  // the op just parsed is a compact reduce (its body takes its loc)
};

// The parser's side of ir/sdy.h: reads an sdy op into the pending op.
class SdyAdapter final : public ir::detail::SdyOpReader {
 public:
  SdyAdapter(Parser& parser, PendingOp& op) : ps_(parser), p_(op) {}
  char peek() override {
    ps_.ws();
    return ps_.cur();
  }
  bool consume(char c) override { return ps_.consume(c); }
  bool consume_word(std::string_view w) override { return ps_.consume_word(w); }
  void expect(char c, std::string_view context) override { ps_.expect(c, context); }
  void expect_word(std::string_view w, std::string_view context) override {
    ps_.expect_word(w, context);
  }
  std::string balanced() override {
    ps_.ws();
    const size_t at = ps_.pos_;
    ps_.pos_ = ps_.skip_balanced(at);
    return std::string(ps_.src_.substr(at, ps_.pos_ - at));
  }
  std::string word() override {
    ps_.ws();
    const size_t at = ps_.pos_;
    while (std::isalnum(static_cast<unsigned char>(ps_.cur())) || ps_.cur() == '_') ++ps_.pos_;
    if (at == ps_.pos_) ps_.fail(at, "expected a word, found " + ps_.found());
    return std::string(ps_.src_.substr(at, ps_.pos_ - at));
  }
  void operand() override { ps_.add_operand(p_); }
  size_t num_operands() const override { return p_.operands.size(); }
  Type type() override {
    ps_.ws();
    return ps_.parse_type();
  }
  std::vector<Type> type_list() override { return ps_.parse_result_types(); }
  std::vector<Type> comma_types() override {
    ps_.ws();
    return ps_.parse_type_list();
  }
  void attr_dict() override { ps_.parse_optional_attr_dict(p_.attrs); }
  void add_attr(std::string name, AttrRef value) override {
    p_.attrs.push_back({std::move(name), std::move(value)});
  }
  void set_result_types(std::vector<Type> types) override { p_.result_types = std::move(types); }
  void region_with_args() override {
    std::vector<ArgDef> args;
    ps_.expect('(', "to start the block arguments");
    if (!ps_.consume(')')) {
      do {
        args.push_back(ps_.parse_arg_def());
      } while (ps_.consume(','));
      ps_.expect(')', "to close the block arguments");
    }
    p_.regions.push_back(ps_.parse_region(&args));
  }
  [[noreturn]] void fail(const std::string& msg) override {
    ps_.fail(ps_.pos_, p_.name + ": " + msg);
  }

 private:
  Parser& ps_;
  PendingOp& p_;
};

void Parser::parse_reduce(PendingOp& p) {
  std::vector<Value*> inits;
  std::vector<size_t> init_pos;
  do {
    expect('(', "before reduce operand");
    add_operand(p);
    expect_word("init", "in reduce operand");
    expect(':', "after 'init'");
    ValueRef r = parse_value_ref();
    inits.push_back(resolve(r));
    init_pos.push_back(r.pos);
    expect(')', "after reduce init value");
  } while (consume(','));
  p.operands.insert(p.operands.end(), inits.begin(), inits.end());
  p.operand_pos.insert(p.operand_pos.end(), init_pos.begin(), init_pos.end());
  const bool compact = consume_word("applies");
  std::string inner;
  if (compact) {
    ws();
    const size_t at = pos_;
    inner = cur() == '"' ? parse_string() : std::string(ident("reduction op name"));
    if (!syntax::is_compact_reducer(inner))
      fail(at, "the op of a compact reduce must be a commutative binary StableHLO op, found " +
                   quoted(inner));
  }
  expect_word("across", "in reduce");
  expect_word("dimensions", "in reduce");
  expect('=', "after 'dimensions'");
  p.attrs.push_back({"dimensions", Attribute::dense_array(parse_int_list("reduce dimensions"))});
  parse_optional_attr_dict(p.attrs);
  type_spec_functional(p);
  if (compact) {
    if (p.operands[0]->type.is_token) fail(p.pos, "reduce of a token");
    const Type scalar = Type::tensor({}, p.operands[0]->type.dtype);
    auto region = std::make_unique<Region>();
    Block& b = region->add_block();
    Value* lhs = b.add_argument(scalar);
    Value* rhs = b.add_argument(scalar);
    auto op = make_op(inner, {lhs, rhs}, {scalar});
    auto [l, c] = line_col(p.pos);
    op->line = l;
    op->column = c;
    Value* r = op->result(0);
    b.push_back(std::move(op));
    auto ret = make_op("stablehlo.return", {r}, {});
    ret->line = l;
    ret->column = c;
    b.push_back(std::move(ret));
    p.regions.push_back(std::move(region));
    compact_reduce_ = true;
    return;
  }
  expect_word("reducer", "before the reduce body");
  std::vector<ArgDef> firsts, seconds;
  while (consume('(')) {
    firsts.push_back(parse_arg_def());
    expect(',', "between reducer arguments");
    seconds.push_back(parse_arg_def());
    expect(')', "after reducer arguments");
  }
  firsts.insert(firsts.end(), seconds.begin(), seconds.end());
  p.regions.push_back(parse_region(&firsts));
}

// After the `:`: `(types) -> types`, `type` (the result; operands alike) or `types -> types`
// (chlo's form).
void Parser::parse_chlo_types(PendingOp& p) {
  ws();
  const size_t at = pos_;
  if (cur() == '(') {
    std::vector<Type> ins, outs;
    parse_function_type(&ins, &outs);
    check_operand_types(p, ins, at);
    p.result_types = std::move(outs);
    return;
  }
  std::vector<Type> types = parse_type_list();
  if (consume_arrow()) {
    check_operand_types(p, types, at);
    p.result_types = parse_result_types();
  } else if (types.size() == 1) {
    p.result_types = std::move(types);
  } else {
    fail(at, "expected '->' after the operand types of " + p.name);
  }
}

// The custom forms of the StableHLO reference interpreter's check and interpreter ops:
//   check.expect_eq_const %x, dense<...> : type          (also expect_almost_eq_const)
//   check.expect_almost_eq %a, %b(, tolerance = F)? : type  (also expect_eq, expect_close)
//   %r = interpreter.probe %x, probe_id = "id" : type
//   check.expect_serialized_eq %x, probe_id = "id"(, iter = N)? : type
//   interpreter.print %x : type
void Parser::parse_interpreter_op(PendingOp& p) {
  add_operand(p);
  const bool is_const = p.name.size() > 6 && p.name.ends_with("_const");
  if (is_const) {
    expect(',', "before the expected value of " + p.name);
    ws();
    if (peek_ident() != "dense" || peek(5) != '<')
      fail(pos_, "expected a dense<...> value in " + p.name + ", found " + found());
    p.attrs.push_back({"value", parse_dense(true)});
  } else if (p.name != "interpreter.probe" && p.name != "check.expect_serialized_eq" &&
             p.name != "interpreter.print" && consume(',')) {
    add_operand(p);
  }
  while (consume(',')) {
    ws();
    const size_t at = pos_;
    const std::string key(ident("attribute name"));
    expect('=', "after " + quoted(key));
    ws();
    if (key == "probe_id") {
      p.attrs.push_back({key, Attribute::string_attr(parse_string())});
    } else if (key == "tolerance") {
      NumTok t;
      uint64_t bits = 0;
      if (!scan_number(&t) || !decimal_to_float_bits(t.text, DType::F64, &bits))
        fail(at, "expected a number after 'tolerance ='");
      p.attrs.push_back(
          {key, make_float_attr(double_from_float_bits(bits, DType::F64), DType::F64)});
    } else if (key == "iter") {
      p.attrs.push_back({key, Attribute::integer_attr(parse_int64("iteration"), DType::I64)});
    } else {
      fail(at, "unknown attribute " + quoted(key) + " of " + p.name);
    }
  }
  parse_optional_attr_dict(p.attrs);
  if (is_const) return;  // the literal's type is the operand's
  expect(':', "before the type of " + p.name);
  const size_t at = pos_;
  Type t = parse_type();
  check_operand_types(p, std::vector<Type>(p.operands.size(), t), at);
  if (p.name == "interpreter.probe") p.result_types = {std::move(t)};
}

// chlo.top_k(%x, k = 3) attr-dict : type -> (values type, indices type)
void Parser::parse_chlo_top_k(PendingOp& p) {
  expect('(', "to start the operands of chlo.top_k");
  add_operand(p);
  expect(',', "after the operand of chlo.top_k");
  expect_word("k", "in chlo.top_k");
  expect('=', "after 'k'");
  ws();
  p.attrs.push_back({"k", Attribute::integer_attr(parse_int64("k"), DType::I64)});
  expect(')', "to close chlo.top_k");
  parse_optional_attr_dict(p.attrs);
  expect(':', "before the type of chlo.top_k");
  parse_chlo_types(p);
}

// chlo.scan(%inputs...) inits(%inits...) dimension=N attr-dict {body} : functional-type. The
// generic form's operandSegmentSizes says how many operands are inputs.
void Parser::parse_chlo_scan(PendingOp& p) {
  expect('(', "to start the inputs of chlo.scan");
  parse_operand_list(p);
  expect(')', "to close the inputs of chlo.scan");
  const int64_t num_inputs = static_cast<int64_t>(p.operands.size());
  expect_word("inits", "in chlo.scan");
  expect('(', "to start the inits of chlo.scan");
  parse_operand_list(p);
  expect(')', "to close the inits of chlo.scan");
  const int64_t num_inits = static_cast<int64_t>(p.operands.size()) - num_inputs;
  expect_word("dimension", "in chlo.scan");
  expect('=', "after 'dimension'");
  ws();
  p.attrs.push_back({"dimension", Attribute::integer_attr(parse_int64("dimension"), DType::I64)});
  p.attrs.push_back(
      {"operandSegmentSizes", Attribute::dense_array({num_inputs, num_inits}, DType::I32)});
  // A `{` opens the attribute dictionary when a name and `=`, `,` or `}` follow; else the body.
  ws();
  if (cur() == '{') {
    const size_t at = pos_;
    ++pos_;
    const std::string_view w = peek_ident();
    pos_ += w.size();
    ws();
    const bool is_dict = (!w.empty() && (cur() == '=' || cur() == ',' || cur() == '}')) ||
                         (w.empty() && cur() == '}');
    pos_ = at;
    if (is_dict) parse_optional_attr_dict(p.attrs);
  }
  p.regions.push_back(parse_region(nullptr));
  type_spec_functional(p);
}

void Parser::parse_convolution_window(PendingOp& p) {
  expect('{', "to start the convolution window");
  std::vector<std::string> seen;
  ws();
  if (cur() != '}') {
    do {
      ws();
      const size_t at = pos_;
      std::string key(ident("window attribute"));
      if (std::find(seen.begin(), seen.end(), key) != seen.end())
        fail(at, "duplicate window attribute " + quoted(key));
      seen.push_back(key);
      expect('=', "after window attribute name");
      if (key == "stride" || key == "lhs_dilate" || key == "rhs_dilate") {
        const char* name = key == "stride"       ? "window_strides"
                           : key == "lhs_dilate" ? "lhs_dilation"
                                                 : "rhs_dilation";
        p.attrs.push_back({name, Attribute::dense_array(parse_int_list(key))});
      } else if (key == "pad") {
        expect('[', "to start the padding");
        std::vector<int64_t> v;
        if (!consume(']')) {
          do {
            expect('[', "to start a padding pair");
            v.push_back(parse_int64("padding"));
            expect(',', "in padding pair");
            v.push_back(parse_int64("padding"));
            expect(']', "to close a padding pair");
          } while (consume(','));
          expect(']', "to close the padding");
        }
        const int64_t rows = static_cast<int64_t>(v.size() / 2);
        p.attrs.push_back(
            {"padding", Attribute::dense_elements(HostTensor::from_vector(v, {rows, 2}))});
      } else if (key == "reverse") {
        expect('[', "to start the window reversal");
        std::vector<int64_t> v;
        if (!consume(']')) {
          do {
            ws();
            std::string_view w = peek_ident();
            if (w == "true" || w == "false") {
              v.push_back(w == "true");
              pos_ += w.size();
            } else {
              const int64_t x = parse_int64("window reversal");
              if (x != 0 && x != 1) fail(at, "window reversal values must be booleans");
              v.push_back(x);
            }
          } while (consume(','));
          expect(']', "to close the window reversal");
        }
        p.attrs.push_back({"window_reversal", Attribute::dense_array(std::move(v), DType::Bool)});
      } else {
        fail(at, "unknown convolution window attribute " + quoted(key));
      }
    } while (consume(','));
  }
  expect('}', "to close the convolution window");
}

void Parser::parse_custom_op(PendingOp& p, const syntax::OpSyntax& s) {
  switch (s.form) {
    case Form::Elementwise:
      parse_operand_list(p);
      check_arity(p, s.num_operands);
      parse_optional_attr_dict(p.attrs);
      type_spec_same(p);
      return;
    case Form::Functional:
      parse_operand_list(p);
      check_arity(p, s.num_operands);
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    case Form::Compare: {
      ws();
      const size_t at = pos_;
      std::string_view dir = ident("comparison direction");
      if (!syntax::one_of(syntax::kComparisonDirections, dir))
        fail(at, "unknown comparison direction " + quoted(dir));
      p.attrs.push_back(
          {"comparison_direction", Attribute::enum_attr("comparison_direction", std::string(dir))});
      expect(',', "after the comparison direction");
      add_operand(p);
      expect(',', "between compare operands");
      add_operand(p);
      if (consume(',')) {
        ws();
        const size_t tat = pos_;
        std::string_view t = ident("comparison type");
        if (!syntax::one_of(syntax::kComparisonTypes, t))
          fail(tat, "unknown comparison type " + quoted(t));
        p.attrs.push_back(
            {"compare_type", Attribute::enum_attr("comparison_type", std::string(t))});
      }
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    }
    case Form::Constant: {
      parse_optional_attr_dict(p.attrs);
      ws();
      const size_t at = pos_;
      std::string_view w = peek_ident();
      if (w == "dense" && peek(5) == '<') {
        AttrRef v = parse_dense(true);
        p.result_types = {v->type ? *v->type : Type::tensor(v->tensor.shape(), v->tensor.dtype())};
        p.attrs.push_back({"value", std::move(v)});
        return;
      }
      if (w == "dense_resource" && peek(w.size()) == '<') {
        pos_ += w.size();
        pos_ = skip_balanced(pos_);
        expect(':', "after the dense_resource");
        p.result_types = {parse_type()};
        p.attrs.push_back({"value", Attribute::opaque(std::string(src_.substr(at, pos_ - at)))});
        return;
      }
      fail(at, "expected a dense<...> constant value, found " + found());
    }
    case Form::Iota:
      expect_word("dim", "in iota");
      expect('=', "after 'dim'");
      p.attrs.push_back(
          {"iota_dimension", Attribute::integer_attr(parse_int64("dimension"), DType::I64)});
      parse_optional_attr_dict(p.attrs);
      expect(':', "before the type of the iota");
      p.result_types = {parse_type()};
      return;
    case Form::Slice: {
      add_operand(p);
      expect('[', "to start the slice ranges");
      std::vector<int64_t> start, limit, stride;
      if (!consume(']')) {
        do {
          start.push_back(parse_int64("slice start"));
          expect(':', "in slice range");
          limit.push_back(parse_int64("slice limit"));
          stride.push_back(consume(':') ? parse_int64("slice stride") : 1);
        } while (consume(','));
        expect(']', "to close the slice ranges");
      }
      p.attrs.push_back({"start_indices", Attribute::dense_array(std::move(start))});
      p.attrs.push_back({"limit_indices", Attribute::dense_array(std::move(limit))});
      p.attrs.push_back({"strides", Attribute::dense_array(std::move(stride))});
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    }
    case Form::DynamicSlice:
      add_operand(p);
      expect(',', "after the dynamic_slice operand");
      parse_operands_with_commas(p, -1);
      expect_word("sizes", "in dynamic_slice");
      expect('=', "after 'sizes'");
      p.attrs.push_back({"slice_sizes", Attribute::dense_array(parse_int_list("slice sizes"))});
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    case Form::DimsList:
      parse_operands_with_commas(p, s.num_operands);
      expect_word(s.keyword, "in " + p.name);
      expect('=', "after " + quoted(s.keyword));
      p.attrs.push_back({std::string(s.attr), Attribute::dense_array(parse_int_list(s.keyword))});
      parse_optional_attr_dict(p.attrs);
      if (s.same_type) {
        type_spec_same(p);
      } else {
        type_spec_functional(p, 1);
      }
      return;
    case Form::DimValue:
      parse_operands_with_commas(p, s.num_operands);
      expect_word(s.keyword, "in " + p.name);
      expect('=', "after " + quoted(s.keyword));
      p.attrs.push_back(
          {std::string(s.attr), Attribute::integer_attr(parse_int64("dimension"), DType::I64)});
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    case Form::Concatenate:
      parse_operands_with_commas(p, -1);
      expect_word("dim", "in concatenate");
      expect('=', "after 'dim'");
      p.attrs.push_back(
          {"dimension", Attribute::integer_attr(parse_int64("dimension"), DType::I64)});
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    case Form::Pad:
      parse_operands_with_commas(p, 2);
      expect_word("low", "in pad");
      expect('=', "after 'low'");
      p.attrs.push_back(
          {"edge_padding_low", Attribute::dense_array(parse_int_list("low padding"))});
      expect(',', "after the low padding");
      expect_word("high", "in pad");
      expect('=', "after 'high'");
      p.attrs.push_back(
          {"edge_padding_high", Attribute::dense_array(parse_int_list("high padding"))});
      expect(',', "after the high padding");
      expect_word("interior", "in pad");
      expect('=', "after 'interior'");
      p.attrs.push_back(
          {"interior_padding", Attribute::dense_array(parse_int_list("interior padding"))});
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    case Form::DotGeneral: {
      parse_operands_with_commas(p, 2);
      std::vector<int64_t> lb, rb, lc, rc;
      if (consume_word("batching_dims")) {
        expect('=', "after 'batching_dims'");
        lb = parse_int_list("batching dimensions");
        expect_word("x", "between batching dimensions");
        rb = parse_int_list("batching dimensions");
        expect(',', "after the batching dimensions");
      }
      expect_word("contracting_dims", "in dot_general");
      expect('=', "after 'contracting_dims'");
      lc = parse_int_list("contracting dimensions");
      expect_word("x", "between contracting dimensions");
      rc = parse_int_list("contracting dimensions");
      std::vector<NamedAttribute> fields;
      if (!lb.empty()) fields.push_back({"lhs_batching_dimensions", Attribute::int_list(lb)});
      if (!rb.empty()) fields.push_back({"rhs_batching_dimensions", Attribute::int_list(rb)});
      if (!lc.empty()) fields.push_back({"lhs_contracting_dimensions", Attribute::int_list(lc)});
      if (!rc.empty()) fields.push_back({"rhs_contracting_dimensions", Attribute::int_list(rc)});
      p.attrs.push_back({"dot_dimension_numbers", Attribute::struct_attr("stablehlo.dot", fields)});
      while (consume(',')) {
        ws();
        const size_t at = pos_;
        if (consume_word("precision")) {
          expect('=', "after 'precision'");
          p.attrs.push_back({"precision_config", Attribute::array(parse_precision_list())});
        } else if (consume_word("algorithm")) {
          expect('=', "after 'algorithm'");
          ws();
          if (cur() != '<') fail(pos_, "expected '<' to start the dot algorithm");
          const size_t end = skip_balanced(pos_);
          AttrRef a = try_parse_struct("stablehlo.", "dot_algorithm", pos_ + 1, end - 1);
          if (!a)
            a = Attribute::opaque("#stablehlo.dot_algorithm" +
                                  std::string(src_.substr(pos_, end - pos_)));
          pos_ = end;
          p.attrs.push_back({"algorithm", std::move(a)});
        } else {
          fail(at, "expected 'precision' or 'algorithm', found " + found());
        }
      }
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    }
    case Form::Dot:
      add_operand(p);
      expect(',', "between dot operands");
      add_operand(p);
      if (consume(',')) {
        expect_word("precision", "in dot");
        expect('=', "after 'precision'");
        p.attrs.push_back({"precision_config", Attribute::array(parse_precision_list())});
      }
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    case Form::Convolution:
      expect('(', "to start the convolution operands");
      parse_operand_list(p);
      expect(')', "to close the convolution operands");
      check_arity(p, 2);
      expect_word("dim_numbers", "in convolution");
      expect('=', "after 'dim_numbers'");
      p.attrs.push_back({"dimension_numbers", parse_conv_dims()});
      expect(',', "after the convolution dimensions");
      expect_word("window", "in convolution");
      expect('=', "after 'window'");
      parse_convolution_window(p);
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    case Form::Reduce:
      parse_reduce(p);
      return;
    case Form::While: {
      expect('(', "to start the while operands");
      std::vector<ValueRef> iters;
      if (!consume(')')) {
        do {
          iters.push_back(parse_value_ref(false));
          expect('=', "after the iteration argument");
          add_operand(p);
        } while (consume(','));
        expect(')', "to close the while operands");
      }
      std::vector<Type> types;
      if (!p.operands.empty()) {
        expect(':', "before the while types");
        ws();
        const size_t at = pos_;
        types = parse_type_list();
        check_operand_types(p, types, at);
      }
      if (consume_word("attributes"))
        for (auto& a : parse_dict()) p.attrs.push_back(std::move(a));
      std::vector<ArgDef> args;
      for (size_t i = 0; i < iters.size(); ++i) {
        ArgDef a;
        a.name = std::string(iters[i].name);
        a.type = types[i];
        a.pos = iters[i].pos;
        args.push_back(std::move(a));
      }
      p.result_types = types;
      expect_word("cond", "in while");
      p.regions.push_back(parse_region(&args));
      expect_word("do", "in while");
      p.regions.push_back(parse_region(&args));
      return;
    }
    case Form::Select: {
      parse_operand_list(p);
      check_arity(p, 3);
      parse_optional_attr_dict(p.attrs);
      expect(':', "before the type of select");
      ws();
      const size_t at = pos_;
      if (cur() == '(') {
        std::vector<Type> ins, outs;
        parse_function_type(&ins, &outs);
        check_operand_types(p, ins, at);
        if (outs.size() != 1) fail(at, "select has one result");
        p.result_types = std::move(outs);
      } else {
        Type pred = parse_type();
        expect(',', "between the select types");
        Type t = parse_type();
        check_operand_types(p, {pred, t, t}, at);
        p.result_types = {t};
      }
      return;
    }
    case Form::CustomCall:
    case Form::Call: {
      std::string target = parse_symbol();
      expect('(', "to start the operands");
      parse_operand_list(p);
      expect(')', "to close the operands");
      if (s.form == Form::CustomCall) {
        p.attrs.push_back({"call_target_name", Attribute::string_attr(std::move(target))});
      } else {
        p.attrs.push_back({"callee", Attribute::symbol(std::move(target))});
      }
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p);
      return;
    }
    case Form::Return:
      parse_operand_list(p);
      parse_optional_attr_dict(p.attrs);
      if (!p.operands.empty()) {
        expect(':', "before the returned types");
        ws();
        const size_t at = pos_;
        check_operand_types(p, parse_type_list(), at);
      }
      return;
    case Form::OptimizationBarrier: {
      parse_optional_attr_dict(p.attrs);
      ws();
      if (cur() == '(') {
        ++pos_;
        expect(')', "in optimization_barrier without operands");
        return;
      }
      parse_operand_list(p);
      if (p.operands.empty()) fail(pos_, "expected operands or '()', found " + found());
      expect(':', "before the types of optimization_barrier");
      ws();
      const size_t at = pos_;
      std::vector<Type> types = parse_type_list();
      check_operand_types(p, types, at);
      p.result_types = std::move(types);
      return;
    }
    case Form::ReducePrecision: {
      add_operand(p);
      expect(',', "after the operand");
      expect_word("format", "in reduce_precision");
      expect('=', "after 'format'");
      ws();
      const size_t at = pos_;
      std::string_view f = ident("exponent/mantissa format");
      uint64_t e = 0, m = 0;
      size_t i = 1;
      bool ok = f.size() >= 4 && f[0] == 'e' && is_digit(f[1]);
      while (ok && i < f.size() && is_digit(f[i]) && e < (1u << 30))
        e = e * 10 + static_cast<uint64_t>(f[i++] - '0');
      ok = ok && i + 1 < f.size() && f[i] == 'm' && is_digit(f[i + 1]);
      ++i;
      while (ok && i < f.size() && is_digit(f[i]) && m < (1u << 30))
        m = m * 10 + static_cast<uint64_t>(f[i++] - '0');
      ok = ok && i == f.size() && e <= INT32_MAX && m <= INT32_MAX;
      if (!ok) fail(at, "expected exponent/mantissa format like e5m10, found " + quoted(f));
      p.attrs.push_back(
          {"exponent_bits", Attribute::integer_attr(static_cast<int64_t>(e), DType::I32)});
      p.attrs.push_back(
          {"mantissa_bits", Attribute::integer_attr(static_cast<int64_t>(m), DType::I32)});
      parse_optional_attr_dict(p.attrs);
      type_spec_same(p);
      return;
    }
    case Form::EnumKeyword:
      parse_operands_with_commas(p, s.num_operands);
      expect_word(s.keyword, "in " + p.name);
      expect('=', "after " + quoted(s.keyword));
      p.attrs.push_back(
          {std::string(s.attr),
           Attribute::enum_attr(std::string(s.enum_name), std::string(ident("enum value")))});
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p);
      return;
    case Form::Fft:
      parse_operands_with_commas(p, 1);
      expect_word("type", "in fft");
      expect('=', "after 'type'");
      p.attrs.push_back(
          {"fft_type", Attribute::enum_attr("fft_type", std::string(ident("FFT type")))});
      expect(',', "after the FFT type");
      expect_word("length", "in fft");
      expect('=', "after 'length'");
      p.attrs.push_back({"fft_length", Attribute::dense_array(parse_int_list("FFT length"))});
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    case Form::Einsum:
      parse_operands_with_commas(p, s.num_operands);
      expect_word("config", "in " + p.name);
      expect('=', "after 'config'");
      p.attrs.push_back({"einsum_config", Attribute::string_attr(parse_string())});
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    case Form::Cholesky:
      add_operand(p);
      if (consume(',')) {
        expect_word("lower", "in cholesky");
        expect('=', "after 'lower'");
        ws();
        std::string_view b = ident("true or false");
        if (b != "true" && b != "false") fail(pos_ - b.size(), "expected true or false");
        p.attrs.push_back({"lower", Attribute::boolean_attr(b == "true")});
      }
      parse_optional_attr_dict(p.attrs);
      type_spec_same(p);
      return;
    case Form::Trace: {
      add_operand(p);
      expect(',', "after the trace operand");
      p.attrs.push_back({"tag", Attribute::string_attr(parse_string())});
      parse_optional_attr_dict(p.attrs);
      expect(':', "before the trace type");
      ws();
      const size_t at = pos_;
      check_operand_types(p, {parse_type()}, at);
      return;
    }
    case Form::TypeOnly:
      parse_optional_attr_dict(p.attrs);
      expect(':', "before the type of " + p.name);
      p.result_types = {parse_type()};
      return;
    case Form::Composite:
      p.attrs.push_back({"name", Attribute::string_attr(parse_string())});
      parse_operand_list(p);
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p);
      return;
    case Form::Generic:  // syntax::find never gives it
      break;
  }
}

void Parser::parse_op_into(Block& block) {
  ws();
  const size_t start = pos_;
  struct ResultDef {
    std::string_view name;
    uint64_t count;
    size_t pos;
  };
  std::vector<ResultDef> defs;
  uint64_t total = 0;
  if (cur() == '%') {
    do {
      ValueRef r = parse_value_ref(false);
      uint64_t count = 1;
      if (cur() == ':' && is_digit(peek(1))) {
        ++pos_;
        count = 0;
        while (is_digit(cur())) {
          count = count * 10 + static_cast<uint64_t>(cur() - '0');
          if (count > (uint64_t{1} << 32)) fail(r.pos, "result count is too large");
          ++pos_;
        }
        if (count == 0) fail(r.pos, "result group of zero values");
      }
      defs.push_back({r.name, count, r.pos});
      total += count;
    } while (consume(','));
    expect('=', "after the result names");
  }
  ws();
  PendingOp p;
  p.pos = start;
  const size_t name_pos = pos_;
  std::unique_ptr<Operation> op;
  compact_reduce_ = false;
  if (cur() == '"') {
    p.name = parse_string();
    if (p.name.empty()) fail(name_pos, "empty op name");
    parse_generic_body(p);
  } else {
    std::string_view w = peek_ident();
    if (w.empty()) fail(name_pos, "expected an operation, found " + found());
    pos_ += w.size();
    p.name = w == "return" ? "func.return" : w == "call" ? "func.call" : std::string(w);
    if (const syntax::OpSyntax* s = syntax::find(p.name)) {
      parse_custom_op(p, *s);
    } else if (ir::detail::is_sdy_op(p.name)) {
      SdyAdapter reader(*this, p);
      ir::detail::parse_sdy_op(p.name, reader);
    } else if (p.name.find('.') == std::string::npos || p.name == "func.func" ||
               p.name == "module" || p.name == "builtin.module") {
      fail(name_pos, "unknown operation " + quoted(p.name));
    } else {
      ws();
      if ((p.name.rfind("check.", 0) == 0 || p.name.rfind("interpreter.", 0) == 0) &&
          cur() == '%') {
        parse_interpreter_op(p);
      } else if (p.name == "chlo.top_k" && cur() == '(') {
        parse_chlo_top_k(p);
      } else if (p.name == "chlo.scan" && cur() == '(') {
        parse_chlo_scan(p);
      } else if (cur() == '(') {
        parse_generic_body(p);  // registered op without a custom form, written unquoted
      } else {
        parse_operand_list(p);
        parse_optional_attr_dict(p.attrs);
        if (!consume(':')) fail(name_pos, "unknown operation " + quoted(p.name));
        parse_chlo_types(p);
      }
    }
  }
  const bool compact = compact_reduce_;
  compact_reduce_ = false;
  op = finish(p);
  if (at_loc()) op->loc = parse_loc();
  if (compact && !op->loc.empty()) {
    // The compact reduce form gives its body the op's location, as MLIR does.
    Block& b = op->regions[0]->front();
    for (auto& a : b.arguments) a->loc = op->loc;
    for (auto& o : b.ops) o->loc = op->loc;
  }
  if (!defs.empty() && total != op->num_results())
    fail(start, "the op defines " + std::to_string(total) + " result(s), but " + op->name +
                    " has " + std::to_string(op->num_results()));
  auto [line, col] = line_col(start);
  op->line = line;
  op->column = col;
  size_t next = 0;
  for (const auto& d : defs) {
    std::vector<Value*> vals;
    for (uint64_t i = 0; i < d.count; ++i) {
      Value* v = op->result(next++);
      v->name_hint = std::string(d.name);
      vals.push_back(v);
    }
    define(d.name, std::move(vals), d.pos);
  }
  block.push_back(std::move(op));
}

void Parser::parse_function(Module& m, size_t at) {
  std::string visibility;
  std::string_view w = peek_ident();
  if (w == "public" || w == "private" || w == "nested") {
    visibility = std::string(w);
    pos_ += w.size();
  }
  ws();
  const size_t name_at = pos_;
  std::string name = parse_symbol();
  if (!function_names_.insert(name).second) fail(name_at, "redefinition of function @" + name);
  Function& fn = m.add_function(name);
  fn.visibility = std::move(visibility);
  fn.body.blocks.clear();
  values_.clear();
  scopes_.clear();
  expect('(', "to start the function arguments");
  std::vector<ArgDef> args;
  bool named = false, unnamed = false;
  ws();
  if (cur() != ')') {
    do {
      ws();
      ArgDef a;
      if (cur() == '%') {
        named = true;
        ValueRef r = parse_value_ref(false);
        a.name = std::string(r.name);
        a.pos = r.pos;
        expect(':', "after the argument name");
      } else {
        unnamed = true;
        a.pos = pos_;
      }
      if (named && unnamed) fail(a.pos, "mixed named and unnamed function arguments");
      a.type = parse_type();
      std::vector<NamedAttribute> attrs;
      ws();
      if (cur() == '{') attrs = parse_dict();
      if (at_loc()) a.loc = parse_loc();
      fn.arg_attrs.push_back(std::move(attrs));
      args.push_back(std::move(a));
    } while (consume(','));
  }
  expect(')', "to close the function arguments");
  if (consume_arrow()) {
    ws();
    if (cur() == '(') {
      ++pos_;
      if (!consume(')')) {
        do {
          fn.result_types.push_back(parse_type());
          ws();
          fn.result_attrs.push_back(cur() == '{' ? parse_dict() : std::vector<NamedAttribute>{});
        } while (consume(','));
        expect(')', "to close the function results");
      }
    } else {
      fn.result_types.push_back(parse_type());
      fn.result_attrs.emplace_back();
    }
  }
  if (consume_word("attributes")) fn.attributes = parse_dict();
  ws();
  if (cur() == '{') {
    if (unnamed) fail(pos_, "a function with a body needs named arguments");
    parse_region_into(fn.body, &args);
  } else {
    Block& b = fn.body.add_block();
    for (const auto& a : args) {
      Value* v = b.add_argument(a.type);
      v->loc = a.loc;
      v->name_hint = a.name;
    }
  }
  if (at_loc()) fn.loc = parse_loc();
  (void)at;
}

void Parser::parse_alias(Module& m) {
  const size_t at = pos_;
  const char sigil = cur();
  ++pos_;
  const size_t s = pos_;
  while (is_ident_char(cur())) ++pos_;
  if (pos_ == s) fail(at, std::string("expected alias name after '") + sigil + "'");
  expect('=', "after the alias name");
  ws();
  if (sigil == '#') {
    if (at_loc()) {
      parse_loc();
    } else {
      parse_attribute();
    }
  } else {
    skip_type_text();
  }
  m.aliases.push_back(std::string(src_.substr(at, pos_ - at)));
}

std::unique_ptr<Module> Parser::parse_top() {
  auto m = std::make_unique<Module>();
  bool have_module = false, have_functions = false;
  while (true) {
    ws();
    if (eof()) break;
    const size_t at = pos_;
    if (cur() == '#' || cur() == '!') {
      parse_alias(*m);
      continue;
    }
    if (src_.substr(pos_, 3) == "{-#") {
      const size_t end = src_.find("#-}", pos_ + 3);
      if (end == std::string_view::npos) fail(at, "unterminated '{-#' block");
      pos_ = end + 3;
      continue;
    }
    std::string_view w = peek_ident();
    if (w == "module" || w == "builtin.module") {
      if (have_module || have_functions) fail(at, "expected a single module");
      pos_ += w.size();
      have_module = true;
      ws();
      if (cur() == '@') m->name = parse_symbol();
      if (consume_word("attributes")) m->attributes = parse_dict();
      expect('{', "to start the module body");
      while (true) {
        ws();
        if (cur() == '}') break;
        if (eof()) fail(pos_, "unexpected end of input, expected '}' to close the module");
        const size_t fat = pos_;
        if (consume_word("sdy.mesh")) {
          // sdy.mesh @name = <...> {attrs}?, kept verbatim with the aliases (the printer writes it
          // back into the body: detail::is_sdy_mesh).
          parse_symbol();
          expect('=', "after the name of sdy.mesh");
          ws();
          if (cur() != '<') fail(pos_, "expected '<' to start the mesh, found " + found());
          pos_ = skip_balanced(pos_);
          size_t end = pos_;
          ws();
          pos_ = cur() == '{' ? skip_balanced(pos_) : end;  // its attr-dict, if any
          end = pos_;
          if (at_loc()) {
            parse_loc();
            end = pos_;
          }
          m->aliases.emplace_back(src_.substr(fat, end - fat));
          continue;
        }
        if (!consume_word("func.func"))
          fail(fat, "expected 'func.func' in the module body, found " + found());
        parse_function(*m, fat);
      }
      ++pos_;
      if (at_loc()) m->loc = parse_loc();
      continue;
    }
    if (w == "func.func") {
      if (have_module) fail(at, "function outside the module");
      pos_ += w.size();
      have_functions = true;
      parse_function(*m, at);
      continue;
    }
    fail(at, "expected 'module' or 'func.func', found " + found());
  }
  return m;
}

}  // namespace

std::unique_ptr<Module> parse_module(std::string_view text) {
  Parser p(text);
  return p.parse_top();
}

}  // namespace cujax::ir
