// The StableHLO text parser's state and pieces: the Parser class, whose members are defined
// in parser_lex.cpp (tokens, strings, numbers), parser_types.cpp, parser_attrs.cpp (attributes
// and dense literals), parser_ops.cpp (the pretty op forms of the op table) and parser.cpp
// (values, regions, ops, functions, the module).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "cujax/core/dynamic_shape.h"
#include "cujax/core/error.h"
#include "cujax/ir/ir.h"
#include "ir/asm_util.h"
#include "ir/op_table.h"
#include "ir/parser_limits.h"
#include "ir/sdy.h"

namespace cujax::ir::parse_detail {

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

inline std::string quoted_text(std::string_view s) {
  return "'" + std::string(s) + "'";
}

inline bool is_type_keyword(std::string_view w) {
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
  std::string found() const;

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

  void ws();

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
  size_t skip_balanced(size_t open);

  // Position after the string literal that starts at `open` (a '"').
  size_t skip_string(size_t open);

  std::string parse_string();

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
  bool scan_number(NumTok* t);

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
  uint64_t int_bits(const NumTok& t, DType dt);

  // Bits of an element of float type `dt`.
  uint64_t float_bits(const NumTok& t, DType dt);

  static int64_t sign_extend(uint64_t bits, int width) {
    if (width >= 64) return static_cast<int64_t>(bits);
    const uint64_t sign = uint64_t{1} << (width - 1);
    return static_cast<int64_t>((bits ^ sign) - sign);
  }

  // ---- types ---------------------------------------------------------------------------------

  Type parse_type();

  Type parse_tensor_body();

  // !quant.uniform<i8[<min:max>]:f32[:dim], scale[:zero_point] | {scale[:zero_point], ...}>
  QuantizedType parse_quantized_type();

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
        fail(at, "duplicate attribute " + quoted_text(names[i]) + " in " + std::string(what));
  }

  // { name = value, name, ... }
  std::vector<NamedAttribute> parse_dict();

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

  AttrRef parse_attribute();

  AttrRef parse_number_attr();

  // #alias, #stablehlo<enum VALUE>, #stablehlo.name<fields>, #dialect.anything<...>
  AttrRef parse_hash_attr();

  // The fields of #stablehlo.<kind><...> between body_begin and body_end (the closing '>');
  // nullptr (position restored) when the body is not a plain `key = value` list.
  // #<dialect>.<kind><field = value, ...>; `dialect` is "stablehlo." or "chlo.".
  AttrRef try_parse_struct(std::string_view dialect, std::string_view kind, size_t body_begin,
                           size_t body_end);

  // [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]
  AttrRef parse_conv_dims();

  // array<i64: 1, 2>, array<i1: true, false>, array<f32: 1.0>, array<i64>
  AttrRef parse_dense_array();

  // dense<...> : tensor<...>. `strict`: an unsupported type is an error instead of an opaque
  // attribute.
  AttrRef parse_dense(bool strict);

  void parse_element(DType dt, std::byte* out);

  HostTensor expand_splat(const Type& type, const std::byte* elem, size_t at);

  HostTensor parse_dense_content(const Type& type, size_t lt, size_t gt);

  void parse_dense_list(size_t dim, const Type& type, std::vector<std::byte>& buf);

  // ---- values --------------------------------------------------------------------------------

  ValueRef parse_value_ref(bool allow_index = true);

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
  void parse_operands_with_commas(PendingOp& p, int count);

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
  void type_spec_same(PendingOp& p);

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

  std::unique_ptr<Operation> finish(PendingOp& p);

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
  void parse_region_into(Region& region, const std::vector<ArgDef>* entry_args);

  std::unique_ptr<Region> parse_region(const std::vector<ArgDef>* entry_args) {
    auto r = std::make_unique<Region>();
    parse_region_into(*r, entry_args);
    return r;
  }

  // "name"(operands) <{props}> (regions) {attrs} : (types) -> types
  void parse_generic_body(PendingOp& p);

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

}  // namespace cujax::ir::parse_detail
