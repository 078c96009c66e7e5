#include "runtime/collectives.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "cujax/core/error.h"
#include "cujax/runtime/spmd.h"

namespace cujax::runtime {

std::string group_string(const std::vector<int>& devices) {
  std::string s = "{";
  for (size_t i = 0; i < devices.size(); ++i) s += (i ? "," : "") + std::to_string(devices[i]);
  return s + "}";
}

namespace {

template <class T>
void put(std::vector<std::byte>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

template <class T>
T get(const std::vector<std::byte>& in, size_t& at) {
  if (at + sizeof(T) > in.size()) throw RuntimeError("collective message is truncated");
  T v;
  std::memcpy(&v, in.data() + at, sizeof(T));
  at += sizeof(T);
  return v;
}

}  // namespace

std::vector<std::byte> serialize_parts(const RankedParts& parts) {
  std::vector<std::byte> out;
  put<int64_t>(out, static_cast<int64_t>(parts.size()));
  for (const auto& [rank, tensors] : parts) {
    put<int64_t>(out, rank);
    put<int64_t>(out, static_cast<int64_t>(tensors.size()));
    for (const HostTensor& t : tensors) {
      put<int32_t>(out, static_cast<int32_t>(t.dtype()));
      put<int64_t>(out, t.rank());
      for (int64_t d : t.shape()) put<int64_t>(out, d);
      const size_t at = out.size();
      out.resize(at + t.nbytes());
      if (t.nbytes()) std::memcpy(out.data() + at, t.data(), t.nbytes());
    }
  }
  return out;
}

RankedParts deserialize_parts(const std::vector<std::byte>& in) {
  size_t at = 0;
  RankedParts parts(static_cast<size_t>(get<int64_t>(in, at)));
  for (auto& [rank, tensors] : parts) {
    rank = static_cast<int>(get<int64_t>(in, at));
    tensors.resize(static_cast<size_t>(get<int64_t>(in, at)));
    for (HostTensor& t : tensors) {
      const auto dtype = static_cast<DType>(get<int32_t>(in, at));
      Shape shape(static_cast<size_t>(get<int64_t>(in, at)));
      for (int64_t& d : shape) d = get<int64_t>(in, at);
      t = HostTensor::uninitialized(dtype, shape);
      if (at + t.nbytes() > in.size()) throw RuntimeError("collective message is truncated");
      if (t.nbytes()) std::memcpy(t.data(), in.data() + at, t.nbytes());
      at += t.nbytes();
    }
  }
  return parts;
}

Communicator::Communicator(std::vector<int> device_process, int process, Transport* transport,
                           int64_t epoch)
    : device_process_(std::move(device_process)),
      process_(process),
      transport_(transport),
      epoch_(epoch) {}

void Communicator::abort(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_.empty()) aborted_ = why;
  }
  cv_.notify_all();
}

// Called by the last local member to arrive, without the lock: sends the local parts to the
// other processes of the group and stores what they sent.
void Communicator::fill_remote(Slot& slot, const std::tuple<int64_t, int64_t, int64_t>& key,
                               const std::vector<int>& group, const std::string& where) {
  std::vector<int> peers;
  RankedParts local;
  for (size_t r = 0; r < group.size(); ++r) {
    const int p = device_process_[group[r]];
    if (p == process_)
      local.emplace_back(static_cast<int>(r), slot.parts[r]);
    else if (std::find(peers.begin(), peers.end(), p) == peers.end())
      peers.push_back(p);
  }
  if (peers.empty()) return;
  if (!transport_)
    throw RuntimeError(where + ": group " + group_string(group) +
                       " spans processes but distributed::initialize() was not called");
  const auto [op, g, seq] = key;
  // Both sides derive the same tag from the instance; the payload's ranks are checked below.
  const uint64_t tag =
      ((static_cast<uint64_t>(epoch_) * 1000003u + static_cast<uint64_t>(op)) * 7919u +
       static_cast<uint64_t>(g)) *
          104729u +
      static_cast<uint64_t>(seq);
  const auto replies =
      transport_->exchange(tag, peers, serialize_parts(local), collective_timeout_seconds());
  for (size_t i = 0; i < replies.size(); ++i) {
    for (auto& [rank, tensors] : deserialize_parts(replies[i])) {
      if (rank < 0 || rank >= static_cast<int>(group.size()) ||
          device_process_[group[rank]] != peers[i] || slot.arrived[rank])
        throw RuntimeError(where + ": process " + std::to_string(peers[i]) +
                           " sent operands for group rank " + std::to_string(rank) + " of group " +
                           group_string(group) + ", which it does not run");
      slot.parts[rank] = std::move(tensors);
      slot.arrived[rank] = true;
    }
  }
  for (size_t r = 0; r < group.size(); ++r)
    if (!slot.arrived[r])
      throw RuntimeError(where + ": no operands arrived from device " + std::to_string(group[r]) +
                         " of group " + group_string(group));
}

std::shared_ptr<Gathered> Communicator::exchange(std::tuple<int64_t, int64_t, int64_t> key,
                                                 const std::vector<int>& group, int rank,
                                                 std::vector<HostTensor> operands,
                                                 const std::string& where) {
  if (group.size() == 1) {
    auto g = std::make_shared<Gathered>();
    g->parts.push_back(std::move(operands));
    return g;
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (!aborted_.empty()) throw RuntimeError(where + ": " + aborted_);
  std::shared_ptr<Slot>& entry = slots_[key];
  if (!entry) {
    entry = std::make_shared<Slot>();
    entry->parts.resize(group.size());
    entry->arrived.assign(group.size(), false);
    for (int d : group)
      if (device_process_[d] == process_) ++entry->local_members;
    entry->left = entry->local_members;
  }
  std::shared_ptr<Slot> slot = entry;
  if (slot->arrived[rank])
    throw RuntimeError(where + ": device " + std::to_string(group[rank]) +
                       " joined the same collective twice");
  slot->parts[rank] = std::move(operands);
  slot->arrived[rank] = true;
  if (++slot->local_arrived == slot->local_members) {
    lock.unlock();
    std::string error;
    try {
      fill_remote(*slot, key, group, where);
    } catch (const std::exception& e) {
      error = e.what();
    }
    lock.lock();
    slot->error = error;
    if (error.empty()) {
      slot->result = std::make_shared<Gathered>();
      slot->result->parts = std::move(slot->parts);
    }
    slot->ready = true;
    cv_.notify_all();
  } else {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration<double>(collective_timeout_seconds());
    while (!slot->ready && aborted_.empty()) {
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && !slot->ready) {
        std::vector<int> arrived, missing;
        for (size_t r = 0; r < group.size(); ++r)
          (slot->arrived[r] ? arrived : missing).push_back(group[r]);
        throw RuntimeError(where + ": collective timed out after " +
                           std::to_string(collective_timeout_seconds()) + " s in group " +
                           group_string(group) + ": devices " + group_string(arrived) +
                           " arrived, still waiting for " + group_string(missing) +
                           " (a deadlock: do all devices run the same collectives in the "
                           "same order?)");
      }
    }
    if (!slot->ready) throw RuntimeError(where + ": " + aborted_);
  }
  std::shared_ptr<Gathered> result = slot->result;
  const std::string error = slot->error;
  if (--slot->left == 0) slots_.erase(key);
  if (!error.empty()) throw RuntimeError(error);
  return result;
}

namespace {
std::mutex timeout_mu;
double timeout_override = -1;
}  // namespace

double collective_timeout_seconds() {
  std::lock_guard<std::mutex> lock(timeout_mu);
  if (timeout_override > 0) return timeout_override;
  if (const char* v = std::getenv("CUJAX_COLLECTIVE_TIMEOUT"); v && *v) {
    const double s = std::atof(v);
    if (s > 0) return s;
  }
  return 300;
}

void set_collective_timeout_seconds(double seconds) {
  if (!(seconds > 0))
    throw Error("set_collective_timeout_seconds: needs a positive time, got " +
                std::to_string(seconds));
  std::lock_guard<std::mutex> lock(timeout_mu);
  timeout_override = seconds;
}

}  // namespace cujax::runtime
