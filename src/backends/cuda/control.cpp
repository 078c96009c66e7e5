#include "backends/cuda/control.h"

#include <algorithm>
#include <cstring>

#include "backends/cpu/kernels.h"
#include "backends/cuda/cuda_check.h"

namespace cujax::cuda {

namespace {

// The scalar in `a` (a bool or an integer) as an int64, waiting for the stream.
int64_t read_scalar(Device& d, const DeviceArray& a) {
  uint64_t bits = 0;
  const size_t n = size_of(a.dtype);
  CUJAX_CUDA_CHECK(cudaMemcpyAsync(&bits, a.data.get(), n, cudaMemcpyDeviceToHost, d.stream()));
  CUJAX_CUDA_CHECK(cudaStreamSynchronize(d.stream()));
  if (is_signed_int(a.dtype) && n < 8) {
    const int shift = static_cast<int>(64 - 8 * n);
    return static_cast<int64_t>(bits << shift) >> shift;
  }
  return static_cast<int64_t>(bits);
}

// `a` then `b`; `a` is moved, so a loop-carried buffer can arrive as its only owner (and be
// updated in place).
std::vector<DeviceArray> concat(std::vector<DeviceArray> a, std::span<const DeviceArray> b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

DeviceKernel while_kernel(const ir::Operation& op, const OpKernelContext& ctx) {
  if (op.regions.size() != 2 || op.regions[0]->blocks.size() != 1 ||
      op.regions[1]->blocks.size() != 1)
    return {};
  const auto captures = cpu::captured_values(op);
  auto cond = compile_block(ctx.module, op.regions[0]->front(), captures, ctx.device, ctx.options);
  auto body = compile_block(ctx.module, op.regions[1]->front(), captures, ctx.device, ctx.options);
  ctx.nested->push_back(cond);
  ctx.nested->push_back(body);
  const size_t n = op.operands.size();
  Device* d = ctx.device.get();
  return [d, cond, body, n](std::span<const DeviceArray> in) {
    std::vector<DeviceArray> state(in.begin(), in.begin() + n);
    const auto caps = in.subspan(n);
    for (;;) {
      const std::vector<DeviceArray> p = run_program(*cond, *d, concat(state, caps));
      if (read_scalar(*d, p.at(0)) == 0) break;
      state = run_program(*body, *d, concat(std::move(state), caps));
    }
    return state;
  };
}

// Out-of-range indices pick the last branch, as the spec says.
DeviceKernel case_kernel(const ir::Operation& op, const OpKernelContext& ctx) {
  if (op.regions.empty() || op.operands.size() != 1) return {};
  const auto captures = cpu::captured_values(op);
  std::vector<std::shared_ptr<const Program>> branches;
  for (const auto& r : op.regions) {
    if (r->blocks.size() != 1) return {};
    branches.push_back(compile_block(ctx.module, r->front(), captures, ctx.device, ctx.options));
    ctx.nested->push_back(branches.back());
  }
  Device* d = ctx.device.get();
  return [d, branches](std::span<const DeviceArray> in) {
    const int64_t index = read_scalar(*d, in[0]);
    const size_t b = (index < 0 || index >= static_cast<int64_t>(branches.size()))
                         ? branches.size() - 1
                         : static_cast<size_t>(index);
    return run_program(*branches[b], *d, std::vector<DeviceArray>(in.begin() + 1, in.end()));
  };
}

DeviceKernel call_kernel(const ir::Operation& op, const OpKernelContext& ctx) {
  const ir::Attribute* callee = op.attr("callee");
  if (!callee || callee->kind != ir::Attribute::Kind::Symbol) return {};
  const ir::Function* fn = ctx.module.lookup(callee->text);
  if (!fn || fn->body.blocks.size() != 1) return {};
  auto program = compile_program(ctx.module, *fn, ctx.device, nullptr, ctx.options);
  ctx.nested->push_back(program);
  Device* d = ctx.device.get();
  return [d, program](std::span<const DeviceArray> in) {
    return run_program(*program, *d, std::vector<DeviceArray>(in.begin(), in.end()));
  };
}

}  // namespace

DeviceKernel control_kernel(const ir::Operation& op, const OpKernelContext& ctx) {
  if (op.name == "stablehlo.while") return while_kernel(op, ctx);
  if (op.name == "stablehlo.case") return case_kernel(op, ctx);
  if (op.name == "func.call") return call_kernel(op, ctx);
  return {};
}

}  // namespace cujax::cuda
