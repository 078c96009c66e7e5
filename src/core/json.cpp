#include "cujax/core/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "cujax/core/error.h"

namespace cujax::json {

namespace {

const char* kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::Null:
      return "null";
    case Value::Kind::Bool:
      return "a boolean";
    case Value::Kind::Int:
    case Value::Kind::Float:
      return "a number";
    case Value::Kind::String:
      return "a string";
    case Value::Kind::Array:
      return "an array";
    case Value::Kind::Object:
      return "an object";
  }
  return "?";
}

[[noreturn]] void wrong_kind(const char* want, Value::Kind got) {
  throw Error(std::string("JSON: expected ") + want + ", got " + kind_name(got));
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& what) : s_(text), what_(what) {}

  Value document() {
    Value v = value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const {
    throw Error(what_ + ": " + msg + " at offset " + std::to_string(pos_));
  }
  void skip_ws() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r'))
      ++pos_;
  }
  bool consume(char c) {
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c)) fail(std::string("expected '") + c + "'");
  }
  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Value value(int depth) {
    if (depth > 256) fail("nesting too deep");
    skip_ws();
    if (pos_ >= s_.size()) fail("unexpected end");
    const char c = s_[pos_];
    if (c == '{') {
      ++pos_;
      Value obj = Value::object();
      if (consume('}')) return obj;
      do {
        skip_ws();
        if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string key");
        std::string key = string();
        expect(':');
        obj.set(std::move(key), value(depth + 1));
      } while (consume(','));
      expect('}');
      return obj;
    }
    if (c == '[') {
      ++pos_;
      Value arr{Value::Array{}};
      if (consume(']')) return arr;
      do arr.push_back(value(depth + 1));
      while (consume(','));
      expect(']');
      return arr;
    }
    if (c == '"') return Value(string());
    if (literal("true")) return Value(true);
    if (literal("false")) return Value(false);
    if (literal("null")) return Value();
    // Python's json module writes these for non-finite floats.
    if (literal("NaN")) return Value(std::nan(""));
    if (literal("Infinity")) return Value(HUGE_VAL);
    if (literal("-Infinity")) return Value(-HUGE_VAL);
    return number();
  }

  Value number() {
    const size_t start = pos_;
    bool integral = true;
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c >= '0' && c <= '9') {
        ++pos_;
      } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
        integral = false;
        ++pos_;
      } else {
        break;
      }
    }
    const std::string_view tok = s_.substr(start, pos_ - start);
    if (tok.empty() || tok == "-") fail("unexpected character");
    if (integral) {
      int64_t i = 0;
      auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), i);
      if (ec == std::errc() && p == tok.data() + tok.size()) return Value(i);
    }
    double d = 0;
    auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), d);
    if (ec != std::errc() || p != tok.data() + tok.size()) {
      pos_ = start;
      fail("malformed number");
    }
    return Value(d);
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  uint32_t hex4() {
    if (pos_ + 4 > s_.size()) fail("short \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= c - '0';
      else if (c >= 'a' && c <= 'f')
        v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        v |= c - 'A' + 10;
      else
        fail("bad \\u escape");
    }
    return v;
  }

  std::string string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated string");
      const char e = s_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && s_.substr(pos_, 2) == "\\u") {
            pos_ += 2;
            const uint32_t lo = hex4();
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          fail("bad escape");
      }
    }
  }

  std::string_view s_;
  const std::string& what_;
  size_t pos_ = 0;
};

void dump_to(std::string& out, const Value& v, int indent, int level) {
  auto newline = [&](int lvl) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent * lvl), ' ');
  };
  switch (v.kind()) {
    case Value::Kind::Null:
      out += "null";
      return;
    case Value::Kind::Bool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::Int:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::Float: {
      const double d = v.as_double();
      if (std::isnan(d)) {
        out += "NaN";
      } else if (std::isinf(d)) {
        out += d > 0 ? "Infinity" : "-Infinity";
      } else {
        char buf[32];
        auto [p, ec] = std::to_chars(buf, buf + sizeof buf, d);
        std::string s(buf, p);
        if (s.find_first_of(".e") == std::string::npos) s += ".0";  // as Python prints floats
        out += s;
      }
      return;
    }
    case Value::Kind::String:
      out += quote(v.as_string());
      return;
    case Value::Kind::Array: {
      const auto& a = v.as_array();
      out += '[';
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) out += indent < 0 ? ", " : ",";
        newline(level + 1);
        dump_to(out, a[i], indent, level + 1);
      }
      if (!a.empty()) newline(level);
      out += ']';
      return;
    }
    case Value::Kind::Object: {
      const auto& o = v.as_object();
      out += '{';
      for (size_t i = 0; i < o.size(); ++i) {
        if (i) out += indent < 0 ? ", " : ",";
        newline(level + 1);
        out += quote(o[i].first);
        out += ": ";
        dump_to(out, o[i].second, indent, level + 1);
      }
      if (!o.empty()) newline(level);
      out += '}';
      return;
    }
  }
}

}  // namespace

Value Value::object(Object o) {
  Value v;
  v.kind_ = Kind::Object;
  v.object_ = std::move(o);
  return v;
}

bool Value::as_bool() const {
  if (kind_ != Kind::Bool) wrong_kind("a boolean", kind_);
  return bool_;
}
int64_t Value::as_int() const {
  if (kind_ == Kind::Int) return int_;
  if (kind_ == Kind::Float && std::floor(float_) == float_) return static_cast<int64_t>(float_);
  wrong_kind("an integer", kind_);
}
double Value::as_double() const {
  if (kind_ == Kind::Int) return static_cast<double>(int_);
  if (kind_ != Kind::Float) wrong_kind("a number", kind_);
  return float_;
}
const std::string& Value::as_string() const {
  if (kind_ != Kind::String) wrong_kind("a string", kind_);
  return string_;
}
const Value::Array& Value::as_array() const {
  if (kind_ != Kind::Array) wrong_kind("an array", kind_);
  return array_;
}
const Value::Object& Value::as_object() const {
  if (kind_ != Kind::Object) wrong_kind("an object", kind_);
  return object_;
}

const Value* Value::get(std::string_view key) const {
  for (const auto& [k, v] : as_object())
    if (k == key) return &v;
  return nullptr;
}
const Value& Value::at(std::string_view key) const {
  const Value* v = get(key);
  if (!v) throw Error("JSON: missing key \"" + std::string(key) + "\"");
  return *v;
}
Value& Value::set(std::string key, Value v) {
  if (kind_ != Kind::Object) wrong_kind("an object", kind_);
  for (auto& [k, x] : object_)
    if (k == key) return x = std::move(v);
  object_.emplace_back(std::move(key), std::move(v));
  return object_.back().second;
}
void Value::push_back(Value v) {
  if (kind_ != Kind::Array) wrong_kind("an array", kind_);
  array_.push_back(std::move(v));
}

Value parse(std::string_view text, const std::string& what) {
  return Parser(text, what).document();
}

std::string dump(const Value& v, int indent) {
  std::string out;
  dump_to(out, v, indent, 0);
  return out;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace cujax::json
