// Writes a module in the pretty syntax that JAX's `Lowered.as_text()` produces.
#pragma once

#include <string>

#include "cujax/ir/ir.h"

namespace cujax::ir {

std::string print_module(const Module& module);
std::string print_type(const Type& type);
std::string print_attribute(const Attribute& attr);

}  // namespace cujax::ir
