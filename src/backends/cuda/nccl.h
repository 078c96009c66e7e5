// NCCL, loaded with dlopen on first use (as cuBLASLt is), so a CUDA build starts where NCCL is
// missing and only SPMD programs on GPUs need it. Every call's status is checked.
#pragma once

#include <nccl.h>

namespace cujax::cuda {

struct Nccl {
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclGetLastError) last_error = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
  int version = 0;  // NCCL_VERSION_CODE of the library loaded
};

// Throws CudaError saying how to make libnccl.so.2 loadable when it is not.
const Nccl& nccl();

[[noreturn]] void throw_nccl_error(ncclResult_t r, const char* call, const char* file, int line);
inline void check_nccl(ncclResult_t r, const char* call, const char* file, int line) {
  if (r != ncclSuccess) throw_nccl_error(r, call, file, line);
}

}  // namespace cujax::cuda

#define CUJAX_NCCL_CHECK(call) ::cujax::cuda::check_nccl((call), #call, __FILE__, __LINE__)
