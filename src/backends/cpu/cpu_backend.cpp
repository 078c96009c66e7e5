#include "backends/cpu/cpu_backend.h"

#include <unistd.h>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "cujax/runtime/spmd.h"

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
  // Virtual devices share the host's memory and threads, as XLA's forced host devices do.
  std::vector<runtime::DeviceDescription> out;
  const int n = runtime::num_cpu_devices();
  for (int i = 0; i < n; ++i) {
    runtime::DeviceDescription d;
    d.platform = "cpu";
    d.id = i;
    d.kind = "cpu";
    d.memory_bytes = pages > 0 && page_size > 0 ? static_cast<int64_t>(pages) * page_size : 0;
    d.detail = std::to_string(num_threads()) + " threads" +
               (n > 1 ? ", virtual device " + std::to_string(i) + " of " + std::to_string(n) : "");
    out.push_back(d);
  }
  return out;
}

std::unique_ptr<runtime::Executable> CpuBackend::compile(const ir::Module& module,
                                                         std::string_view entry,
                                                         const runtime::CompileOptions&) const {
  const ir::Function* fn = module.lookup(entry);
  if (!fn) throw Error("module has no function @" + std::string(entry));
  Compiler compiler(module);
  return std::make_unique<CpuExecutable>(compiler.compile_function(*fn));
}

}  // namespace cujax::cpu
