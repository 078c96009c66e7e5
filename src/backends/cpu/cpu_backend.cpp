#include "backends/cpu/cpu_backend.h"

#include <unistd.h>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "compiler/backend_passes.h"
#include "cujax/runtime/spmd.h"
#include "profiler/hooks.h"

namespace cujax::cpu {

namespace {

class CpuExecutable final : public runtime::Executable {
 public:
  CpuExecutable(const CpuBackend& backend, std::shared_ptr<const Program> main, int device,
                std::string name)
      : backend_(backend), main_(std::move(main)), device_(device), name_(std::move(name)) {}
  std::vector<runtime::DeviceBuffer> execute(std::vector<runtime::DeviceBuffer> args,
                                             const runtime::ExecuteOptions& options) override {
    const profiler::Span span = profiler::execute_span(name_, "cpu", device_);
    ExecContext ctx;
    ctx.options = &options;
    std::vector<HostTensor> in;
    in.reserve(args.size());
    for (runtime::DeviceBuffer& a : args) {
      in.push_back(a.as_host_tensor());
      a.data.reset();  // the tensor is now the only owner a donated argument has
      if (in.back().is_unique()) ctx.donated.push_back(in.back().data());
    }
    std::vector<runtime::DeviceBuffer> out;
    for (HostTensor& r : main_->run(std::move(in), ctx))
      out.push_back(runtime::DeviceBuffer::on_cpu(std::move(r), device_));
    return out;
  }
  const runtime::Backend& backend() const override { return backend_; }
  int device() const override { return device_; }

 private:
  const CpuBackend& backend_;
  std::shared_ptr<const Program> main_;
  int device_;
  std::string name_;  // the module's, for traces
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

std::unique_ptr<runtime::Executable> CpuBackend::compile(const ir::Module& original,
                                                         std::string_view entry, int device,
                                                         const runtime::CompileOptions&) const {
  // Kernels copy what they need from their ops, so the lowered module may go after compiling.
  std::unique_ptr<ir::Module> lowered = compiler::run_backend_passes(original);
  const ir::Module& module = lowered ? *lowered : original;
  const ir::Function* fn = module.lookup(entry);
  if (!fn) throw Error("module has no function @" + std::string(entry));
  const std::string name = module.name.empty() ? std::string(entry) : module.name;
  const profiler::Span span = profiler::backend_compile_span("cpu", name);
  Compiler compiler(module);
  return std::make_unique<CpuExecutable>(*this, compiler.compile_function(*fn), device, name);
}

// Every cpu device's memory is the host's: its buffers are the tensors themselves, and the
// callers (device_put, jit) check which devices exist.
runtime::DeviceBuffer CpuBackend::to_device(const HostTensor& value, int device) const {
  return runtime::DeviceBuffer::on_cpu(value, device);
}

HostTensor CpuBackend::to_host(const runtime::DeviceBuffer& buffer) const {
  return buffer.as_host_tensor();
}

}  // namespace cujax::cpu
