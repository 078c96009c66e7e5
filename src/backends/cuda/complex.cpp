#include "backends/cuda/complex.h"

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/common/index.h"
#include "backends/cpu/kernels.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels.h"

namespace cujax::cuda {

namespace {

DeviceKernel launch_as(ComplexOp c, DType t, const ir::Type& rt, Device* d) {
  return [c, t, rt, d](std::span<const DeviceArray> in) {
    DeviceArray out = d->allocate(rt.dtype, rt.shape);
    launch_complex(c, t, in[0].data.get(), in.size() > 1 ? in[1].data.get() : nullptr,
                   out.data.get(), out.size(), d->stream());
    return std::vector<DeviceArray>{out};
  };
}

// reduce(input, init) over `dimensions` by add: the parts are the last axis of a real array,
// summed by the real reduce kernel from zero, then the init value is added.
DeviceKernel complex_sum_kernel(const ir::Operation& op, Device* d) {
  if (op.operands.size() != 2 || op.num_results() != 1 || op.regions.size() != 1) return {};
  const ir::Type& in = op.operands[0]->type;
  const ir::Type rt = op.result(0)->type;
  if (!is_complex(in.dtype) || op.operands[1]->type != ir::Type::tensor({}, in.dtype) ||
      rt.dtype != in.dtype || in.rank() + 1 > index::kMaxRank ||
      cpu::simple_binary_region(*op.regions[0]) != "stablehlo.add")
    return {};
  Shape parts = in.shape;
  parts.push_back(2);
  std::array<bool, index::kMaxRank> reduced{};
  for (int64_t dim : op.ints("dimensions")) {
    if (dim < 0 || dim >= in.rank()) return {};
    reduced[dim] = true;
  }
  const DType part = complex_component(in.dtype);
  return [d, rt, parts, reduced, part](std::span<const DeviceArray> args) {
    DeviceArray out = d->allocate(rt.dtype, rt.shape);
    std::shared_ptr<void> zero = d->allocate(size_of(part));
    CUJAX_CUDA_CHECK(cudaMemsetAsync(zero.get(), 0, size_of(part), d->stream()));
    launch_reduce(ReduceOp::Add, part, args[0].data.get(), zero.get(), out.data.get(), parts.data(),
                  reduced.data(), static_cast<int>(parts.size()), d->stream());
    launch_complex(ComplexOp::AddScalar, rt.dtype, out.data.get(), args[1].data.get(),
                   out.data.get(), out.size(), d->stream());
    return std::vector<DeviceArray>{out};
  };
}

}  // namespace

DeviceKernel complex_kernel(const ir::Operation& op, Device* d) {
  if (op.name == "stablehlo.reduce") return complex_sum_kernel(op, d);
  if (op.num_results() != 1 || op.operands.empty()) return {};
  const ir::Type rt = op.result(0)->type;
  const ir::Type& a = op.operands[0]->type;
  for (const ir::Value* v : op.operands)
    if (v->type.is_token || v->type.shape != rt.shape) return {};
  const std::string& n = op.name;
  static const std::map<std::string, ComplexOp> same_type = {
      {"stablehlo.add", ComplexOp::Add},
      {"stablehlo.subtract", ComplexOp::Subtract},
      {"stablehlo.multiply", ComplexOp::Multiply},
      {"stablehlo.divide", ComplexOp::Divide},
      {"stablehlo.negate", ComplexOp::Negate}};
  // `arity` operands, each of the result's complex type.
  auto operands_of_result_type = [&](size_t arity) {
    if (op.operands.size() != arity || !is_complex(rt.dtype)) return false;
    for (const ir::Value* v : op.operands)
      if (v->type != rt) return false;
    return true;
  };
  if (auto it = same_type.find(n); it != same_type.end()) {
    if (!operands_of_result_type(it->second == ComplexOp::Negate ? 1 : 2)) return {};
    return launch_as(it->second, rt.dtype, rt, d);
  }
  static const std::map<std::string, ComplexFunction> functions = {
      {"stablehlo.exponential", ComplexFunction::Exp},
      {"stablehlo.exponential_minus_one", ComplexFunction::Expm1},
      {"stablehlo.log", ComplexFunction::Log},
      {"stablehlo.log_plus_one", ComplexFunction::Log1p},
      {"stablehlo.sqrt", ComplexFunction::Sqrt},
      {"stablehlo.rsqrt", ComplexFunction::Rsqrt},
      {"stablehlo.cbrt", ComplexFunction::Cbrt},
      {"stablehlo.sign", ComplexFunction::Sign},
      {"stablehlo.sine", ComplexFunction::Sin},
      {"stablehlo.cosine", ComplexFunction::Cos},
      {"stablehlo.tan", ComplexFunction::Tan},
      {"chlo.tan", ComplexFunction::Tan},
      {"stablehlo.tanh", ComplexFunction::Tanh},
      {"stablehlo.logistic", ComplexFunction::Logistic},
      {"chlo.sinh", ComplexFunction::Sinh},
      {"chlo.cosh", ComplexFunction::Cosh},
      {"chlo.asin", ComplexFunction::Asin},
      {"chlo.acos", ComplexFunction::Acos},
      {"chlo.atan", ComplexFunction::Atan},
      {"chlo.asinh", ComplexFunction::Asinh},
      {"chlo.acosh", ComplexFunction::Acosh},
      {"chlo.atanh", ComplexFunction::Atanh},
      {"stablehlo.power", ComplexFunction::Power},
      {"stablehlo.maximum", ComplexFunction::Maximum},
      {"stablehlo.minimum", ComplexFunction::Minimum}};
  if (auto it = functions.find(n); it != functions.end()) {
    const ComplexFunction f = it->second;
    const bool binary = f == ComplexFunction::Power || f == ComplexFunction::Maximum ||
                        f == ComplexFunction::Minimum;
    if (!operands_of_result_type(binary ? 2 : 1)) return {};
    return [f, rt, d](std::span<const DeviceArray> in) {
      DeviceArray out = d->allocate(rt.dtype, rt.shape);
      launch_complex_function(f, rt.dtype, in[0].data.get(),
                              in.size() > 1 ? in[1].data.get() : nullptr, out.data.get(),
                              out.size(), d->stream());
      return std::vector<DeviceArray>{out};
    };
  }
  if (n == "stablehlo.real" || n == "stablehlo.imag" || n == "stablehlo.abs") {
    if (op.operands.size() != 1 || !is_complex(a.dtype) || rt.dtype != complex_component(a.dtype))
      return {};
    const ComplexOp c = n == "stablehlo.real"   ? ComplexOp::Real
                        : n == "stablehlo.imag" ? ComplexOp::Imag
                                                : ComplexOp::Abs;
    return launch_as(c, a.dtype, rt, d);
  }
  if (n == "stablehlo.complex") {
    if (op.operands.size() != 2 || !is_complex(rt.dtype) ||
        a.dtype != complex_component(rt.dtype) || op.operands[1]->type.dtype != a.dtype)
      return {};
    return launch_as(ComplexOp::Make, rt.dtype, rt, d);
  }
  if (n == "stablehlo.compare") {
    const ir::Attribute* dir = op.attr("comparison_direction");
    if (op.operands.size() != 2 || !dir || !is_complex(a.dtype) ||
        op.operands[1]->type.dtype != a.dtype || rt.dtype != DType::Bool)
      return {};
    if (dir->enum_value == "EQ") return launch_as(ComplexOp::Eq, a.dtype, rt, d);
    if (dir->enum_value == "NE") return launch_as(ComplexOp::Ne, a.dtype, rt, d);
    return {};
  }
  if (n == "stablehlo.convert") {
    const DType from = a.dtype, to = rt.dtype;
    if (op.operands.size() != 1 || is_narrow(from) || is_narrow(to)) return {};
    return [d, from, rt](std::span<const DeviceArray> in) {
      DeviceArray out = d->allocate(rt.dtype, rt.shape);
      launch_complex_convert(from, rt.dtype, in[0].data.get(), out.data.get(), out.size(),
                             d->stream());
      return std::vector<DeviceArray>{out};
    };
  }
  return {};
}

}  // namespace cujax::cuda
