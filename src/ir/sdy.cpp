#include "ir/sdy.h"

#include <array>

namespace cujax::ir::detail {

namespace {

constexpr std::array<std::string_view, 6> kSdyOps = {
    "sdy.sharding_constraint", "sdy.reshard", "sdy.propagation_barrier",
    "sdy.sharding_group",      "sdy.return",  "sdy.manual_computation"};

// `%x <@mesh, [...]> attr-dict : type`, the result of the operand's type.
void sharded_value(SdyOpReader& r) {
  r.operand();
  if (r.peek() != '<') r.fail("expected a sharding <@mesh, [...]> after the operand");
  r.add_attr("sharding", Attribute::opaque("#sdy.sharding" + r.balanced()));
  r.attr_dict();
  r.expect(':', "before the type");
  r.set_result_types({r.type()});
}

// `%x keyword=value attr-dict : type`, no result but the operand's type for a barrier.
void keyword_value(SdyOpReader& r, std::string_view keyword, bool has_result) {
  r.operand();
  r.expect_word(keyword, "after the operand");
  r.expect('=', "after the keyword");
  const std::string value = r.word();
  if (keyword == "group_id")
    r.add_attr(std::string(keyword), Attribute::integer_attr(std::stoll(value), DType::I64));
  else
    r.add_attr(std::string(keyword),
               Attribute::opaque("#sdy<propagation_direction " + value + ">"));
  r.attr_dict();
  r.expect(':', "before the type");
  const Type t = r.type();
  if (has_result) r.set_result_types({t});
}

// sdy.manual_computation(%a, ...) in_shardings=[...] out_shardings=[...] manual_axes={...}
//   (%arg: t, ...) { ... } attr-dict : (types) -> types
void manual_computation(SdyOpReader& r) {
  r.expect('(', "to start the operands");
  if (!r.consume(')')) {
    do {
      r.operand();
    } while (r.consume(','));
    r.expect(')', "to close the operands");
  }
  for (const char* key : {"in_shardings", "out_shardings"}) {
    r.expect_word(key, "in sdy.manual_computation");
    r.expect('=', "after the keyword");
    if (r.peek() != '[') r.fail(std::string("expected '[' to start ") + key);
    r.add_attr(key, Attribute::opaque("#sdy.sharding_per_value<" + r.balanced() + ">"));
  }
  r.expect_word("manual_axes", "in sdy.manual_computation");
  r.expect('=', "after the keyword");
  if (r.peek() != '{') r.fail("expected '{' to start manual_axes");
  r.add_attr("manual_axes", Attribute::opaque("#sdy<manual_axes" + r.balanced() + ">"));
  r.region_with_args();
  r.attr_dict();
  r.expect(':', "before the type");
  const std::vector<Type> ins = r.type_list();
  if (ins.size() != r.num_operands())
    r.fail(std::to_string(ins.size()) + " operand types for " + std::to_string(r.num_operands()) +
           " operands");
  r.expect('-', "before the result types");
  r.expect('>', "before the result types");
  r.set_result_types(r.type_list());
}

}  // namespace

bool is_sdy_op(std::string_view name) {
  for (std::string_view op : kSdyOps)
    if (op == name) return true;
  return false;
}

void parse_sdy_op(std::string_view name, SdyOpReader& r) {
  if (name == "sdy.sharding_constraint" || name == "sdy.reshard") return sharded_value(r);
  if (name == "sdy.propagation_barrier") return keyword_value(r, "allowed_direction", true);
  if (name == "sdy.sharding_group") return keyword_value(r, "group_id", false);
  if (name == "sdy.manual_computation") return manual_computation(r);
  // sdy.return attr-dict (%v, ... : types)?
  r.attr_dict();
  if (r.peek() != '%') return;
  do {
    r.operand();
  } while (r.consume(','));
  r.expect(':', "before the types of sdy.return");
  const std::vector<Type> types = r.comma_types();
  if (types.size() != r.num_operands())
    r.fail(std::to_string(types.size()) + " types for " + std::to_string(r.num_operands()) +
           " values");
}

}  // namespace cujax::ir::detail
