#include "cujax/core/json.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>

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

// Builds Values straight from nlohmann-json's SAX events: no intermediate DOM, objects keep
// their order, a repeated key keeps its last value (as Python's json module), and nesting
// deeper than kMaxDepth is an error rather than a deep recursion.
class Builder : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit Builder(const std::string& what) : what_(what) {}
  Value result;

  bool null() override { return add(Value()); }
  bool boolean(bool b) override { return add(Value(b)); }
  bool number_integer(number_integer_t i) override { return add(Value(int64_t{i})); }
  bool number_unsigned(number_unsigned_t u) override {
    // Beyond int64 the value is kept as the nearest double, as Python's json does for floats.
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return add(Value(static_cast<double>(u)));
    return add(Value(static_cast<int64_t>(u)));
  }
  bool number_float(number_float_t d, const string_t&) override { return add(Value(d)); }
  bool string(string_t& s) override { return add(Value(std::move(s))); }
  bool binary(binary_t&) override { return false; }  // not produced by the text format
  bool start_object(std::size_t) override {
    push();
    frames_.back().is_object = true;
    return true;
  }
  bool key(string_t& k) override {
    frames_.back().key = std::move(k);
    return true;
  }
  bool end_object() override { return pop(); }
  bool start_array(std::size_t) override {
    push();
    return true;
  }
  bool end_array() override { return pop(); }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    // nlohmann's message starts with "[json.exception.parse_error.N] "; the rest says what and
    // where (line, column).
    std::string msg = ex.what();
    if (const size_t p = msg.find("] "); msg.rfind("[json.exception.", 0) == 0 && p != msg.npos)
      msg = msg.substr(p + 2);
    throw Error(what_ + ": " + msg + " (byte offset " + std::to_string(position) + ")");
  }

 private:
  struct Frame {
    bool is_object = false;
    Value::Array array;
    Value::Object object;
    std::unordered_map<std::string, size_t> index;  // key -> position in `object`
    std::string key;
  };

  void push() {
    if (frames_.size() >= kMaxDepth)
      throw Error(what_ + ": nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    frames_.emplace_back();
  }
  bool pop() {
    Frame f = std::move(frames_.back());
    frames_.pop_back();
    return add(f.is_object ? Value::object(std::move(f.object)) : Value(std::move(f.array)));
  }
  bool add(Value v) {
    if (frames_.empty()) {
      result = std::move(v);
      return true;
    }
    Frame& f = frames_.back();
    if (!f.is_object) {
      f.array.push_back(std::move(v));
    } else if (auto [it, fresh] = f.index.try_emplace(f.key, f.object.size()); fresh) {
      f.object.emplace_back(std::move(f.key), std::move(v));
    } else {
      f.object[it->second].second = std::move(v);
    }
    return true;
  }

  const std::string& what_;
  std::vector<Frame> frames_;
};

// A scalar as nlohmann-json writes it: escaped, UTF-8-checked strings and shortest round-trip
// numbers. Bytes that are not UTF-8 (a token cut mid-character) become U+FFFD.
std::string scalar_text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Containers with Python's json.dumps separators (", " and ": " when compact), the form Orbax
// and REFERENCE.md show; the scalars inside go through nlohmann-json.
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
    case Value::Kind::Float:
      out += scalar_text(v.as_double());  // non-finite values are written as null
      return;
    case Value::Kind::String:
      out += scalar_text(v.as_string());
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
        out += scalar_text(o[i].first);
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
  if (kind_ == Kind::Float && std::floor(float_) == float_) {
    // -2^63 <= x < 2^63: beyond that the conversion is undefined.
    if (float_ >= -0x1p63 && float_ < 0x1p63) return static_cast<int64_t>(float_);
    throw Error("JSON: the number " + dump(*this) + " does not fit in a 64-bit integer");
  }
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
  if (text.size() > kMaxBytes)
    throw Error(what + ": " + std::to_string(text.size()) + " bytes, more than the " +
                std::to_string(kMaxBytes) + " a JSON document may have");
  Builder b(what);
  // Strict RFC 8259: no comments, no NaN/Infinity literals, valid UTF-8 in strings.
  nlohmann::json::sax_parse(text, &b, nlohmann::json::input_format_t::json, true, false);
  return std::move(b.result);
}

std::string dump(const Value& v, int indent) {
  std::string out;
  dump_to(out, v, indent, 0);
  return out;
}

std::string quote(std::string_view s) {
  return scalar_text(std::string(s));
}

}  // namespace cujax::json
