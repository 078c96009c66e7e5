#include "backends/cuda/codegen/fused.h"

#include <atomic>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "backends/cuda/codegen/kernel_cache.h"
#include "backends/cuda/codegen/nvrtc.h"
#include "backends/cuda/cuda_check.h"

namespace cujax::cuda::codegen {

namespace {

// Loaded kernels by name and architecture; libraries stay loaded for the process.
cudaKernel_t load(const FusionKernel& k, const std::string& arch) {
  static std::mutex mu;
  static std::map<std::string, cudaKernel_t> loaded;
  const std::string key = k.name + "/" + arch;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = loaded.find(key); it != loaded.end()) return it->second;
  }
  const auto image = KernelCache::process().cubin(k.source, arch);
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded.find(key); it != loaded.end()) return it->second;
  cudaLibrary_t lib = nullptr;
  CUJAX_CUDA_CHECK(
      cudaLibraryLoadData(&lib, image->data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  cudaKernel_t fn = nullptr;
  CUJAX_CUDA_CHECK(cudaLibraryGetKernel(&fn, lib, k.name.c_str()));
  loaded[key] = fn;
  return fn;
}

std::string device_arch(const Device& d) {
  int major = 0, minor = 0;
  CUJAX_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d.ordinal()));
  CUJAX_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d.ordinal()));
  return arch_name(major, minor);
}

DeviceKernel launcher(std::shared_ptr<const FusionKernel> k, Device* d, cudaKernel_t fn) {
  return [k = std::move(k), d, fn](std::span<const DeviceArray> in) {
    std::vector<DeviceArray> outs;
    std::vector<void*> pointers;
    pointers.reserve(k->params.size());
    for (const DeviceArray& a : in) pointers.push_back(a.data.get());
    std::vector<bool> taken(in.size(), false);
    for (const KernelParam& p : k->params) {
      if (!p.output) continue;
      // A loop fusion writes an output into a full-size input that only this kernel holds.
      int reuse = -1;
      if (k->kind == compiler::FusionKind::Loop)
        for (size_t i = 0; i < in.size() && reuse < 0; ++i)
          if (!taken[i] && in[i].data.use_count() == 1 && in[i].dtype == p.dtype &&
              in[i].size() == num_elements(p.shape))
            reuse = static_cast<int>(i);
      if (reuse >= 0) {
        taken[reuse] = true;
        outs.push_back(DeviceArray{p.dtype, p.shape, in[reuse].data});
      } else {
        outs.push_back(d->allocate(p.dtype, p.shape));
      }
      pointers.push_back(outs.back().data.get());
    }
    std::shared_ptr<void> scratch, counters;  // freed in stream order after the kernel
    if (k->scratch_slots > 0) {
      scratch = d->allocate(static_cast<size_t>(k->scratch_slots) * 2 * sizeof(uint64_t));
      const size_t counter_bytes = static_cast<size_t>(k->counters) * sizeof(unsigned);
      counters = d->allocate(counter_bytes);
      CUJAX_CUDA_CHECK(cudaMemsetAsync(counters.get(), 0, counter_bytes, d->stream()));
      pointers.push_back(scratch.get());
      pointers.push_back(counters.get());
    }
    std::vector<void*> args(pointers.size());
    for (size_t i = 0; i < pointers.size(); ++i) args[i] = &pointers[i];
    CUJAX_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(fn), dim3(k->grid),
                                      dim3(k->block), args.data(), 0, d->stream()));
    return outs;
  };
}

}  // namespace

bool fusion_enabled(const std::shared_ptr<Device>& device) {
  const char* env = std::getenv("CUJAX_CUDA_FUSION");
  if (env && std::string(env) == "0") return false;
  if (!device) return true;
  static const std::string why = nvrtc_unavailable_reason();
  if (why.empty()) return true;
  static std::once_flag once;
  std::call_once(once, [] { std::cerr << "cujax: fused kernels are off: " << why << "\n"; });
  return false;
}

void compile_all(const std::vector<std::shared_ptr<const FusionKernel>>& kernels,
                 const std::string& arch) {
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mu;
  auto work = [&] {
    for (size_t i = next++; i < kernels.size(); i = next++) {
      try {
        if (kernels[i]) KernelCache::process().cubin(kernels[i]->source, arch);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
      }
    }
  };
  const size_t workers =
      std::min<size_t>(kernels.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (size_t t = 1; t < workers; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

FusedKernels build_fused_kernels(const ir::Block& block, const compiler::FusionPlan& plan,
                                 const std::vector<bool>& generate,
                                 const std::shared_ptr<Device>& device) {
  FusedKernels out;
  out.kernels.resize(plan.groups.size());
  out.launchers.resize(plan.groups.size());
  for (size_t g = 0; g < plan.groups.size(); ++g)
    if (generate[g])
      out.kernels[g] = std::make_shared<const FusionKernel>(emit_fusion(block, plan.groups[g]));
  if (!device) {
    for (size_t g = 0; g < plan.groups.size(); ++g)
      if (out.kernels[g]) out.launchers[g] = launcher(out.kernels[g], nullptr, nullptr);
    return out;
  }
  const std::string arch = device_arch(*device);
  compile_all(out.kernels, arch);
  for (size_t g = 0; g < plan.groups.size(); ++g)
    if (out.kernels[g])
      out.launchers[g] = launcher(out.kernels[g], device.get(), load(*out.kernels[g], arch));
  return out;
}

}  // namespace cujax::cuda::codegen
