// The verifier's type rules for control flow, calls, returns and collectives (families of
// op_table.h).
#include <algorithm>
#include <string>
#include <vector>

#include "ir/verify_op.h"

namespace cujax::ir::rules {
namespace {

void check_while(OpCheck& c) {
  const std::vector<Type> types = c.operand_types();
  for (size_t i = 0; i < types.size(); ++i)
    c.result_is(i, types[i], "same as operand " + std::to_string(i));
  c.region_signature(0, "cond", types, {scalar(DType::Bool)});
  c.region_signature(1, "body", types, types);
}

void check_case(OpCheck& c) {
  c.operand_is(0, scalar(DType::I32), "the branch index");
  if (c.op().regions.empty()) c.fail("expects at least one branch region");
  const std::vector<Type> results = c.result_types();
  for (size_t i = 0; i < c.op().regions.size(); ++i)
    c.region_signature(i, "branch " + std::to_string(i), {}, results);
}

void check_if(OpCheck& c) {
  c.operand_is(0, scalar(DType::Bool), "the predicate");
  const std::vector<Type> results = c.result_types();
  c.region_signature(0, "true_branch", {}, results);
  c.region_signature(1, "false_branch", {}, results);
}

void check_optimization_barrier(OpCheck& c) {
  for (size_t i = 0; i < c.num_operands(); ++i)
    c.result_is(i, c.operand(i), "same as operand " + std::to_string(i));
}

void check_rng_bit_generator(OpCheck& c) {
  c.all_tensors();
  const Type& state = c.operand(0);
  if (state.rank() != 1 || !is_integer(state.dtype))
    c.fail("operand 0 has type " + state.str() + ", expected a 1-dimensional integer tensor");
  c.result_is(0, state, "the new state has the type of operand 0");
  c.result_kind(1, Kinds::IntOrFloat);
  auto alg = c.enum_value("rng_algorithm", {"DEFAULT", "THREE_FRY", "PHILOX"}, false);
  if (alg && state.dtype == DType::U64) {
    const int64_t n = state.shape[0];
    if ((*alg == "THREE_FRY" && n != 2) || (*alg == "PHILOX" && n != 2 && n != 3))
      c.fail("operand 0 has type " + state.str() + ", which is not a " + *alg + " state");
  }
}

void check_rng(OpCheck& c) {
  c.all_tensors();
  for (size_t i : {size_t{0}, size_t{1}})
    c.operand_is(i, scalar(c.result(0).dtype), "a scalar of the result's element type");
}

// Size of each group of a replica_groups attribute (its second dimension), or 0 when absent.
int64_t replica_group_size(const OpCheck& c) {
  const Attribute* a = c.attr("replica_groups");
  if (!a || a->kind != Attribute::Kind::DenseElements) return 0;
  const Shape& s = a->tensor.shape();
  if (s.size() != 2) c.fail("attribute 'replica_groups' must be a 2-dimensional tensor");
  Dims ids = c.ints("replica_groups");
  ids.erase(std::remove(ids.begin(), ids.end(), -1), ids.end());
  c.unique("replica_groups", ids);
  return s[1];
}

std::vector<Type> binary_reducer(DType t) {
  return {scalar(t), scalar(t)};
}

void check_all_reduce(OpCheck& c) {
  c.all_tensors();
  replica_group_size(c);
  const std::vector<Type> ret = c.region_returns(0, "computation");
  if (ret.size() != 1 || ret[0].rank() != 0)
    c.fail("region 'computation' returns " + types_str(ret) + ", expected one scalar");
  const DType e = ret[0].dtype;
  c.region_signature(0, "computation", binary_reducer(e), {scalar(e)});
  for (size_t i = 0; i < c.num_operands(); ++i) {
    if (!promotable(c.operand(i).dtype, e))
      c.fail("operand " + std::to_string(i) + " has type " + c.operand(i).str() +
             ", which does not fit the computation's element type " + std::string(mlir_name(e)));
    c.result_is(i, Type::tensor(c.operand(i).shape, e),
                "the shape of operand " + std::to_string(i));
  }
}

void check_all_gather(OpCheck& c) {
  c.all_tensors();
  const int64_t dim = c.integer("all_gather_dim");
  const int64_t group = replica_group_size(c);
  for (size_t i = 0; i < c.num_operands(); ++i) {
    const Type& t = c.operand(i);
    if (dim < 0 || dim >= t.rank())
      c.fail("all_gather_dim = " + std::to_string(dim) + " is out of range for operand " +
             std::to_string(i) + ", " + t.str());
    Shape s = t.shape;
    if (group > 0) {
      s[static_cast<size_t>(dim)] *= group;
      c.result_is(i, Type::tensor(s, t.dtype),
                  "operand " + std::to_string(i) + " gathered from " + std::to_string(group) +
                      " processes along dimension " + std::to_string(dim));
    } else if (c.result(i).dtype != t.dtype || c.result(i).rank() != t.rank()) {
      c.fail("result " + std::to_string(i) + " has type " + c.result(i).str() +
             ", expected the element type and rank of operand " + std::to_string(i));
    }
  }
}

void check_reduce_scatter(OpCheck& c) {
  c.all_tensors();
  const Type& t = c.operand(0);
  const int64_t dim = c.integer("scatter_dimension");
  if (dim < 0 || dim >= t.rank())
    c.fail("scatter_dimension = " + std::to_string(dim) + " is out of range for operand 0, " +
           t.str());
  const int64_t group = replica_group_size(c);
  const std::vector<Type> ret = c.region_returns(0, "computation");
  if (ret.size() != 1 || ret[0].rank() != 0)
    c.fail("region 'computation' returns " + types_str(ret) + ", expected one scalar");
  const DType e = ret[0].dtype;
  c.region_signature(0, "computation", binary_reducer(e), {scalar(e)});
  if (!promotable(t.dtype, e))
    c.fail("operand 0 has type " + t.str() + ", which does not fit the computation's element " +
           "type " + std::string(mlir_name(e)));
  Shape s = t.shape;
  if (group > 0) {
    if (s[static_cast<size_t>(dim)] % group)
      c.fail("dimension " + std::to_string(dim) + " of operand 0, " + t.str() +
             ", is not a multiple of the group size " + std::to_string(group));
    s[static_cast<size_t>(dim)] /= group;
    c.result_is(0, Type::tensor(s, e),
                "operand 0 split into " + std::to_string(group) + " parts along dimension " +
                    std::to_string(dim));
  }
}

void check_all_to_all(OpCheck& c) {
  c.all_tensors();
  const int64_t split = c.integer("split_dimension");
  const int64_t concat = c.integer("concat_dimension");
  const int64_t count = c.integer("split_count");
  if (count <= 0) c.fail("split_count = " + std::to_string(count) + ", expected > 0");
  replica_group_size(c);
  for (size_t i = 0; i < c.num_operands(); ++i) {
    const Type& t = c.operand(i);
    for (int64_t d : {split, concat})
      if (d < 0 || d >= t.rank())
        c.fail("dimension " + std::to_string(d) + " is out of range for operand " +
               std::to_string(i) + ", " + t.str());
    Shape s = t.shape;
    if (s[static_cast<size_t>(split)] % count)
      c.fail("dimension " + std::to_string(split) + " of operand " + std::to_string(i) + ", " +
             t.str() + ", is not a multiple of split_count = " + std::to_string(count));
    s[static_cast<size_t>(split)] /= count;
    s[static_cast<size_t>(concat)] *= count;
    c.result_is(
        i, Type::tensor(s, t.dtype),
        "split along " + std::to_string(split) + ", joined along " + std::to_string(concat));
  }
}

void check_process_id(OpCheck& c) {
  c.result_is(0, scalar(DType::U32), "a 32-bit unsigned id");
}

void check_after_all(OpCheck& c) {
  for (size_t i = 0; i < c.num_operands(); ++i)
    if (!c.operand(i).is_token)
      c.fail("operand " + std::to_string(i) + " has type " + c.operand(i).str() +
             ", expected !stablehlo.token");
  c.result_is(0, Type::token(), "a token");
}

void check_collective_permute(OpCheck& c) {
  c.result_is(0, c.operand(0), "same as operand 0");
}

void check_call(OpCheck& c) {
  const Attribute* a = c.attr("callee");
  if (!a || (a->kind != Attribute::Kind::Symbol && a->kind != Attribute::Kind::String))
    c.fail("missing attribute 'callee'");
  const Function* f = c.module().lookup(a->text);
  if (!f) c.fail("calls @" + a->text + ", which is not defined in the module");
  const std::vector<Type> params = f->arg_types();
  const std::vector<Type> args = c.operand_types();
  if (args.size() != params.size())
    c.fail("passes " + std::to_string(args.size()) + " argument" + (args.size() == 1 ? "" : "s") +
           " to @" + f->name + ", which takes " + std::to_string(params.size()) + " " +
           types_str(params));
  for (size_t i = 0; i < args.size(); ++i)
    c.operand_is(i, params[i], "argument " + std::to_string(i) + " of @" + f->name);
  const std::vector<Type> results = c.result_types();
  if (results != f->result_types)
    c.fail("has result types " + types_str(results) + ", expected " + types_str(f->result_types) +
           " (the results of @" + f->name + ")");
}

void check_func_return(OpCheck& c) {
  const Function& f = c.function();
  const Operation& op = c.op();
  if (!op.parent || op.parent->parent != &f.body)
    c.fail("only allowed at the end of a function body (use stablehlo.return in regions)");
  if (c.num_results()) c.fail("has results");
  const std::vector<Type> got = c.operand_types();
  if (got.size() != f.result_types.size())
    c.fail("returns " + std::to_string(got.size()) + " value" + (got.size() == 1 ? "" : "s") + " " +
           types_str(got) + ", expected " + std::to_string(f.result_types.size()) + " " +
           types_str(f.result_types) + " (the results of @" + f.name + ")");
  for (size_t i = 0; i < got.size(); ++i)
    c.operand_is(i, f.result_types[i], "result " + std::to_string(i) + " of @" + f.name);
}

void check_stablehlo_return(OpCheck& c) {
  const Operation& op = c.op();
  if (!op.parent || !op.parent->parent || !op.parent->parent->parent_op)
    c.fail("only allowed at the end of an op's region (use func.return in functions)");
  if (c.num_results()) c.fail("has results");
}

}  // namespace

void add_control_rules(Checkers& m) {
  m["stablehlo.while"] = check_while;
  m["stablehlo.case"] = check_case;
  m["stablehlo.if"] = check_if;
  m["stablehlo.optimization_barrier"] = check_optimization_barrier;
  m["stablehlo.rng_bit_generator"] = check_rng_bit_generator;
  m["stablehlo.rng"] = check_rng;
  m["stablehlo.all_reduce"] = check_all_reduce;
  m["stablehlo.all_gather"] = check_all_gather;
  m["stablehlo.reduce_scatter"] = check_reduce_scatter;
  m["stablehlo.collective_permute"] = check_collective_permute;
  m["stablehlo.all_to_all"] = check_all_to_all;
  m["stablehlo.replica_id"] = check_process_id;
  m["stablehlo.partition_id"] = check_process_id;
  m["stablehlo.after_all"] = check_after_all;
  m["stablehlo.create_token"] = check_after_all;
  m["func.call"] = check_call;
  m["func.return"] = check_func_return;
  m["stablehlo.return"] = check_stablehlo_return;
  m["stablehlo.custom_call"] = [](OpCheck&) {};  // implementation-defined
}

}  // namespace cujax::ir::rules
