#include "backends/cuda/complex.h"

#include <map>
#include <string>
#include <vector>

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

}  // namespace

DeviceKernel complex_kernel(const ir::Operation& op, Device* d) {
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
  if (auto it = same_type.find(n); it != same_type.end()) {
    const size_t arity = it->second == ComplexOp::Negate ? 1 : 2;
    if (op.operands.size() != arity || !is_complex(rt.dtype)) return {};
    for (const ir::Value* v : op.operands)
      if (v->type != rt) return {};
    return launch_as(it->second, rt.dtype, rt, d);
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
    auto f32_f64_or_complex = [](DType t) {
      return t == DType::F32 || t == DType::F64 || is_complex(t);
    };
    if (op.operands.size() != 1 || !f32_f64_or_complex(from) || !f32_f64_or_complex(to)) return {};
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
