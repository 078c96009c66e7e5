// The pretty syntax of Shardy's `sdy` dialect ops, which JAX writes in programs it exports with
// Shardy shardings. Each op is kept in its generic form (the printer writes that, and it parses
// back to the same op): `sdy.sharding_constraint %x <@mesh, [{"a"}]> : tensor<8xf32>` is the op
// "sdy.sharding_constraint" with the attribute sharding = #sdy.sharding<@mesh, [{"a"}]>. The
// module-level `sdy.mesh @mesh = <["a"=2]>` declarations are kept verbatim among the module's
// aliases, which the printer writes back at the start of the module body.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cujax/ir/ir.h"

namespace cujax::ir::detail {

// What parsing an sdy op needs of the StableHLO parser, for the op being parsed.
class SdyOpReader {
 public:
  virtual ~SdyOpReader() = default;
  virtual char peek() = 0;  // the next character after white space
  virtual bool consume(char c) = 0;
  virtual bool consume_word(std::string_view w) = 0;
  virtual void expect(char c, std::string_view context) = 0;
  virtual void expect_word(std::string_view w, std::string_view context) = 0;
  // The text of the balanced <...>, [...] or {...} at the cursor.
  virtual std::string balanced() = 0;
  virtual std::string word() = 0;  // an identifier or integer
  virtual void operand() = 0;      // `%v`, added to the op's operands
  virtual size_t num_operands() const = 0;
  virtual ir::Type type() = 0;
  virtual std::vector<ir::Type> type_list() = 0;    // `t` or `(t, ...)`
  virtual std::vector<ir::Type> comma_types() = 0;  // `t, t, ...`
  virtual void attr_dict() = 0;                     // an optional {...}, added to the op's
  virtual void add_attr(std::string name, AttrRef value) = 0;
  virtual void set_result_types(std::vector<ir::Type> types) = 0;
  // `(%a: t, ...) { ops }`: the op's region, its entry block taking those arguments.
  virtual void region_with_args() = 0;
  [[noreturn]] virtual void fail(const std::string& msg) = 0;
};

// Whether an entry of Module::aliases is an `sdy.mesh` declaration.
inline bool is_sdy_mesh(std::string_view alias) {
  return alias.starts_with("sdy.mesh ");
}

// Whether `name` is an sdy op with a pretty form parse_sdy_op reads.
bool is_sdy_op(std::string_view name);
// Reads the pretty form of sdy op `name` after its name.
void parse_sdy_op(std::string_view name, SdyOpReader& r);

}  // namespace cujax::ir::detail
