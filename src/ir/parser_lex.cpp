// The parser's tokens: balanced spans, strings, symbols and numbers (parser_state.h).
#include "ir/parser_state.h"

namespace cujax::ir::parse_detail {

std::string Parser::found() const {
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
  return quoted_text(src_.substr(pos_, e - pos_));
}

void Parser::ws() {
  while (pos_ < src_.size()) {
    const char c = src_[pos_];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++pos_;
    } else if (c == '/' && peek(1) == '/') {
      const void* nl = std::memchr(src_.data() + pos_, '\n', src_.size() - pos_);
      pos_ = nl ? static_cast<size_t>(static_cast<const char*>(nl) - src_.data()) + 1 : src_.size();
    } else {
      break;
    }
  }
}

size_t Parser::skip_balanced(size_t open) {
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

size_t Parser::skip_string(size_t open) {
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

std::string Parser::parse_string() {
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

bool Parser::scan_number(NumTok* t) {
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

uint64_t Parser::int_bits(const NumTok& t, DType dt) {
  if (t.kind == NumKind::Float)
    fail(t.pos, "floating-point literal " + quoted_text(t.text) + " for integer type " +
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

uint64_t Parser::float_bits(const NumTok& t, DType dt) {
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
    fail(t.pos, "bad float literal " + quoted_text(t.text));
  return bits;
}

}  // namespace cujax::ir::parse_detail
