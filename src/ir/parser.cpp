// StableHLO text parser: the pretty syntax JAX prints and MLIR's generic op form.
//
// A hand-written recursive-descent parser over the raw text (no token buffer: the pretty syntax is
// context sensitive, `2x3xf32`, `[0:4:2]`, `e5m10`). Every recursion goes through a depth guard,
// every loop consumes input, and every allocation is bounded by the input size, except splat
// constants, which have a byte budget (parser_limits.h).
#include "cujax/ir/parser.h"
#include "cujax/core/dynamic_shape.h"

#include "ir/parser_limits.h"
#include "ir/parser_state.h"
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

namespace parse_detail {

ValueRef Parser::parse_value_ref(bool allow_index) {
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

void Parser::parse_operands_with_commas(PendingOp& p, int count) {
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

void Parser::type_spec_same(PendingOp& p) {
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

std::unique_ptr<Operation> Parser::finish(PendingOp& p) {
  std::stable_sort(
      p.attrs.begin(), p.attrs.end(),
      [](const NamedAttribute& a, const NamedAttribute& b) { return a.name < b.name; });
  for (size_t i = 1; i < p.attrs.size(); ++i)
    if (p.attrs[i].name == p.attrs[i - 1].name)
      fail(p.pos, "duplicate attribute " + quoted_text(p.attrs[i].name) + " on " + p.name);
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

void Parser::parse_region_into(Region& region, const std::vector<ArgDef>* entry_args) {
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

void Parser::parse_generic_body(PendingOp& p) {
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
      fail(name_pos, "unknown operation " + quoted_text(p.name));
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
        if (!consume(':')) fail(name_pos, "unknown operation " + quoted_text(p.name));
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

}  // namespace parse_detail

std::unique_ptr<Module> parse_module(std::string_view text) {
  parse_detail::Parser p(text);
  return p.parse_top();
}

}  // namespace cujax::ir
