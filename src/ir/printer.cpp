// StableHLO text printer: the pretty syntax of JAX's `Lowered.as_text()` (MLIR's printer with
// the StableHLO and func dialects), generic op form for everything without a pretty form.
//
// Value names follow MLIR's rules so that JAX output prints back byte for byte: numbers per
// function in textual order, region values numbered after all values of the enclosing region,
// sibling regions starting from the same state, `%c`/`%cst` for constants, `%iterArg` for while
// arguments, `%argN` for entry block arguments, `_N` suffixes from one shared conflict counter.
#include "cujax/ir/printer.h"

#include "ir/printer_module.h"
#include "ir/sdy.h"

namespace cujax::ir {
namespace print_detail {

void ModulePrinter::module(const Module& m) {
  for (const auto& a : m.aliases)
    if (!is_loc_alias(a) && !ir::detail::is_sdy_mesh(a)) out += a + "\n";
  out += "module";
  if (!m.name.empty()) {
    out += ' ';
    append_symbol(out, m.name);
  }
  if (!m.attributes.empty()) {
    out += " attributes {";
    append_dict_body(out, m.attributes);
    out += '}';
  }
  out += " {\n";
  for (const auto& a : m.aliases)
    if (ir::detail::is_sdy_mesh(a)) out += "  " + a + "\n";
  for (const auto& f : m.functions) function(*f);
  out += '}';
  if (!m.loc.empty()) out += " " + m.loc;
  out += '\n';
  for (const auto& a : m.aliases)
    if (is_loc_alias(a)) out += a + "\n";
}

bool ModulePrinter::is_loc_alias(std::string_view a) {
  const size_t eq = a.find('=');
  if (eq == std::string_view::npos || a.empty() || a[0] != '#') return false;
  size_t i = eq + 1;
  while (i < a.size() && (a[i] == ' ' || a[i] == '\t')) ++i;
  return a.substr(i, 4) == "loc(";
}

std::string ModulePrinter::unique_name(const std::string& base, NameScope& scope, NameState& st) {
  if (!scope.contains(base)) {
    scope.used.insert(base);
    return base;
  }
  while (true) {
    std::string probe = base + "_" + std::to_string(st.next_conflict++);
    if (!scope.contains(probe)) {
      scope.used.insert(probe);
      return probe;
    }
  }
}

bool ModulePrinter::is_named_constant(const Operation& op) {
  return op.name == "stablehlo.constant" && op.num_results() == 1 && !op.result(0)->type.is_token;
}

void ModulePrinter::number_region(const Region& region, NameState st, const NameScope* parent) {
  NameScope scope;
  scope.parent = parent;
  const bool iter_args = region.parent_op && region.parent_op->name == "stablehlo.while";
  for (size_t bi = 0; bi < region.blocks.size(); ++bi) {
    const Block& b = *region.blocks[bi];
    for (const auto& arg : b.arguments) {
      if (bi == 0 && iter_args) {
        names_[arg.get()] = pct(unique_name("iterArg", scope, st));
      } else if (bi == 0) {
        names_[arg.get()] = pct(unique_name("arg" + std::to_string(st.next_arg++), scope, st));
      } else {
        names_[arg.get()] = pct(std::to_string(st.next_value++));
      }
    }
    for (const auto& op : b.ops) {
      if (op->num_results() == 0) continue;
      auto& groups = groups_[op.get()];
      if (is_named_constant(*op)) {
        const DType dt = op->result(0)->type.dtype;
        const std::string n = pct(unique_name(is_float(dt) ? "cst" : "c", scope, st));
        names_[op->result(0)] = n;
        groups.push_back({n, 1});
        continue;
      }
      if (op->name == "stablehlo.rng_bit_generator" && op->num_results() == 2) {
        // StableHLO names these results, as its OpAsmOpInterface does.
        for (size_t i = 0; i < 2; ++i) {
          const std::string n = pct(unique_name(i ? "output" : "output_state", scope, st));
          names_[op->result(i)] = n;
          groups.push_back({n, 1});
        }
        continue;
      }
      const std::string base = pct(std::to_string(st.next_value++));
      groups.push_back({base, op->num_results()});
      if (op->num_results() == 1) {
        names_[op->result(0)] = base;
      } else {
        for (size_t i = 0; i < op->num_results(); ++i)
          names_[op->result(i)] = base + "#" + std::to_string(i);
      }
    }
  }
  for (const auto& b : region.blocks)
    for (const auto& op : b->ops)
      for (const auto& r : op->regions) number_region(*r, st, &scope);
}

void ModulePrinter::block_args(const Block& b) {
  for (size_t i = 0; i < b.arguments.size(); ++i) {
    if (i) out += ", ";
    const Value* v = b.arguments[i].get();
    out += name(v);
    out += ": ";
    append_type(out, v->type);
    if (!v->loc.empty()) out += " " + v->loc;
  }
}

void ModulePrinter::region(const Region& r, int indent, bool entry_args) {
  out += "{\n";
  for (size_t bi = 0; bi < r.blocks.size(); ++bi) {
    const Block& b = *r.blocks[bi];
    if (bi > 0 || (entry_args && !b.arguments.empty())) {
      out.append(static_cast<size_t>(indent), ' ');
      out += "^bb" + std::to_string(bi);
      if (!b.arguments.empty()) {
        out += '(';
        block_args(b);
        out += ')';
      }
      out += ":\n";
    }
    for (const auto& op : b.ops) operation(*op, indent + 2, false);
  }
  out.append(static_cast<size_t>(indent), ' ');
  out += '}';
}

void ModulePrinter::generic(const Operation& op, int indent) {
  out += quote_string(op.name);
  out += '(';
  value_list(op.operands);
  out += ')';
  const bool props_dialect = starts_with(op.name, "stablehlo.") || starts_with(op.name, "func.");
  std::vector<NamedAttribute> props, discardable;
  for (const auto& a : op.attributes) {
    if (props_dialect && a.name.find('.') == std::string::npos) {
      props.push_back(a);
    } else {
      discardable.push_back(a);
    }
  }
  if (!props.empty()) {
    out += " <{";
    append_dict_body(out, props);
    out += "}>";
  }
  if (!op.regions.empty()) {
    out += " (";
    for (size_t i = 0; i < op.regions.size(); ++i) {
      if (i) out += ", ";
      region(*op.regions[i], indent, true);
    }
    out += ')';
  }
  if (!discardable.empty()) {
    out += " {";
    append_dict_body(out, discardable);
    out += '}';
  }
  out += " : ";
  functional_type(op);
}

void ModulePrinter::operation(const Operation& op, int indent, bool top) {
  out.append(static_cast<size_t>(indent), ' ');
  if (op.num_results() > 0) {
    auto it = groups_.find(&op);
    if (it == groups_.end()) {
      out += "%<<UNKNOWN SSA VALUE>>";
    } else {
      for (size_t i = 0; i < it->second.size(); ++i) {
        if (i) out += ", ";
        out += it->second[i].first;
        if (it->second[i].second > 1) out += ":" + std::to_string(it->second[i].second);
      }
    }
    out += " = ";
  }
  const size_t mark = out.size();
  if (!pretty(op, indent, top)) {
    out.resize(mark);
    generic(op, indent);
  }
  if (!op.loc.empty()) out += " " + op.loc;
  out += '\n';
}

void ModulePrinter::function(const Function& f) {
  names_.clear();
  groups_.clear();
  NameScope root;
  number_region(f.body, NameState{}, &root);
  out += "  func.func ";
  if (!f.visibility.empty()) out += f.visibility + " ";
  append_symbol(out, f.name);
  out += '(';
  const bool has_body =
      !f.body.blocks.empty() && (f.body.blocks.size() > 1 || !f.body.blocks[0]->ops.empty());
  if (!f.body.blocks.empty()) {
    const Block& entry = *f.body.blocks[0];
    for (size_t i = 0; i < entry.arguments.size(); ++i) {
      if (i) out += ", ";
      const Value* v = entry.arguments[i].get();
      if (has_body) out += name(v) + ": ";
      append_type(out, v->type);
      if (i < f.arg_attrs.size() && !f.arg_attrs[i].empty()) {
        out += " {";
        append_dict_body(out, f.arg_attrs[i]);
        out += '}';
      }
      if (!v->loc.empty()) out += " " + v->loc;
    }
  }
  out += ')';
  if (!f.result_types.empty()) {
    bool any_attrs = false;
    for (const auto& ra : f.result_attrs) any_attrs = any_attrs || !ra.empty();
    out += " -> ";
    const bool parens = f.result_types.size() > 1 || any_attrs;
    if (parens) out += '(';
    for (size_t i = 0; i < f.result_types.size(); ++i) {
      if (i) out += ", ";
      append_type(out, f.result_types[i]);
      if (i < f.result_attrs.size() && !f.result_attrs[i].empty()) {
        out += " {";
        append_dict_body(out, f.result_attrs[i]);
        out += '}';
      }
    }
    if (parens) out += ')';
  }
  if (!f.attributes.empty()) {
    out += " attributes {";
    append_dict_body(out, f.attributes);
    out += '}';
  }
  if (has_body) {
    out += " {\n";
    const Region& r = f.body;
    for (size_t bi = 0; bi < r.blocks.size(); ++bi) {
      const Block& b = *r.blocks[bi];
      if (bi > 0) {
        out += "  ^bb" + std::to_string(bi);
        if (!b.arguments.empty()) {
          out += '(';
          block_args(b);
          out += ')';
        }
        out += ":\n";
      }
      for (const auto& op : b.ops) operation(*op, 4, true);
    }
    out += "  }";
  }
  if (!f.loc.empty()) out += " " + f.loc;
  out += '\n';
}

}  // namespace print_detail

std::string print_module(const Module& module) {
  print_detail::ModulePrinter p;
  p.module(module);
  return std::move(p.out);
}

}  // namespace cujax::ir
