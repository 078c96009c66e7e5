// The meeting point of a collective: every member of a process group deposits its operands and
// receives all members' operands in group order. Members are threads of this process (virtual
// devices) or, through a Transport, devices of other processes. Kernels compute their results
// from the gathered parts in group order, so every member gets bit-identical values whatever
// order the members arrived in.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "cujax/core/host_tensor.h"

namespace cujax::runtime {

// Moves bytes between processes for collectives that span them (MPI; see distributed.h).
class Transport {
 public:
  virtual ~Transport() = default;
  // Sends `payload` to every process in `peers` and returns what each sent back, in `peers`
  // order. `tag` identifies the collective instance; both sides use the same one. Throws
  // RuntimeError after `timeout_seconds`.
  virtual std::vector<std::vector<std::byte>> exchange(uint64_t tag, const std::vector<int>& peers,
                                                       const std::vector<std::byte>& payload,
                                                       double timeout_seconds) = 0;
  // An orderly end (distributed::shutdown): returns once no other process needs this one.
  virtual void finish() {}
};

// What a rendezvous hands back: every member's operands in group order, plus a slot where the
// first member to need it stores a value derived from them (the all_reduce sum), computed once.
struct Gathered {
  std::vector<std::vector<HostTensor>> parts;
  std::once_flag once;
  std::vector<HostTensor> derived;
};

class Communicator {
 public:
  // `device_process[i]`: the process that runs logical device i (all `process` in one process).
  // `epoch` tells successive executes apart in the transport's tags.
  Communicator(std::vector<int> device_process, int process, Transport* transport,
               int64_t epoch = 0);

  // The exchange of collective instance `key` (op ordinal, group index, execution count) among
  // `group` (logical device ids; `rank` is the caller's position in it). `where` names the op
  // for messages.
  std::shared_ptr<Gathered> exchange(std::tuple<int64_t, int64_t, int64_t> key,
                                     const std::vector<int>& group, int rank,
                                     std::vector<HostTensor> operands, const std::string& where);

  // Wakes every waiting member with an error: a device failed and its group will never meet.
  void abort(const std::string& why);

 private:
  struct Slot {
    std::vector<std::vector<HostTensor>> parts;
    std::vector<bool> arrived;
    int local_arrived = 0;
    int local_members = 0;
    int left = 0;  // local members that have not yet taken the result
    bool ready = false;
    std::string error;
    std::shared_ptr<Gathered> result;
  };
  void fill_remote(Slot& slot, const std::tuple<int64_t, int64_t, int64_t>& key,
                   const std::vector<int>& group, const std::string& where);

  std::vector<int> device_process_;
  int process_;
  Transport* transport_;
  int64_t epoch_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::shared_ptr<Slot>> slots_;
  std::string aborted_;
};

// A group of devices as messages name it: "{0,2,4}".
std::string group_string(const std::vector<int>& devices);

// (group rank, operands) entries <-> bytes for the transport: dtype, rank, dims, data of each.
using RankedParts = std::vector<std::pair<int, std::vector<HostTensor>>>;
std::vector<std::byte> serialize_parts(const RankedParts& parts);
RankedParts deserialize_parts(const std::vector<std::byte>& bytes);

}  // namespace cujax::runtime
