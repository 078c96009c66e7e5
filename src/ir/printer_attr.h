// How the printer spells types and attributes (as MLIR prints them with the StableHLO
// dialect), shared by the module printer and its op forms.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cujax/ir/ir.h"

namespace cujax::ir::print_detail {

void append_type(std::string& out, const Type& t);

void append_symbol(std::string& out, std::string_view name);

void append_attr_name(std::string& out, std::string_view name);

bool is_int_list(const Attribute& a);

void append_int_list(std::string& out, const std::vector<int64_t>& v);

std::vector<int64_t> list_values(const Attribute& a);

// The compact `[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]` spelling of #stablehlo.conv, when the
// struct has exactly the canonical fields and each list is a permutation.
bool conv_compact(const Attribute& a, std::string* out);

void append_attr(std::string& out, const Attribute& a);

void append_dict_body(std::string& out, const std::vector<NamedAttribute>& fields);

}  // namespace cujax::ir::print_detail
