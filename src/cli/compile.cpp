#include "cli/compile.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/args.h"
#include "cujax/ir/parser.h"
#include "cujax/runtime/compile_report.h"

namespace cujax::cli {

namespace {

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

int compile_command(const std::vector<std::string>& argv) {
  const Args args(
      {"compile",
       "compile a StableHLO program without running it (no GPU needed): its steps, peak buffer "
       "size and every op that would run on the host",
       {{"platform", "cuda|cpu", "the backend compiled for (default: cuda)"},
        {"arch", "sm_80|sm_90", "also compile the generated kernels for this GPU with NVRTC"},
        {"entry", "NAME", "the function compiled (default: main)"},
        {"no-host-fallback", "", "exit 1 when an op would run on the host"}},
       "FILE.mlir",
       "the program"},
      argv);
  if (args.positional().size() != 1) throw UsageError("compile needs one FILE.mlir");
  const std::string path = args.positional()[0];
  const std::string platform = args.string("platform", "cuda");
  if (platform != "cuda" && platform != "cpu")
    throw UsageError("--platform must be cuda or cpu, got '" + platform + "'");
  const std::optional<std::string> arch = args.optional_string("arch");
  if (arch && *arch != "sm_80" && *arch != "sm_90")
    throw UsageError("--arch must be sm_80 or sm_90 (the architectures this build targets), got '" +
                     *arch + "'");
  if (arch && platform != "cuda") throw UsageError("--arch needs --platform cuda");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  const auto module = ir::parse_module(ss.str());
  const std::string entry = args.string("entry", "main");
  const runtime::CompileReport r =
      runtime::compile_report(platform, *module, entry, arch ? *arch : "");

  std::printf("%s: @%s compiled for %s%s\n", path.c_str(), entry.c_str(), platform.c_str(),
              arch ? (" (" + *arch + ")").c_str() : "");
  if (platform == "cpu") {
    std::printf("every op runs on the cpu backend\n");
    return 0;
  }
  int device = 0;
  for (const std::string& s : r.steps)
    device += s.compare(s.find_first_not_of(' '), 6, "device") == 0;
  std::printf("steps (%zu, %d on the device; nested programs indented):\n", r.steps.size(), device);
  for (const std::string& s : r.steps) std::printf("  %s\n", s.c_str());
  std::printf("fusions: %d steps launching %zu distinct generated kernels\n", r.fusion_steps,
              r.kernels.size());
  for (const auto& k : r.kernels) std::printf("  %s  %s\n", k.name.c_str(), k.description.c_str());
  if (arch)
    std::printf("kernels compiled for %s with NVRTC in %.2f s (kernel cache included)\n",
                arch->c_str(), r.kernel_compile_seconds);
  std::printf("peak buffer size: %s (%lld bytes, arguments included)\n",
              mib(r.peak_buffer_bytes).c_str(), static_cast<long long>(r.peak_buffer_bytes));
  if (r.host_fallbacks.empty()) {
    std::printf("host fallbacks: none\n");
    return 0;
  }
  std::printf("host fallbacks (%zu):\n", r.host_fallbacks.size());
  for (const auto& f : r.host_fallbacks) std::printf("  %s\n", f.where.c_str());
  if (args.flag("no-host-fallback")) {
    std::fprintf(stderr, "cujax compile: %zu op(s) would run on the host (--no-host-fallback)\n",
                 r.host_fallbacks.size());
    return 1;
  }
  return 0;
}

}  // namespace cujax::cli
