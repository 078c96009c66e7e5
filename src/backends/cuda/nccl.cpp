#include "backends/cuda/nccl.h"

#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/library.h"

namespace cujax::cuda {

const Nccl& nccl() {
  static const Nccl api = [] {
    Library lib("libnccl.so." + std::to_string(NCCL_MAJOR), "NCCL, needed for collectives on GPUs",
                "install NCCL or add its lib folder (e.g. site-packages/nvidia/nccl/lib) to "
                "LD_LIBRARY_PATH");
    Nccl a;
    lib.resolve(a.get_version, "ncclGetVersion");
    lib.resolve(a.get_unique_id, "ncclGetUniqueId");
    lib.resolve(a.comm_init_rank, "ncclCommInitRank");
    lib.resolve(a.comm_destroy, "ncclCommDestroy");
    lib.resolve(a.error_string, "ncclGetErrorString");
    lib.resolve(a.last_error, "ncclGetLastError");
    lib.resolve(a.all_reduce, "ncclAllReduce");
    lib.resolve(a.all_gather, "ncclAllGather");
    lib.resolve(a.reduce_scatter, "ncclReduceScatter");
    lib.resolve(a.broadcast, "ncclBroadcast");
    lib.resolve(a.send, "ncclSend");
    lib.resolve(a.recv, "ncclRecv");
    lib.resolve(a.group_start, "ncclGroupStart");
    lib.resolve(a.group_end, "ncclGroupEnd");
    lib.check_resolved();
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
