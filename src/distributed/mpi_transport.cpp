// Point-to-point messages with one tag per collective instance. MPI is asked for
// MPI_THREAD_SERIALIZED only: every call is made under one mutex, and waits poll (Iprobe,
// Testall) instead of blocking so that other devices' threads can use MPI meanwhile.
//
// Failures. A process that dies (a crash, a kill, exit() without MPI_Finalize) makes mpirun
// end the whole job within about a second, naming its rank; Debian's OpenMPI has no ULFM to
// do better. Two cases mpirun does not see are handled here, on a second communicator:
// - a process that stops on an error leaves in order (MPI_Finalize), which would leave the
//   others waiting in a collective: each process says goodbye to the others first, and a
//   wait for a process that said goodbye throws at once, naming it;
// - a process that hangs (or whose host stops answering): every process sends the others a
//   heartbeat about every second from a thread, and one that sent none for the heartbeat
//   timeout fails every collective; this process then aborts the job (MPI_Finalize would
//   wait for the hung one) after printing why.
#include "distributed/mpi_transport.h"

#include "cujax/core/error.h"
#include "distributed/process_identity.h"

#ifdef CUJAX_HAVE_MPI

// The C API only: OpenMPI's mpi.h otherwise pulls in its C++ bindings, a separate library.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <unistd.h>

#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cujax::distributed {

namespace {

constexpr int kGoodbyeTag = 1;
constexpr int kHeartbeatTag = 2;
constexpr int kIdentity = 128;  // bytes of host:pid exchanged at start
using Clock = std::chrono::steady_clock;

void check(int rc, const std::string& call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw RuntimeError(call + " failed: " + std::string(text, len));
}

class MpiTransport final : public runtime::Transport {
 public:
  explicit MpiTransport(double heartbeat_seconds)
      : heartbeat_seconds_(heartbeat_seconds),
        beat_interval_(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(std::min(1.0, heartbeat_seconds / 4)))),
        beat_limit_(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(heartbeat_seconds))) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
      owns_mpi_ = true;
      if (provided < MPI_THREAD_SERIALIZED)
        throw Error("MPI provides thread level " + std::to_string(provided) +
                    ", cujax needs MPI_THREAD_SERIALIZED");
    }
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    check(MPI_Comm_dup(MPI_COMM_WORLD, &control_), "MPI_Comm_dup");
    // Errors come back as exceptions naming the ranks waited for, not as an abort.
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(control_, MPI_ERRORS_RETURN);
    const size_t n = static_cast<size_t>(size());
    std::vector<char> mine(kIdentity, '\0'), all(n * kIdentity);
    const std::string me = process_identity();
    std::memcpy(mine.data(), me.data(), std::min<size_t>(me.size(), kIdentity - 1));
    check(MPI_Allgather(mine.data(), kIdentity, MPI_CHAR, all.data(), kIdentity, MPI_CHAR, comm_),
          "MPI_Allgather");
    for (size_t r = 0; r < n; ++r) ids_.emplace_back(all.data() + r * kIdentity);
    gone_.resize(n);
    gone_at_.resize(n);
    heard_.assign(n, Clock::now());
    void* ub = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    tag_ub_ = flag ? *static_cast<int*>(ub) : 32767;
    if (n > 1) heartbeat_ = std::thread([this] { heartbeat_loop(); });
  }
  ~MpiTransport() override {
    stop_heartbeat();
    if (!failure_.empty()) {
      // A hung process would never reach MPI_Finalize: end the job (mpirun kills the rest).
      std::fprintf(stderr, "cujax: %s; aborting the MPI job\n", failure_.c_str());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm_free(&control_);
    MPI_Comm_free(&comm_);
    if (owns_mpi_) MPI_Finalize();
  }

  // Tells every other process that this one makes no more collectives (small messages, sent
  // eagerly: none waits for a receiver), and stops the heartbeats.
  void finish() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      const int me = rank(), n = size();
      std::vector<MPI_Request> sends;
      for (int r = 0; r < n; ++r) {
        if (r == me) continue;
        MPI_Request req;
        if (MPI_Isend(ids_[me].data(), static_cast<int>(ids_[me].size()), MPI_CHAR, r, kGoodbyeTag,
                      control_, &req) == MPI_SUCCESS)
          sends.push_back(req);
      }
      const auto deadline = Clock::now() + std::chrono::seconds(5);
      int done = 0;
      while (!done && Clock::now() < deadline) {
        MPI_Testall(static_cast<int>(sends.size()), sends.data(), &done, MPI_STATUSES_IGNORE);
        if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (!done)
        for (MPI_Request& req : sends)
          if (req != MPI_REQUEST_NULL) MPI_Request_free(&req);
    }
    stop_heartbeat();
  }

  int rank() const {
    int r = 0;
    MPI_Comm_rank(comm_, &r);
    return r;
  }
  int size() const {
    int n = 0;
    MPI_Comm_size(comm_, &n);
    return n;
  }

  std::vector<std::vector<std::byte>> exchange(uint64_t tag, const std::vector<int>& peers,
                                               const std::vector<std::byte>& payload,
                                               double timeout_seconds) override {
    if (payload.size() > static_cast<size_t>(INT_MAX))
      throw RuntimeError("collective payload of " + std::to_string(payload.size()) +
                         " bytes is larger than one MPI message (2 GiB)");
    const int t = static_cast<int>(tag % static_cast<uint64_t>(tag_ub_));
    std::vector<MPI_Request> sends(peers.size());
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < peers.size(); ++i)
        check(MPI_Isend(payload.data(), static_cast<int>(payload.size()), MPI_BYTE, peers[i], t,
                        comm_, &sends[i]),
              "MPI_Isend");
    }
    std::vector<std::vector<std::byte>> replies(peers.size());
    // A large message arrives in pieces: a receive that blocked until the last piece would hold
    // mu_ (and so stop the heartbeats) for as long as a sender that hung mid-message hangs.
    std::vector<MPI_Request> receives(peers.size(), MPI_REQUEST_NULL);
    // On a failure, receives still posted may yet write into the replies: they stay allocated.
    struct KeepPosted {
      MpiTransport& self;
      std::vector<std::vector<std::byte>>& replies;
      const std::vector<MPI_Request>& receives;
      ~KeepPosted() {
        for (MPI_Request r : receives)
          if (r != MPI_REQUEST_NULL) {
            std::lock_guard<std::mutex> lock(self.mu_);
            self.abandoned_.push_back(std::move(replies));
            return;
          }
      }
    } keep_posted{*this, replies, receives};
    std::vector<bool> received(peers.size(), false);
    size_t pending = peers.size();
    bool sent = false;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
    while (pending || !sent) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (size_t i = 0; i < peers.size(); ++i) {
          if (received[i]) continue;
          if (receives[i] != MPI_REQUEST_NULL) {
            int done = 0;
            check(MPI_Test(&receives[i], &done, MPI_STATUS_IGNORE),
                  "MPI_Test for rank " + std::to_string(peers[i]));
            if (done) {
              received[i] = true;
              --pending;
            }
            continue;
          }
          int flag = 0;
          MPI_Status status;
          check(MPI_Iprobe(peers[i], t, comm_, &flag, &status),
                "MPI_Iprobe for rank " + std::to_string(peers[i]));
          if (!flag) continue;
          int count = 0;
          MPI_Get_count(&status, MPI_BYTE, &count);
          replies[i].resize(static_cast<size_t>(count));
          // Messages of one sender and tag do not overtake each other: this is the probed one.
          check(MPI_Irecv(replies[i].data(), count, MPI_BYTE, peers[i], t, comm_, &receives[i]),
                "MPI_Irecv from rank " + std::to_string(peers[i]));
        }
        if (!stopping_) tick();
        if (!failure_.empty()) throw RuntimeError("MPI collective: " + failure_);
        // Messages on two communicators may pass each other: a goodbye fails the wait only
        // once whatever the process sent before it had a moment to arrive.
        const auto now = Clock::now();
        for (size_t i = 0; i < peers.size(); ++i)
          if (!received[i] && gone_[static_cast<size_t>(peers[i])] &&
              now - gone_at_[static_cast<size_t>(peers[i])] > std::chrono::milliseconds(500))
            throw RuntimeError("MPI collective: waiting for " + name(peers[i]) +
                               ", which left the run (it finished, or stopped on an error)");
        if (!sent) {
          int done = 0;
          check(
              MPI_Testall(static_cast<int>(sends.size()), sends.data(), &done, MPI_STATUSES_IGNORE),
              "MPI_Testall");
          sent = done != 0;
        }
      }
      if (!pending && sent) break;
      if (std::chrono::steady_clock::now() > deadline) {
        std::string missing;
        for (size_t i = 0; i < peers.size(); ++i)
          if (!received[i]) missing += (missing.empty() ? "" : ", ") + std::to_string(peers[i]);
        throw RuntimeError("MPI collective timed out after " + std::to_string(timeout_seconds) +
                           " s waiting for process(es) " + (missing.empty() ? "-" : missing));
      }
      std::this_thread::yield();
    }
    return replies;
  }

 private:
  std::string name(int r) const { return "rank " + std::to_string(r) + " (" + ids_[r] + ")"; }

  // Takes in the goodbyes and heartbeats that arrived (under mu_).
  void receive_control() {
    for (;;) {
      int flag = 0;
      MPI_Status status;
      if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, control_, &flag, &status) != MPI_SUCCESS || !flag)
        return;
      int count = 0;
      MPI_Get_count(&status, MPI_CHAR, &count);
      std::vector<char> bytes(static_cast<size_t>(std::max(count, 1)));
      MPI_Recv(bytes.data(), count, MPI_CHAR, status.MPI_SOURCE, status.MPI_TAG, control_,
               MPI_STATUS_IGNORE);
      const size_t r = static_cast<size_t>(status.MPI_SOURCE);
      heard_[r] = Clock::now();
      if (status.MPI_TAG == kGoodbyeTag && !gone_[r]) {
        gone_[r] = true;
        gone_at_[r] = Clock::now();
      }
    }
  }

  // Under mu_, from the heartbeat thread and from every wait (which may hold mu_ most of the
  // time): about every second a heartbeat to each other process, then the check that each
  // sent something within the timeout.
  void tick() {
    const auto now = Clock::now();
    const int me = rank(), n = size();
    if (now - last_beat_ >= beat_interval_) {
      last_beat_ = now;
      for (int r = 0; r < n; ++r) {
        if (r == me || gone_[r]) continue;
        MPI_Request req;
        if (MPI_Isend(&kBeat, 1, MPI_CHAR, r, kHeartbeatTag, control_, &req) == MPI_SUCCESS)
          MPI_Request_free(&req);
      }
    }
    receive_control();
    for (int r = 0; r < n && failure_.empty(); ++r)
      if (r != me && !gone_[r] && now - heard_[r] > beat_limit_) {
        char secs[32];
        std::snprintf(secs, sizeof secs, "%g", heartbeat_seconds_);
        failure_ = name(r) + " sent no heartbeat for " + secs +
                   " s (the heartbeat timeout, CUJAX_HEARTBEAT_TIMEOUT): it hangs, or its host "
                   "is unreachable";
      }
  }

  void heartbeat_loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_cv_.wait_for(lock, beat_interval_ / 2, [&] { return stopping_; })) tick();
  }

  void stop_heartbeat() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    stop_cv_.notify_all();
    if (heartbeat_.joinable()) heartbeat_.join();
  }

  static constexpr char kBeat = 0;
  double heartbeat_seconds_;
  Clock::duration beat_interval_;
  Clock::duration beat_limit_;
  Clock::time_point last_beat_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm control_ = MPI_COMM_NULL;  // goodbyes and heartbeats
  int tag_ub_ = 32767;
  bool owns_mpi_ = false;
  std::vector<std::string> ids_;  // host:pid per rank
  // Buffers of receives posted by a collective that failed (see exchange).
  std::vector<std::vector<std::vector<std::byte>>> abandoned_;
  std::thread heartbeat_;
  std::mutex mu_;  // every MPI call; what follows
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::vector<bool> gone_;  // per rank: it said goodbye
  std::vector<Clock::time_point> gone_at_;
  std::vector<Clock::time_point> heard_;  // per rank: when its last control message came
  std::string failure_;                   // a hung process: fails every collective
};

}  // namespace

std::unique_ptr<runtime::Transport> make_mpi_transport(int* count, int* index,
                                                       double heartbeat_seconds) {
  auto t = std::make_unique<MpiTransport>(heartbeat_seconds);
  *count = t->size();
  *index = t->rank();
  return t;
}

}  // namespace cujax::distributed

#else

namespace cujax::distributed {

std::unique_ptr<runtime::Transport> make_mpi_transport(int*, int*, double) {
  throw Error("cujax was built without MPI (install libopenmpi-dev and reconfigure)");
}

}  // namespace cujax::distributed

#endif
