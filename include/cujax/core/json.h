// JSON values for the metadata files cujax reads and writes (Orbax checkpoints, exported
// artifacts, serving bundles, config.json, the server's requests). Objects keep their insertion
// order, and integers are kept apart from floats so that shapes and timestamps round-trip
// exactly. Parsing and writing go through nlohmann-json; this is the value type the rest of
// cujax reads, so that callers' errors name the file and field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cujax::json {

class Value {
 public:
  enum class Kind { Null, Bool, Int, Float, String, Array, Object };
  using Array = std::vector<Value>;
  using Object = std::vector<std::pair<std::string, Value>>;

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : kind_(Kind::Bool), bool_(b) {}
  Value(int i) : kind_(Kind::Int), int_(i) {}
  Value(int64_t i) : kind_(Kind::Int), int_(i) {}
  Value(double d) : kind_(Kind::Float), float_(d) {}
  Value(const char* s) : kind_(Kind::String), string_(s) {}
  Value(std::string s) : kind_(Kind::String), string_(std::move(s)) {}
  Value(Array a) : kind_(Kind::Array), array_(std::move(a)) {}
  static Value object(Object o = {});

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::Null; }
  bool is_object() const { return kind_ == Kind::Object; }
  bool is_array() const { return kind_ == Kind::Array; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float; }

  // Typed access; throws Error naming the expected and actual kind.
  bool as_bool() const;
  int64_t as_int() const;  // also a Float with an integral value
  double as_double() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  const Object& as_object() const;

  // Object members: get returns nullptr when absent; at throws Error naming the key.
  const Value* get(std::string_view key) const;
  const Value& at(std::string_view key) const;
  // Adds or replaces a member (the value must be an object).
  Value& set(std::string key, Value v);
  // Appends to an array.
  void push_back(Value v);

 private:
  Kind kind_ = Kind::Null;
  bool bool_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::string string_;
  Array array_;
  Object object_;
};

// Limits on untrusted input: deeper nesting or a longer text is an Error, not a crash.
inline constexpr size_t kMaxDepth = 256;
inline constexpr size_t kMaxBytes = size_t{1} << 30;

// Strict RFC 8259 (no NaN/Infinity literals, no comments, strings valid UTF-8). Throws Error
// "<what>: <message> (byte offset N)" for malformed text; a key given twice keeps its last value.
Value parse(std::string_view text, const std::string& what = "JSON");
// Compact when indent < 0; otherwise one member per line, `indent` spaces per level. Non-finite
// floats are written as null and bytes that are not UTF-8 as U+FFFD.
std::string dump(const Value& v, int indent = -1);
// A JSON string literal for `s`, with quotes.
std::string quote(std::string_view s);

}  // namespace cujax::json
