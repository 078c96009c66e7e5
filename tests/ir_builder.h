// Building StableHLO modules by hand for the IR tests: a function @main, ops, regions, and the
// check that verify() fails with a message naming what is wrong.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cujax/ir/ir.h"
#include "cujax/ir/verifier.h"

namespace cujax::ir::testutil {

inline Type T(Shape shape, DType dtype = DType::F32) {
  return Type::tensor(std::move(shape), dtype);
}

// verify() throws VerifyError and its message contains every part.
inline void expect_error(const Module& m, const std::vector<std::string>& parts) {
  try {
    verify(m);
    ADD_FAILURE() << "expected a VerifyError containing '" << parts.front() << "'";
  } catch (const VerifyError& e) {
    const std::string msg = e.what();
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << msg << "\nlacks: " << p;
  }
}

// A module with one function @main under construction.
struct Builder {
  Module m;
  Function* f;
  Block* b;

  Builder(const std::vector<Type>& args, const std::vector<Type>& results) {
    m.name = "test";
    f = &m.add_function("main");
    f->visibility = "public";
    f->result_types = results;
    b = &f->entry();
    for (const auto& t : args)
      b->add_argument(t)->name_hint = "arg" + std::to_string(b->arguments.size() - 1);
  }
  Value* arg(size_t i) const { return b->arguments.at(i).get(); }
  Operation* op(Block& block, const std::string& name, std::vector<Value*> operands,
                const std::vector<Type>& results, int line = 0, int column = 0) {
    auto o = make_op(name, std::move(operands), results);
    o->line = line;
    o->column = column;
    return block.push_back(std::move(o));
  }
  Operation* op(const std::string& name, std::vector<Value*> operands,
                const std::vector<Type>& results, int line = 0, int column = 0) {
    return op(*b, name, std::move(operands), results, line, column);
  }
  void ret(std::vector<Value*> values) { op("func.return", std::move(values), {}); }
};

// A region with one block of scalar arguments whose body is `make(block)` then stablehlo.return.
inline Block& add_region(Operation* op, const std::vector<Type>& args) {
  Block& blk = op->add_region().add_block();
  for (const auto& t : args) blk.add_argument(t);
  return blk;
}

inline void add_binary_body(Operation* op, const std::string& name, DType t) {
  Block& blk = add_region(op, {T({}, t), T({}, t)});
  auto sum = make_op(name, {blk.arguments[0].get(), blk.arguments[1].get()}, {T({}, t)});
  Value* r = blk.push_back(std::move(sum))->result();
  blk.push_back(make_op("stablehlo.return", {r}, {}));
}

}  // namespace cujax::ir::testutil
