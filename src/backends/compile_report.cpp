#include "cujax/runtime/compile_report.h"

#include "cujax/core/error.h"
#include "cujax/runtime/backend.h"
#ifdef CUJAX_HAVE_CUDA
#include <chrono>
#include <set>

#include "backends/cuda/codegen/fused.h"
#include "backends/cuda/program.h"
#endif

namespace cujax::runtime {

CompileReport compile_report(std::string_view platform, const ir::Module& module,
                             std::string_view entry, std::string_view arch) {
  const ir::Function* fn = module.lookup(entry);
  if (!fn) throw Error("module has no function @" + std::string(entry));
  CompileReport r;
  r.platform = std::string(platform);
  if (platform == "cpu") {
    get_backend("cpu").compile(module, entry);
    return r;
  }
  if (platform != "cuda") throw Error("unknown platform '" + std::string(platform) + "'");
#ifdef CUJAX_HAVE_CUDA
  CompileOptions options;
  options.host_fallback = HostFallback::Allow;
  const auto program = cuda::compile_program(module, *fn, nullptr, nullptr, options);
  r.steps = cuda::describe(*program);
  for (const auto& f : cuda::host_fallbacks(*program)) r.host_fallbacks.push_back({f.op, f.where});
  r.peak_buffer_bytes = cuda::peak_buffer_bytes(*program);
  const auto& kernels = cuda::fusion_kernels(*program);
  r.fusion_steps = static_cast<int>(kernels.size());
  std::set<std::string> seen;
  std::vector<std::shared_ptr<const cuda::codegen::FusionKernel>> distinct;
  for (const auto& k : kernels)
    if (seen.insert(k->name).second) {
      r.kernels.push_back({k->name, k->description});
      distinct.push_back(k);
    }
  if (!arch.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    cuda::codegen::compile_all(distinct, std::string(arch));
    r.kernel_compile_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return r;
#else
  (void)arch;  // only cuda builds generate kernels
  throw Error("platform 'cuda': " + unavailable_reason("cuda"));
#endif
}

}  // namespace cujax::runtime
