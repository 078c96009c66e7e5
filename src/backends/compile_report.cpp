#include "cujax/runtime/compile_report.h"

#include "cujax/core/error.h"
#include "cujax/runtime/backend.h"
#ifdef CUJAX_HAVE_CUDA
#include "backends/cuda/program.h"
#endif

namespace cujax::runtime {

CompileReport compile_report(std::string_view platform, const ir::Module& module,
                             std::string_view entry) {
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
  return r;
#else
  throw Error("platform 'cuda': " + unavailable_reason("cuda"));
#endif
}

}  // namespace cujax::runtime
