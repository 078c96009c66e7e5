#include "backends/cpu/cpu_backend.h"

#include <unistd.h>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"

namespace cujax::cpu {

namespace {

class CpuExecutable final : public runtime::Executable {
 public:
  explicit CpuExecutable(std::shared_ptr<const Program> main) : main_(std::move(main)) {}
  std::vector<HostTensor> execute(std::span<const HostTensor> args,
                                  const runtime::ExecuteOptions& options) override {
    ExecContext ctx{&options};
    return main_->run(args, ctx);
  }

 private:
  std::shared_ptr<const Program> main_;
};

}  // namespace

std::vector<runtime::DeviceDescription> CpuBackend::devices() const {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  runtime::DeviceDescription d;
  d.platform = "cpu";
  d.id = 0;
  d.kind = "cpu";
  d.memory_bytes = pages > 0 && page_size > 0 ? static_cast<int64_t>(pages) * page_size : 0;
  d.detail = std::to_string(num_threads()) + " threads";
  return {d};
}

std::unique_ptr<runtime::Executable> CpuBackend::compile(const ir::Module& module,
                                                         std::string_view entry) const {
  const ir::Function* fn = module.lookup(entry);
  if (!fn) throw Error("module has no function @" + std::string(entry));
  Compiler compiler(module);
  return std::make_unique<CpuExecutable>(compiler.compile_function(*fn));
}

}  // namespace cujax::cpu
