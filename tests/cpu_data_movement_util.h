// Helpers for the CPU data-movement tests (cpu_shape_test, cpu_indexing_test): build a
// one-op module with the IR builder API, run it on the cpu backend, compare results exactly.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cujax/core/host_tensor.h"
#include "cujax/ir/ir.h"
#include "cujax/runtime/backend.h"

namespace cujax::dmtest {

template <class T>
HostTensor tensor(const std::vector<T>& v, Shape shape) {
  return HostTensor::from_vector(v, std::move(shape));
}

template <class T>
HostTensor scalar(T v) {
  return HostTensor::from_vector(std::vector<T>{v}, {});
}

// A module `main(args...) { results = op(args...); return results }`.
class OneOp {
 public:
  OneOp() : fn_(module_.add_function("main")) {}

  // Adds a function argument bound to `t` at run time.
  ir::Value* arg(const HostTensor& t) {
    inputs_.push_back(t);
    return fn_.entry().add_argument(ir::Type::tensor(t.shape(), t.dtype()));
  }
  // Appends the op; attributes and regions are added to the returned op.
  ir::Operation& op(const std::string& name, std::vector<ir::Value*> operands,
                    const std::vector<ir::Type>& results) {
    op_ = fn_.entry().push_back(ir::make_op(name, std::move(operands), results));
    return *op_;
  }
  ir::Operation& op(const std::string& name, std::vector<ir::Value*> operands, Shape shape,
                    DType dtype) {
    return op(name, std::move(operands), {ir::Type::tensor(std::move(shape), dtype)});
  }
  std::vector<HostTensor> run_all() {
    std::vector<ir::Value*> rs;
    for (const auto& r : op_->results) {
      rs.push_back(r.get());
      fn_.result_types.push_back(r->type);
    }
    fn_.entry().push_back(ir::make_op("func.return", rs, {}));
    auto exe = runtime::get_backend("cpu").compile(module_);
    return exe->execute_on_host(inputs_);
  }
  HostTensor run() { return run_all().at(0); }
  ir::Module& module() { return module_; }

 private:
  ir::Module module_;
  ir::Function& fn_;
  ir::Operation* op_ = nullptr;
  std::vector<HostTensor> inputs_;
};

inline ir::AttrRef i64s(const std::vector<int64_t>& v) {
  return ir::Attribute::dense_array(v);
}
inline ir::AttrRef i64(int64_t v) {
  return ir::Attribute::integer_attr(v, DType::I64);
}

template <class T>
std::string show(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_integral_v<T>) {
    return std::to_string(static_cast<long long>(v));
  } else {
    return std::to_string(static_cast<double>(static_cast<float>(v)));
  }
}

// Exact (bitwise) comparison against expected values.
template <class T>
void expect_tensor(const HostTensor& got, const std::vector<T>& want, const Shape& shape) {
  ASSERT_EQ(got.dtype(), dtype_of<T>()) << got.type_string();
  ASSERT_EQ(got.shape(), shape) << got.type_string();
  ASSERT_EQ(static_cast<size_t>(got.size()), want.size());
  const T* p = got.data_as<T>();
  for (size_t i = 0; i < want.size(); ++i) {
    const T w = want[i];
    EXPECT_EQ(std::memcmp(&p[i], &w, sizeof(T)), 0)
        << "element " << i << ": got " << show(p[i]) << ", want " << show(w);
  }
}

}  // namespace cujax::dmtest
