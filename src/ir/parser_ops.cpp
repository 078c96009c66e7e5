// The pretty op forms (op_table.h gives each op's form) and chlo's, as MLIR and JAX print
// them; parser.cpp falls back to the generic form for the others.
#include "ir/parser_state.h"

namespace cujax::ir::parse_detail {

void Parser::parse_reduce(PendingOp& p) {
  std::vector<Value*> inits;
  std::vector<size_t> init_pos;
  do {
    expect('(', "before reduce operand");
    add_operand(p);
    expect_word("init", "in reduce operand");
    expect(':', "after 'init'");
    ValueRef r = parse_value_ref();
    inits.push_back(resolve(r));
    init_pos.push_back(r.pos);
    expect(')', "after reduce init value");
  } while (consume(','));
  p.operands.insert(p.operands.end(), inits.begin(), inits.end());
  p.operand_pos.insert(p.operand_pos.end(), init_pos.begin(), init_pos.end());
  const bool compact = consume_word("applies");
  std::string inner;
  if (compact) {
    ws();
    const size_t at = pos_;
    inner = cur() == '"' ? parse_string() : std::string(ident("reduction op name"));
    if (!syntax::is_compact_reducer(inner))
      fail(at, "the op of a compact reduce must be a commutative binary StableHLO op, found " +
                   quoted_text(inner));
  }
  expect_word("across", "in reduce");
  expect_word("dimensions", "in reduce");
  expect('=', "after 'dimensions'");
  p.attrs.push_back({"dimensions", Attribute::dense_array(parse_int_list("reduce dimensions"))});
  parse_optional_attr_dict(p.attrs);
  type_spec_functional(p);
  if (compact) {
    if (p.operands[0]->type.is_token) fail(p.pos, "reduce of a token");
    const Type scalar = Type::tensor({}, p.operands[0]->type.dtype);
    auto region = std::make_unique<Region>();
    Block& b = region->add_block();
    Value* lhs = b.add_argument(scalar);
    Value* rhs = b.add_argument(scalar);
    auto op = make_op(inner, {lhs, rhs}, {scalar});
    auto [l, c] = line_col(p.pos);
    op->line = l;
    op->column = c;
    Value* r = op->result(0);
    b.push_back(std::move(op));
    auto ret = make_op("stablehlo.return", {r}, {});
    ret->line = l;
    ret->column = c;
    b.push_back(std::move(ret));
    p.regions.push_back(std::move(region));
    compact_reduce_ = true;
    return;
  }
  expect_word("reducer", "before the reduce body");
  std::vector<ArgDef> firsts, seconds;
  while (consume('(')) {
    firsts.push_back(parse_arg_def());
    expect(',', "between reducer arguments");
    seconds.push_back(parse_arg_def());
    expect(')', "after reducer arguments");
  }
  firsts.insert(firsts.end(), seconds.begin(), seconds.end());
  p.regions.push_back(parse_region(&firsts));
}

// After the `:`: `(types) -> types`, `type` (the result; operands alike) or `types -> types`
// (chlo's form).
void Parser::parse_chlo_types(PendingOp& p) {
  ws();
  const size_t at = pos_;
  if (cur() == '(') {
    std::vector<Type> ins, outs;
    parse_function_type(&ins, &outs);
    check_operand_types(p, ins, at);
    p.result_types = std::move(outs);
    return;
  }
  std::vector<Type> types = parse_type_list();
  if (consume_arrow()) {
    check_operand_types(p, types, at);
    p.result_types = parse_result_types();
  } else if (types.size() == 1) {
    p.result_types = std::move(types);
  } else {
    fail(at, "expected '->' after the operand types of " + p.name);
  }
}

// The custom forms of the StableHLO reference interpreter's check and interpreter ops:
//   check.expect_eq_const %x, dense<...> : type          (also expect_almost_eq_const)
//   check.expect_almost_eq %a, %b(, tolerance = F)? : type  (also expect_eq, expect_close)
//   %r = interpreter.probe %x, probe_id = "id" : type
//   check.expect_serialized_eq %x, probe_id = "id"(, iter = N)? : type
//   interpreter.print %x : type
void Parser::parse_interpreter_op(PendingOp& p) {
  add_operand(p);
  const bool is_const = p.name.size() > 6 && p.name.ends_with("_const");
  if (is_const) {
    expect(',', "before the expected value of " + p.name);
    ws();
    if (peek_ident() != "dense" || peek(5) != '<')
      fail(pos_, "expected a dense<...> value in " + p.name + ", found " + found());
    p.attrs.push_back({"value", parse_dense(true)});
  } else if (p.name != "interpreter.probe" && p.name != "check.expect_serialized_eq" &&
             p.name != "interpreter.print" && consume(',')) {
    add_operand(p);
  }
  while (consume(',')) {
    ws();
    const size_t at = pos_;
    const std::string key(ident("attribute name"));
    expect('=', "after " + quoted_text(key));
    ws();
    if (key == "probe_id") {
      p.attrs.push_back({key, Attribute::string_attr(parse_string())});
    } else if (key == "tolerance") {
      NumTok t;
      uint64_t bits = 0;
      if (!scan_number(&t) || !decimal_to_float_bits(t.text, DType::F64, &bits))
        fail(at, "expected a number after 'tolerance ='");
      p.attrs.push_back(
          {key, make_float_attr(double_from_float_bits(bits, DType::F64), DType::F64)});
    } else if (key == "iter") {
      p.attrs.push_back({key, Attribute::integer_attr(parse_int64("iteration"), DType::I64)});
    } else {
      fail(at, "unknown attribute " + quoted_text(key) + " of " + p.name);
    }
  }
  parse_optional_attr_dict(p.attrs);
  if (is_const) return;  // the literal's type is the operand's
  expect(':', "before the type of " + p.name);
  const size_t at = pos_;
  Type t = parse_type();
  check_operand_types(p, std::vector<Type>(p.operands.size(), t), at);
  if (p.name == "interpreter.probe") p.result_types = {std::move(t)};
}

// chlo.top_k(%x, k = 3) attr-dict : type -> (values type, indices type)
void Parser::parse_chlo_top_k(PendingOp& p) {
  expect('(', "to start the operands of chlo.top_k");
  add_operand(p);
  expect(',', "after the operand of chlo.top_k");
  expect_word("k", "in chlo.top_k");
  expect('=', "after 'k'");
  ws();
  p.attrs.push_back({"k", Attribute::integer_attr(parse_int64("k"), DType::I64)});
  expect(')', "to close chlo.top_k");
  parse_optional_attr_dict(p.attrs);
  expect(':', "before the type of chlo.top_k");
  parse_chlo_types(p);
}

// chlo.scan(%inputs...) inits(%inits...) dimension=N attr-dict {body} : functional-type. The
// generic form's operandSegmentSizes says how many operands are inputs.
void Parser::parse_chlo_scan(PendingOp& p) {
  expect('(', "to start the inputs of chlo.scan");
  parse_operand_list(p);
  expect(')', "to close the inputs of chlo.scan");
  const int64_t num_inputs = static_cast<int64_t>(p.operands.size());
  expect_word("inits", "in chlo.scan");
  expect('(', "to start the inits of chlo.scan");
  parse_operand_list(p);
  expect(')', "to close the inits of chlo.scan");
  const int64_t num_inits = static_cast<int64_t>(p.operands.size()) - num_inputs;
  expect_word("dimension", "in chlo.scan");
  expect('=', "after 'dimension'");
  ws();
  p.attrs.push_back({"dimension", Attribute::integer_attr(parse_int64("dimension"), DType::I64)});
  p.attrs.push_back(
      {"operandSegmentSizes", Attribute::dense_array({num_inputs, num_inits}, DType::I32)});
  // A `{` opens the attribute dictionary when a name and `=`, `,` or `}` follow; else the body.
  ws();
  if (cur() == '{') {
    const size_t at = pos_;
    ++pos_;
    const std::string_view w = peek_ident();
    pos_ += w.size();
    ws();
    const bool is_dict = (!w.empty() && (cur() == '=' || cur() == ',' || cur() == '}')) ||
                         (w.empty() && cur() == '}');
    pos_ = at;
    if (is_dict) parse_optional_attr_dict(p.attrs);
  }
  p.regions.push_back(parse_region(nullptr));
  type_spec_functional(p);
}

void Parser::parse_convolution_window(PendingOp& p) {
  expect('{', "to start the convolution window");
  std::vector<std::string> seen;
  ws();
  if (cur() != '}') {
    do {
      ws();
      const size_t at = pos_;
      std::string key(ident("window attribute"));
      if (std::find(seen.begin(), seen.end(), key) != seen.end())
        fail(at, "duplicate window attribute " + quoted_text(key));
      seen.push_back(key);
      expect('=', "after window attribute name");
      if (key == "stride" || key == "lhs_dilate" || key == "rhs_dilate") {
        const char* name = key == "stride"       ? "window_strides"
                           : key == "lhs_dilate" ? "lhs_dilation"
                                                 : "rhs_dilation";
        p.attrs.push_back({name, Attribute::dense_array(parse_int_list(key))});
      } else if (key == "pad") {
        expect('[', "to start the padding");
        std::vector<int64_t> v;
        if (!consume(']')) {
          do {
            expect('[', "to start a padding pair");
            v.push_back(parse_int64("padding"));
            expect(',', "in padding pair");
            v.push_back(parse_int64("padding"));
            expect(']', "to close a padding pair");
          } while (consume(','));
          expect(']', "to close the padding");
        }
        const int64_t rows = static_cast<int64_t>(v.size() / 2);
        p.attrs.push_back(
            {"padding", Attribute::dense_elements(HostTensor::from_vector(v, {rows, 2}))});
      } else if (key == "reverse") {
        expect('[', "to start the window reversal");
        std::vector<int64_t> v;
        if (!consume(']')) {
          do {
            ws();
            std::string_view w = peek_ident();
            if (w == "true" || w == "false") {
              v.push_back(w == "true");
              pos_ += w.size();
            } else {
              const int64_t x = parse_int64("window reversal");
              if (x != 0 && x != 1) fail(at, "window reversal values must be booleans");
              v.push_back(x);
            }
          } while (consume(','));
          expect(']', "to close the window reversal");
        }
        p.attrs.push_back({"window_reversal", Attribute::dense_array(std::move(v), DType::Bool)});
      } else {
        fail(at, "unknown convolution window attribute " + quoted_text(key));
      }
    } while (consume(','));
  }
  expect('}', "to close the convolution window");
}

void Parser::parse_custom_op(PendingOp& p, const syntax::OpSyntax& s) {
  switch (s.form) {
    case Form::Elementwise:
      parse_operand_list(p);
      check_arity(p, s.num_operands);
      parse_optional_attr_dict(p.attrs);
      type_spec_same(p);
      return;
    case Form::Functional:
      parse_operand_list(p);
      check_arity(p, s.num_operands);
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    case Form::Compare: {
      ws();
      const size_t at = pos_;
      std::string_view dir = ident("comparison direction");
      if (!syntax::one_of(syntax::kComparisonDirections, dir))
        fail(at, "unknown comparison direction " + quoted_text(dir));
      p.attrs.push_back(
          {"comparison_direction", Attribute::enum_attr("comparison_direction", std::string(dir))});
      expect(',', "after the comparison direction");
      add_operand(p);
      expect(',', "between compare operands");
      add_operand(p);
      if (consume(',')) {
        ws();
        const size_t tat = pos_;
        std::string_view t = ident("comparison type");
        if (!syntax::one_of(syntax::kComparisonTypes, t))
          fail(tat, "unknown comparison type " + quoted_text(t));
        p.attrs.push_back(
            {"compare_type", Attribute::enum_attr("comparison_type", std::string(t))});
      }
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    }
    case Form::Constant: {
      parse_optional_attr_dict(p.attrs);
      ws();
      const size_t at = pos_;
      std::string_view w = peek_ident();
      if (w == "dense" && peek(5) == '<') {
        AttrRef v = parse_dense(true);
        p.result_types = {v->type ? *v->type : Type::tensor(v->tensor.shape(), v->tensor.dtype())};
        p.attrs.push_back({"value", std::move(v)});
        return;
      }
      if (w == "dense_resource" && peek(w.size()) == '<') {
        pos_ += w.size();
        pos_ = skip_balanced(pos_);
        expect(':', "after the dense_resource");
        p.result_types = {parse_type()};
        p.attrs.push_back({"value", Attribute::opaque(std::string(src_.substr(at, pos_ - at)))});
        return;
      }
      fail(at, "expected a dense<...> constant value, found " + found());
    }
    case Form::Iota:
      expect_word("dim", "in iota");
      expect('=', "after 'dim'");
      p.attrs.push_back(
          {"iota_dimension", Attribute::integer_attr(parse_int64("dimension"), DType::I64)});
      parse_optional_attr_dict(p.attrs);
      expect(':', "before the type of the iota");
      p.result_types = {parse_type()};
      return;
    case Form::Slice: {
      add_operand(p);
      expect('[', "to start the slice ranges");
      std::vector<int64_t> start, limit, stride;
      if (!consume(']')) {
        do {
          start.push_back(parse_int64("slice start"));
          expect(':', "in slice range");
          limit.push_back(parse_int64("slice limit"));
          stride.push_back(consume(':') ? parse_int64("slice stride") : 1);
        } while (consume(','));
        expect(']', "to close the slice ranges");
      }
      p.attrs.push_back({"start_indices", Attribute::dense_array(std::move(start))});
      p.attrs.push_back({"limit_indices", Attribute::dense_array(std::move(limit))});
      p.attrs.push_back({"strides", Attribute::dense_array(std::move(stride))});
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    }
    case Form::DynamicSlice:
      add_operand(p);
      expect(',', "after the dynamic_slice operand");
      parse_operands_with_commas(p, -1);
      expect_word("sizes", "in dynamic_slice");
      expect('=', "after 'sizes'");
      p.attrs.push_back({"slice_sizes", Attribute::dense_array(parse_int_list("slice sizes"))});
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    case Form::DimsList:
      parse_operands_with_commas(p, s.num_operands);
      expect_word(s.keyword, "in " + p.name);
      expect('=', "after " + quoted_text(s.keyword));
      p.attrs.push_back({std::string(s.attr), Attribute::dense_array(parse_int_list(s.keyword))});
      parse_optional_attr_dict(p.attrs);
      if (s.same_type) {
        type_spec_same(p);
      } else {
        type_spec_functional(p, 1);
      }
      return;
    case Form::DimValue:
      parse_operands_with_commas(p, s.num_operands);
      expect_word(s.keyword, "in " + p.name);
      expect('=', "after " + quoted_text(s.keyword));
      p.attrs.push_back(
          {std::string(s.attr), Attribute::integer_attr(parse_int64("dimension"), DType::I64)});
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    case Form::Concatenate:
      parse_operands_with_commas(p, -1);
      expect_word("dim", "in concatenate");
      expect('=', "after 'dim'");
      p.attrs.push_back(
          {"dimension", Attribute::integer_attr(parse_int64("dimension"), DType::I64)});
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    case Form::Pad:
      parse_operands_with_commas(p, 2);
      expect_word("low", "in pad");
      expect('=', "after 'low'");
      p.attrs.push_back(
          {"edge_padding_low", Attribute::dense_array(parse_int_list("low padding"))});
      expect(',', "after the low padding");
      expect_word("high", "in pad");
      expect('=', "after 'high'");
      p.attrs.push_back(
          {"edge_padding_high", Attribute::dense_array(parse_int_list("high padding"))});
      expect(',', "after the high padding");
      expect_word("interior", "in pad");
      expect('=', "after 'interior'");
      p.attrs.push_back(
          {"interior_padding", Attribute::dense_array(parse_int_list("interior padding"))});
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    case Form::DotGeneral: {
      parse_operands_with_commas(p, 2);
      std::vector<int64_t> lb, rb, lc, rc;
      if (consume_word("batching_dims")) {
        expect('=', "after 'batching_dims'");
        lb = parse_int_list("batching dimensions");
        expect_word("x", "between batching dimensions");
        rb = parse_int_list("batching dimensions");
        expect(',', "after the batching dimensions");
      }
      expect_word("contracting_dims", "in dot_general");
      expect('=', "after 'contracting_dims'");
      lc = parse_int_list("contracting dimensions");
      expect_word("x", "between contracting dimensions");
      rc = parse_int_list("contracting dimensions");
      std::vector<NamedAttribute> fields;
      if (!lb.empty()) fields.push_back({"lhs_batching_dimensions", Attribute::int_list(lb)});
      if (!rb.empty()) fields.push_back({"rhs_batching_dimensions", Attribute::int_list(rb)});
      if (!lc.empty()) fields.push_back({"lhs_contracting_dimensions", Attribute::int_list(lc)});
      if (!rc.empty()) fields.push_back({"rhs_contracting_dimensions", Attribute::int_list(rc)});
      p.attrs.push_back({"dot_dimension_numbers", Attribute::struct_attr("stablehlo.dot", fields)});
      while (consume(',')) {
        ws();
        const size_t at = pos_;
        if (consume_word("precision")) {
          expect('=', "after 'precision'");
          p.attrs.push_back({"precision_config", Attribute::array(parse_precision_list())});
        } else if (consume_word("algorithm")) {
          expect('=', "after 'algorithm'");
          ws();
          if (cur() != '<') fail(pos_, "expected '<' to start the dot algorithm");
          const size_t end = skip_balanced(pos_);
          AttrRef a = try_parse_struct("stablehlo.", "dot_algorithm", pos_ + 1, end - 1);
          if (!a)
            a = Attribute::opaque("#stablehlo.dot_algorithm" +
                                  std::string(src_.substr(pos_, end - pos_)));
          pos_ = end;
          p.attrs.push_back({"algorithm", std::move(a)});
        } else {
          fail(at, "expected 'precision' or 'algorithm', found " + found());
        }
      }
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    }
    case Form::Dot:
      add_operand(p);
      expect(',', "between dot operands");
      add_operand(p);
      if (consume(',')) {
        expect_word("precision", "in dot");
        expect('=', "after 'precision'");
        p.attrs.push_back({"precision_config", Attribute::array(parse_precision_list())});
      }
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    case Form::Convolution:
      expect('(', "to start the convolution operands");
      parse_operand_list(p);
      expect(')', "to close the convolution operands");
      check_arity(p, 2);
      expect_word("dim_numbers", "in convolution");
      expect('=', "after 'dim_numbers'");
      p.attrs.push_back({"dimension_numbers", parse_conv_dims()});
      expect(',', "after the convolution dimensions");
      expect_word("window", "in convolution");
      expect('=', "after 'window'");
      parse_convolution_window(p);
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    case Form::Reduce:
      parse_reduce(p);
      return;
    case Form::While: {
      expect('(', "to start the while operands");
      std::vector<ValueRef> iters;
      if (!consume(')')) {
        do {
          iters.push_back(parse_value_ref(false));
          expect('=', "after the iteration argument");
          add_operand(p);
        } while (consume(','));
        expect(')', "to close the while operands");
      }
      std::vector<Type> types;
      if (!p.operands.empty()) {
        expect(':', "before the while types");
        ws();
        const size_t at = pos_;
        types = parse_type_list();
        check_operand_types(p, types, at);
      }
      if (consume_word("attributes"))
        for (auto& a : parse_dict()) p.attrs.push_back(std::move(a));
      std::vector<ArgDef> args;
      for (size_t i = 0; i < iters.size(); ++i) {
        ArgDef a;
        a.name = std::string(iters[i].name);
        a.type = types[i];
        a.pos = iters[i].pos;
        args.push_back(std::move(a));
      }
      p.result_types = types;
      expect_word("cond", "in while");
      p.regions.push_back(parse_region(&args));
      expect_word("do", "in while");
      p.regions.push_back(parse_region(&args));
      return;
    }
    case Form::Select: {
      parse_operand_list(p);
      check_arity(p, 3);
      parse_optional_attr_dict(p.attrs);
      expect(':', "before the type of select");
      ws();
      const size_t at = pos_;
      if (cur() == '(') {
        std::vector<Type> ins, outs;
        parse_function_type(&ins, &outs);
        check_operand_types(p, ins, at);
        if (outs.size() != 1) fail(at, "select has one result");
        p.result_types = std::move(outs);
      } else {
        Type pred = parse_type();
        expect(',', "between the select types");
        Type t = parse_type();
        check_operand_types(p, {pred, t, t}, at);
        p.result_types = {t};
      }
      return;
    }
    case Form::CustomCall:
    case Form::Call: {
      std::string target = parse_symbol();
      expect('(', "to start the operands");
      parse_operand_list(p);
      expect(')', "to close the operands");
      if (s.form == Form::CustomCall) {
        p.attrs.push_back({"call_target_name", Attribute::string_attr(std::move(target))});
      } else {
        p.attrs.push_back({"callee", Attribute::symbol(std::move(target))});
      }
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p);
      return;
    }
    case Form::Return:
      parse_operand_list(p);
      parse_optional_attr_dict(p.attrs);
      if (!p.operands.empty()) {
        expect(':', "before the returned types");
        ws();
        const size_t at = pos_;
        check_operand_types(p, parse_type_list(), at);
      }
      return;
    case Form::OptimizationBarrier: {
      parse_optional_attr_dict(p.attrs);
      ws();
      if (cur() == '(') {
        ++pos_;
        expect(')', "in optimization_barrier without operands");
        return;
      }
      parse_operand_list(p);
      if (p.operands.empty()) fail(pos_, "expected operands or '()', found " + found());
      expect(':', "before the types of optimization_barrier");
      ws();
      const size_t at = pos_;
      std::vector<Type> types = parse_type_list();
      check_operand_types(p, types, at);
      p.result_types = std::move(types);
      return;
    }
    case Form::ReducePrecision: {
      add_operand(p);
      expect(',', "after the operand");
      expect_word("format", "in reduce_precision");
      expect('=', "after 'format'");
      ws();
      const size_t at = pos_;
      std::string_view f = ident("exponent/mantissa format");
      uint64_t e = 0, m = 0;
      size_t i = 1;
      bool ok = f.size() >= 4 && f[0] == 'e' && is_digit(f[1]);
      while (ok && i < f.size() && is_digit(f[i]) && e < (1u << 30))
        e = e * 10 + static_cast<uint64_t>(f[i++] - '0');
      ok = ok && i + 1 < f.size() && f[i] == 'm' && is_digit(f[i + 1]);
      ++i;
      while (ok && i < f.size() && is_digit(f[i]) && m < (1u << 30))
        m = m * 10 + static_cast<uint64_t>(f[i++] - '0');
      ok = ok && i == f.size() && e <= INT32_MAX && m <= INT32_MAX;
      if (!ok) fail(at, "expected exponent/mantissa format like e5m10, found " + quoted_text(f));
      p.attrs.push_back(
          {"exponent_bits", Attribute::integer_attr(static_cast<int64_t>(e), DType::I32)});
      p.attrs.push_back(
          {"mantissa_bits", Attribute::integer_attr(static_cast<int64_t>(m), DType::I32)});
      parse_optional_attr_dict(p.attrs);
      type_spec_same(p);
      return;
    }
    case Form::EnumKeyword:
      parse_operands_with_commas(p, s.num_operands);
      expect_word(s.keyword, "in " + p.name);
      expect('=', "after " + quoted_text(s.keyword));
      p.attrs.push_back(
          {std::string(s.attr),
           Attribute::enum_attr(std::string(s.enum_name), std::string(ident("enum value")))});
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p);
      return;
    case Form::Fft:
      parse_operands_with_commas(p, 1);
      expect_word("type", "in fft");
      expect('=', "after 'type'");
      p.attrs.push_back(
          {"fft_type", Attribute::enum_attr("fft_type", std::string(ident("FFT type")))});
      expect(',', "after the FFT type");
      expect_word("length", "in fft");
      expect('=', "after 'length'");
      p.attrs.push_back({"fft_length", Attribute::dense_array(parse_int_list("FFT length"))});
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    case Form::Einsum:
      parse_operands_with_commas(p, s.num_operands);
      expect_word("config", "in " + p.name);
      expect('=', "after 'config'");
      p.attrs.push_back({"einsum_config", Attribute::string_attr(parse_string())});
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p, 1);
      return;
    case Form::Cholesky:
      add_operand(p);
      if (consume(',')) {
        expect_word("lower", "in cholesky");
        expect('=', "after 'lower'");
        ws();
        std::string_view b = ident("true or false");
        if (b != "true" && b != "false") fail(pos_ - b.size(), "expected true or false");
        p.attrs.push_back({"lower", Attribute::boolean_attr(b == "true")});
      }
      parse_optional_attr_dict(p.attrs);
      type_spec_same(p);
      return;
    case Form::Trace: {
      add_operand(p);
      expect(',', "after the trace operand");
      p.attrs.push_back({"tag", Attribute::string_attr(parse_string())});
      parse_optional_attr_dict(p.attrs);
      expect(':', "before the trace type");
      ws();
      const size_t at = pos_;
      check_operand_types(p, {parse_type()}, at);
      return;
    }
    case Form::TypeOnly:
      parse_optional_attr_dict(p.attrs);
      expect(':', "before the type of " + p.name);
      p.result_types = {parse_type()};
      return;
    case Form::Composite:
      p.attrs.push_back({"name", Attribute::string_attr(parse_string())});
      parse_operand_list(p);
      parse_optional_attr_dict(p.attrs);
      type_spec_functional(p);
      return;
    case Form::Generic:  // syntax::find never gives it
      break;
  }
}

}  // namespace cujax::ir::parse_detail
