#pragma once

#include "cujax/runtime/backend.h"

namespace cujax::cpu {

class CpuBackend final : public runtime::Backend {
 public:
  std::string_view platform() const override { return "cpu"; }
  std::vector<runtime::DeviceDescription> devices() const override;
  // Everything runs on the host here: the options' host_fallback has nothing to act on.
  std::unique_ptr<runtime::Executable> compile(
      const ir::Module& module, std::string_view entry, int device,
      const runtime::CompileOptions& options) const override;
  runtime::DeviceBuffer to_device(const HostTensor& value, int device) const override;
  HostTensor to_host(const runtime::DeviceBuffer& buffer) const override;
  std::unique_ptr<runtime::SpmdExecutable> compile_spmd(const ir::Module& module,
                                                        std::vector<int> device_ids,
                                                        std::string_view entry) const override;
};

}  // namespace cujax::cpu
