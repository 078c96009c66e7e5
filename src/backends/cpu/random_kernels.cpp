// The cpu kernel of stablehlo.rng_bit_generator.
#include "backends/common/rng_bit_generator.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"

namespace cujax::cpu {

namespace {

// stablehlo.rng_bit_generator: see backends/common/rng_bit_generator.h for the generators and
// layouts, which the cuda kernel shares.
Kernel rng_bit_generator_kernel(const ir::Operation& op, Compiler&) {
  const rng_bits::Plan plan = rng_bits::plan(op);
  const ir::Type state_type = op.operands[0]->type;
  const ir::Type out_type = op.result(1)->type;
  const std::string where = op.where();
  return [=](std::span<const HostTensor> in, ExecContext&) {
    if (in.empty() || in[0].dtype() != state_type.dtype || in[0].shape() != state_type.shape)
      throw RuntimeError(where + ": initial_state must be " + state_type.str());
    const uint64_t* state = in[0].data_as<uint64_t>();
    HostTensor new_state(state_type.dtype, state_type.shape);
    rng_bits::advance_state(plan, state, new_state.data_as<uint64_t>());
    HostTensor out(out_type.dtype, out_type.shape);
    auto* dst = static_cast<unsigned char*>(out.data());
    parallel_for(plan.blocks, 4096, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) rng_bits::generate_block(plan, state, i, dst);
    });
    return std::vector<HostTensor>{new_state, out};
  };
}

}  // namespace

void register_random_kernels(KernelRegistry& r) {
  r.add("stablehlo.rng_bit_generator", rng_bit_generator_kernel);
}

}  // namespace cujax::cpu
