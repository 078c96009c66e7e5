// The pretty forms of the ops (op_table.h gives each op's form): what MLIR prints for
// StableHLO, func and chlo ops, so that JAX's text prints back byte for byte.
#include "ir/printer_module.h"

namespace cujax::ir::print_detail {

bool ModulePrinter::pretty_chlo(const Operation& op) {
  if (!op.regions.empty() || op.operands.empty()) return false;
  if (op.name == "chlo.top_k") {
    const Attribute* k = op.attr("k");
    if (!k || k->kind != Kind::Integer || op.operands.size() != 1 || op.num_results() != 2)
      return false;
    out += op.name + "(" + name(op.operands[0]) + ", k = " + std::to_string(k->integer) + ")";
    rest_attrs(op, {"k"});
  } else {
    if (op.num_results() != 1) return false;
    out += op.name + " ";
    value_list(op.operands);
    rest_attrs(op, {});
  }
  out += " : ";
  type_list(operand_types(op));
  out += " -> ";
  if (op.num_results() == 1) {
    append_type(out, op.result(0)->type);
  } else {
    out += '(';
    type_list(result_types(op));
    out += ')';
  }
  return true;
}

bool ModulePrinter::pretty(const Operation& op, int indent, bool top) {
  if (starts_with(op.name, "chlo.")) return pretty_chlo(op);
  const syntax::OpSyntax* s = syntax::find(op.name);
  if (!s) return false;
  const bool arity_ok =
      s->num_operands < 0 || op.operands.size() == static_cast<size_t>(s->num_operands);
  if (!arity_ok) return false;
  if (!op.regions.empty() && s->form != Form::Reduce && s->form != Form::While) return false;
  const size_t nres = op.num_results();
  std::string head;
  if (top && op.name == "func.return") {
    head = "return";
  } else if (top && op.name == "func.call") {
    head = "call";
  } else {
    head = op.name;
  }
  switch (s->form) {
    case Form::Elementwise:
      if (nres != 1) return false;
      out += head;
      if (!op.operands.empty()) out += ' ';
      value_list(op.operands);
      rest_attrs(op, {});
      out += " : ";
      same_type(op);
      return true;
    case Form::Functional:
      if (nres != 1) return false;
      out += head + " ";
      value_list(op.operands);
      rest_attrs(op, {});
      out += " : ";
      functional_type(op);
      return true;
    case Form::Compare: {
      const Attribute* dir = enum_of(op, "comparison_direction", "comparison_direction");
      const Attribute* ct = op.attr("compare_type");
      if (!dir || nres != 1 || !syntax::one_of(syntax::kComparisonDirections, dir->enum_value))
        return false;
      if (ct && (!enum_of(op, "compare_type", "comparison_type") ||
                 !syntax::one_of(syntax::kComparisonTypes, ct->enum_value)))
        return false;
      out += head + "  " + dir->enum_value + ", ";
      value_list(op.operands);
      if (ct) out += ",  " + ct->enum_value;
      rest_attrs(op, {"comparison_direction", "compare_type"});
      out += " : ";
      functional_type(op);
      return true;
    }
    case Form::Constant: {
      if (nres != 1) return false;
      const Attribute* v = op.attr("value");
      if (!v) return false;
      const Type& rt = op.result(0)->type;
      if (v->kind == Kind::DenseElements) {
        if (rt.is_token ||
            rt != (v->type ? *v->type : Type::tensor(v->tensor.shape(), v->tensor.dtype())))
          return false;
      } else if (v->kind == Kind::Opaque && starts_with(v->text, "dense_resource<")) {
        std::string t;
        append_type(t, rt);
        if (v->text.size() < t.size() || v->text.substr(v->text.size() - t.size()) != t)
          return false;
      } else {
        return false;
      }
      out += head;
      rest_attrs(op, {"value"});
      out += ' ';
      append_attr(out, *v);
      return true;
    }
    case Form::Iota: {
      const Attribute* d = i64_int(op, "iota_dimension");
      if (!d || nres != 1) return false;
      out += head + " dim = " + std::to_string(d->integer);
      rest_attrs(op, {"iota_dimension"});
      out += " : ";
      append_type(out, op.result(0)->type);
      return true;
    }
    case Form::Slice: {
      const Attribute* st = i64_array(op, "start_indices");
      const Attribute* li = i64_array(op, "limit_indices");
      const Attribute* sd = i64_array(op, "strides");
      if (!st || !li || !sd || nres != 1 || st->ints.size() != li->ints.size() ||
          st->ints.size() != sd->ints.size())
        return false;
      out += head + " ";
      value_list(op.operands);
      out += " [";
      for (size_t i = 0; i < st->ints.size(); ++i) {
        if (i) out += ", ";
        out += std::to_string(st->ints[i]) + ":" + std::to_string(li->ints[i]);
        if (sd->ints[i] != 1) out += ":" + std::to_string(sd->ints[i]);
      }
      out += ']';
      rest_attrs(op, {"start_indices", "limit_indices", "strides"});
      out += " : ";
      functional_type(op);
      return true;
    }
    case Form::DynamicSlice: {
      const Attribute* sz = i64_array(op, "slice_sizes");
      if (!sz || nres != 1 || op.operands.empty()) return false;
      out += head + " ";
      value_list(op.operands);
      out += ", sizes = ";
      append_ints_attr(*sz);
      rest_attrs(op, {"slice_sizes"});
      out += " : ";
      functional_type(op);
      return true;
    }
    case Form::DimsList: {
      const Attribute* d = i64_array(op, s->attr);
      if (!d || nres != 1) return false;
      out += head + " ";
      value_list(op.operands);
      out += ", " + std::string(s->keyword) + " = ";
      append_ints_attr(*d);
      rest_attrs(op, {s->attr});
      out += " : ";
      if (s->same_type) {
        same_type(op);
      } else {
        functional_type(op);
      }
      return true;
    }
    case Form::DimValue: {
      const Attribute* d = i64_int(op, s->attr);
      if (!d || nres != 1) return false;
      out += head + " ";
      value_list(op.operands);
      out += ", dim = " + std::to_string(d->integer);
      rest_attrs(op, {s->attr});
      out += " : ";
      functional_type(op);
      return true;
    }
    case Form::Concatenate: {
      const Attribute* d = i64_int(op, "dimension");
      if (!d || nres != 1 || op.operands.empty()) return false;
      out += head + " ";
      value_list(op.operands);
      out += ", dim = " + std::to_string(d->integer);
      rest_attrs(op, {"dimension"});
      out += " : ";
      functional_type(op);
      return true;
    }
    case Form::Pad: {
      const Attribute* lo = i64_array(op, "edge_padding_low");
      const Attribute* hi = i64_array(op, "edge_padding_high");
      const Attribute* in = i64_array(op, "interior_padding");
      if (!lo || !hi || !in || nres != 1) return false;
      out += head + " ";
      value_list(op.operands);
      out += ", low = ";
      append_ints_attr(*lo);
      out += ", high = ";
      append_ints_attr(*hi);
      out += ", interior = ";
      append_ints_attr(*in);
      rest_attrs(op, {"edge_padding_low", "edge_padding_high", "interior_padding"});
      out += " : ";
      functional_type(op);
      return true;
    }
    case Form::DotGeneral: {
      const Attribute* dn = attr_of(op, "dot_dimension_numbers", Kind::Struct);
      if (!dn || dn->text != "stablehlo.dot" || nres != 1) return false;
      static constexpr std::string_view kOrder[] = {
          "lhs_batching_dimensions", "rhs_batching_dimensions", "lhs_contracting_dimensions",
          "rhs_contracting_dimensions"};
      std::vector<int64_t> dims[4];
      size_t next = 0;
      for (const auto& f : dn->fields) {
        while (next < 4 && kOrder[next] != f.name) ++next;
        if (next == 4 || !is_int_list(*f.value) || f.value->elements.empty()) return false;
        dims[next++] = list_values(*f.value);
      }
      const Attribute* prec = op.attr("precision_config");
      if (prec && !precision_list(prec)) return false;
      const Attribute* algo = op.attr("algorithm");
      std::string algo_text;
      if (algo) {
        if (algo->kind == Kind::Struct && algo->text == "stablehlo.dot_algorithm") {
          append_attr(algo_text, *algo);
          algo_text.erase(0, std::string_view("#stablehlo.dot_algorithm").size());
        } else if (algo->kind == Kind::Opaque &&
                   starts_with(algo->text, "#stablehlo.dot_algorithm<")) {
          algo_text = algo->text.substr(std::string_view("#stablehlo.dot_algorithm").size());
        } else {
          return false;
        }
      }
      out += head + " ";
      value_list(op.operands);
      out += ", ";
      if (!dims[0].empty() || !dims[1].empty()) {
        out += "batching_dims = ";
        append_int_list(out, dims[0]);
        out += " x ";
        append_int_list(out, dims[1]);
        out += ", ";
      }
      out += "contracting_dims = ";
      append_int_list(out, dims[2]);
      out += " x ";
      append_int_list(out, dims[3]);
      if (prec) {
        out += ", ";
        append_precision(*prec);
      }
      if (algo) out += ", algorithm = " + algo_text;
      rest_attrs(op, {"dot_dimension_numbers", "precision_config", "algorithm"});
      out += " : ";
      functional_type(op);
      return true;
    }
    case Form::Dot: {
      const Attribute* prec = op.attr("precision_config");
      if ((prec && !precision_list(prec)) || nres != 1) return false;
      out += head + " ";
      value_list(op.operands);
      if (prec) {
        out += ", ";
        append_precision(*prec);
      }
      rest_attrs(op, {"precision_config"});
      out += " : ";
      functional_type(op);
      return true;
    }
    case Form::Convolution: {
      const Attribute* dn = attr_of(op, "dimension_numbers", Kind::Struct);
      std::string dims;
      if (!dn || dn->text != "stablehlo.conv" || !conv_compact(*dn, &dims) || nres != 1)
        return false;
      const Attribute* stride = op.attr("window_strides");
      const Attribute* pad = op.attr("padding");
      const Attribute* lhs = op.attr("lhs_dilation");
      const Attribute* rhs = op.attr("rhs_dilation");
      const Attribute* rev = op.attr("window_reversal");
      if ((stride && !i64_array(op, "window_strides")) || (lhs && !i64_array(op, "lhs_dilation")) ||
          (rhs && !i64_array(op, "rhs_dilation")))
        return false;
      if (pad && (pad->kind != Kind::DenseElements || pad->tensor.dtype() != DType::I64 ||
                  pad->tensor.rank() != 2 || pad->tensor.shape()[1] != 2))
        return false;
      if (rev && (rev->kind != Kind::DenseArray || rev->dtype != DType::Bool)) return false;
      out += head + "(";
      value_list(op.operands);
      out += ") dim_numbers = " + dims + ", window = {";
      bool first = true;
      auto sep = [&] {
        if (!first) out += ", ";
        first = false;
      };
      if (stride) {
        sep();
        out += "stride = ";
        append_ints_attr(*stride);
      }
      if (pad) {
        sep();
        out += "pad = [";
        const int64_t* p = pad->tensor.data_as<int64_t>();
        for (int64_t i = 0; i < pad->tensor.shape()[0]; ++i) {
          if (i) out += ", ";
          out += "[" + std::to_string(p[2 * i]) + ", " + std::to_string(p[2 * i + 1]) + "]";
        }
        out += ']';
      }
      if (lhs) {
        sep();
        out += "lhs_dilate = ";
        append_ints_attr(*lhs);
      }
      if (rhs) {
        sep();
        out += "rhs_dilate = ";
        append_ints_attr(*rhs);
      }
      if (rev) {
        sep();
        out += "reverse = [";
        for (size_t i = 0; i < rev->ints.size(); ++i) {
          if (i) out += ", ";
          out += rev->ints[i] ? "true" : "false";
        }
        out += ']';
      }
      out += '}';
      rest_attrs(op, {"dimension_numbers", "window_strides", "padding", "lhs_dilation",
                      "rhs_dilation", "window_reversal"});
      out += " : ";
      functional_type(op);
      return true;
    }
    case Form::Reduce:
      return pretty_reduce(op, indent, head);
    case Form::While:
      return pretty_while(op, indent, head);
    case Form::Select: {
      if (nres != 1) return false;
      out += head + " ";
      value_list(op.operands);
      rest_attrs(op, {});
      out += " : ";
      const Type& r = op.result(0)->type;
      if (op.operands[1]->type == r && op.operands[2]->type == r) {
        append_type(out, op.operands[0]->type);
        out += ", ";
        append_type(out, r);
      } else {
        functional_type(op);
      }
      return true;
    }
    case Form::CustomCall:
    case Form::Call: {
      const bool cc = s->form == Form::CustomCall;
      const Attribute* t =
          cc ? attr_of(op, "call_target_name", Kind::String) : attr_of(op, "callee", Kind::Symbol);
      if (!t) return false;
      out += head + " ";
      append_symbol(out, t->text);
      out += '(';
      value_list(op.operands);
      out += ')';
      rest_attrs(op, {cc ? "call_target_name" : "callee"});
      out += " : ";
      functional_type(op);
      return true;
    }
    case Form::Return:
      if (nres != 0) return false;
      out += head;
      if (!op.operands.empty()) out += ' ';
      value_list(op.operands);
      rest_attrs(op, {});
      if (!op.operands.empty()) {
        out += " : ";
        type_list(operand_types(op));
      }
      return true;
    case Form::OptimizationBarrier: {
      if (operand_types(op) != result_types(op)) return false;
      out += head;
      rest_attrs(op, {});
      if (op.operands.empty()) {
        out += " ()";
        return true;
      }
      out += ' ';
      value_list(op.operands);
      out += " : ";
      type_list(operand_types(op));
      return true;
    }
    case Form::ReducePrecision: {
      const Attribute* e = attr_of(op, "exponent_bits", Kind::Integer);
      const Attribute* m = attr_of(op, "mantissa_bits", Kind::Integer);
      if (!e || !m || e->dtype != DType::I32 || m->dtype != DType::I32 || e->integer < 0 ||
          m->integer < 0 || e->integer > INT32_MAX || m->integer > INT32_MAX || nres != 1)
        return false;
      out += head + " ";
      value_list(op.operands);
      out += ", format = e" + std::to_string(e->integer) + "m" + std::to_string(m->integer);
      rest_attrs(op, {"exponent_bits", "mantissa_bits"});
      out += " : ";
      same_type(op);
      return true;
    }
    case Form::EnumKeyword: {
      const Attribute* e = enum_of(op, s->attr, s->enum_name);
      if (!e) return false;
      out += head + " ";
      value_list(op.operands);
      out += ", " + std::string(s->keyword) + " =  " + e->enum_value;
      rest_attrs(op, {s->attr});
      out += " : ";
      functional_type(op);
      return true;
    }
    case Form::Fft: {
      const Attribute* t = enum_of(op, "fft_type", "fft_type");
      const Attribute* l = i64_array(op, "fft_length");
      if (!t || !l || nres != 1) return false;
      out += head + " ";
      value_list(op.operands);
      out += ", type =  " + t->enum_value + ", length = ";
      append_ints_attr(*l);
      rest_attrs(op, {"fft_type", "fft_length"});
      out += " : ";
      functional_type(op);
      return true;
    }
    case Form::Einsum: {
      const Attribute* c = attr_of(op, "einsum_config", Kind::String);
      if (!c || nres != 1) return false;
      out += head + " ";
      value_list(op.operands);
      out += ", config = " + quote_string(c->text);
      rest_attrs(op, {"einsum_config"});
      out += " : ";
      functional_type(op);
      return true;
    }
    case Form::Cholesky: {
      const Attribute* l = op.attr("lower");
      if ((l && l->kind != Kind::Bool) || nres != 1) return false;
      out += head + " ";
      value_list(op.operands);
      if (l) out += std::string(", lower = ") + (l->boolean ? "true" : "false");
      rest_attrs(op, {"lower"});
      out += " : ";
      same_type(op);
      return true;
    }
    case Form::Trace: {
      const Attribute* t = attr_of(op, "tag", Kind::String);
      if (!t || nres != 0) return false;
      out += head + " ";
      value_list(op.operands);
      out += ", " + quote_string(t->text);
      rest_attrs(op, {"tag"});
      out += " : ";
      append_type(out, op.operands[0]->type);
      return true;
    }
    case Form::TypeOnly:
      if (nres != 1) return false;
      out += head;
      rest_attrs(op, {});
      out += " : ";
      append_type(out, op.result(0)->type);
      return true;
    case Form::Composite: {
      const Attribute* n = attr_of(op, "name", Kind::String);
      if (!n) return false;
      out += head + " " + quote_string(n->text);
      if (!op.operands.empty()) out += ' ';
      value_list(op.operands);
      rest_attrs(op, {"name"});
      out += " : ";
      functional_type(op);
      return true;
    }
    case Form::Generic:  // syntax::find never gives it
      break;
  }
  return false;
}

bool ModulePrinter::reduce_is_compact(const Operation& op) {
  if (op.operands.size() != 2 || op.regions.size() != 1) return false;
  const Region& r = *op.regions[0];
  if (r.blocks.size() != 1) return false;
  const Block& b = *r.blocks[0];
  if (b.arguments.size() != 2 || b.ops.size() != 2 || op.operands[0]->type.is_token) return false;
  const Type scalar = Type::tensor({}, op.operands[0]->type.dtype);
  const Operation& inner = *b.ops[0];
  const Operation& ret = *b.ops[1];
  if (!syntax::is_compact_reducer(inner.name) || inner.operands.size() != 2 ||
      inner.operands[0] != b.arguments[0].get() || inner.operands[1] != b.arguments[1].get() ||
      inner.num_results() != 1 || !inner.attributes.empty() || !inner.regions.empty() ||
      inner.result(0)->type != scalar)
    return false;
  if (ret.name != "stablehlo.return" || ret.operands.size() != 1 ||
      ret.operands[0] != inner.result(0) || ret.num_results() != 0 || !ret.attributes.empty() ||
      !ret.regions.empty())
    return false;
  for (const auto& a : b.arguments)
    if (a->type != scalar || a->loc != op.loc) return false;
  return inner.loc == op.loc && ret.loc == op.loc;
}

bool ModulePrinter::pretty_reduce(const Operation& op, int indent, const std::string& head) {
  const Attribute* dims = i64_array(op, "dimensions");
  const size_t n = op.operands.size() / 2;
  if (!dims || op.operands.size() % 2 || n == 0 || op.regions.size() != 1 ||
      op.regions[0]->blocks.empty())
    return false;
  const Block& body = *op.regions[0]->blocks[0];
  const bool compact = reduce_is_compact(op);
  if (!compact && body.arguments.size() != 2 * n) return false;
  out += head;
  for (size_t i = 0; i < n; ++i) {
    if (i) out += ", ";
    out += "(" + name(op.operands[i]) + " init: " + name(op.operands[i + n]) + ")";
  }
  if (compact) out += " applies " + body.ops[0]->name;
  out += " across dimensions = ";
  append_ints_attr(*dims);
  rest_attrs(op, {"dimensions"});
  out += " : ";
  functional_type(op);
  if (compact) return true;
  out += '\n';
  out.append(static_cast<size_t>(indent), ' ');
  out += " reducer";
  auto arg = [&](const Value* v) {
    out += name(v) + ": ";
    append_type(out, v->type);
    if (!v->loc.empty()) out += " " + v->loc;
  };
  for (size_t i = 0; i < n; ++i) {
    out += '(';
    arg(body.arguments[i].get());
    out += ", ";
    arg(body.arguments[i + n].get());
    out += ") ";
  }
  out += ' ';
  region(*op.regions[0], indent, false);
  return true;
}

bool ModulePrinter::pretty_while(const Operation& op, int indent, const std::string& head) {
  if (op.regions.size() != 2) return false;
  const std::vector<Type> types = operand_types(op);
  if (types != result_types(op)) return false;
  for (const auto& r : op.regions) {
    if (r->blocks.empty()) return false;
    const Block& b = *r->blocks[0];
    if (b.arguments.size() != types.size()) return false;
    for (size_t i = 0; i < types.size(); ++i)
      if (b.arguments[i]->type != types[i] || !b.arguments[i]->loc.empty()) return false;
  }
  const Block& body = *op.regions[1]->blocks[0];
  out += head + "(";
  for (size_t i = 0; i < op.operands.size(); ++i) {
    if (i) out += ", ";
    out += name(body.arguments[i].get()) + " = " + name(op.operands[i]);
  }
  out += ')';
  if (!op.operands.empty()) {
    out += " : ";
    type_list(types);
  }
  if (!op.attributes.empty()) {
    out += " attributes {";
    append_dict_body(out, op.attributes);
    out += '}';
  }
  out += '\n';
  out.append(static_cast<size_t>(indent), ' ');
  out += " cond ";
  region(*op.regions[0], indent, false);
  out += " do ";
  region(*op.regions[1], indent, false);
  return true;
}

}  // namespace cujax::ir::print_detail
