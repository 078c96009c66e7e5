#include "backends/cuda/nccl.h"

#include <dlfcn.h>

#include <string>

#include "backends/cuda/cuda_check.h"

namespace cujax::cuda {

const Nccl& nccl() {
  static const Nccl api = [] {
    const std::string soname = "libnccl.so." + std::to_string(NCCL_MAJOR);
    void* h = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen(("/usr/local/cuda/lib64/" + soname).c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h)
      throw CudaError("cannot load " + soname + " (NCCL, needed for collectives on GPUs): " +
                      std::string(dlerror() ? dlerror() : "not found") +
                      "; install NCCL or add its lib folder (e.g. site-packages/nvidia/nccl/lib) "
                      "to LD_LIBRARY_PATH");
    Nccl a;
    std::string missing;
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn) missing += std::string(missing.empty() ? "" : ", ") + name;
    };
    get(a.get_version, "ncclGetVersion");
    get(a.get_unique_id, "ncclGetUniqueId");
    get(a.comm_init_rank, "ncclCommInitRank");
    get(a.comm_destroy, "ncclCommDestroy");
    get(a.error_string, "ncclGetErrorString");
    get(a.last_error, "ncclGetLastError");
    get(a.all_reduce, "ncclAllReduce");
    get(a.all_gather, "ncclAllGather");
    get(a.reduce_scatter, "ncclReduceScatter");
    get(a.broadcast, "ncclBroadcast");
    get(a.send, "ncclSend");
    get(a.recv, "ncclRecv");
    get(a.group_start, "ncclGroupStart");
    get(a.group_end, "ncclGroupEnd");
    if (!missing.empty()) throw CudaError(soname + " lacks " + missing);
    if (a.get_version(&a.version) != ncclSuccess) throw CudaError("ncclGetVersion failed");
    return a;
  }();
  return api;
}

void throw_nccl_error(ncclResult_t r, const char* call, const char* file, int line) {
  const Nccl& n = nccl();
  std::string what = n.error_string(r);
  // ncclGetLastError(nullptr) holds the most recent failure's detail (a peer that left, a GPU
  // listed twice in one communicator).
  if (const char* last = n.last_error(nullptr); last && *last) what += ": " + std::string(last);
  throw_cuda_error(call, what, file, line);
}

}  // namespace cujax::cuda
