// Point-to-point messages with one tag per collective instance. MPI is asked for
// MPI_THREAD_SERIALIZED only: every call is made under one mutex, and waits poll (Iprobe,
// Testall) instead of blocking so that other devices' threads can use MPI meanwhile.
//
// Failures: a process that dies (a crash, a kill, exit() without MPI_Finalize) makes mpirun
// end the whole job within about a second and name its rank; Debian's OpenMPI has no ULFM to
// do better. A process that stops on an error leaves in order (MPI_Finalize), which would
// leave the others waiting in a collective until its timeout: so each process says goodbye to
// the others on a separate communicator before finalizing, and a wait for a process that said
// goodbye throws at once, naming it.
#include "distributed/mpi_transport.h"

#include "cujax/core/error.h"

#ifdef CUJAX_HAVE_MPI

// The C API only: OpenMPI's mpi.h otherwise pulls in its C++ bindings, a separate library.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <unistd.h>

#include <chrono>
#include <climits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cujax::distributed {

namespace {

constexpr int kGoodbyeTag = 1;

// This process as the others name it.
std::string identity() {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  return std::string(host) + ":" + std::to_string(::getpid());
}

void check(int rc, const std::string& call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw RuntimeError(call + " failed: " + std::string(text, len));
}

class MpiTransport final : public runtime::Transport {
 public:
  MpiTransport() {
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
    gone_.resize(static_cast<size_t>(size()));
    gone_at_.resize(gone_.size());
    void* ub = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    tag_ub_ = flag ? *static_cast<int*>(ub) : 32767;
  }
  ~MpiTransport() override {
    MPI_Comm_free(&control_);
    MPI_Comm_free(&comm_);
    if (owns_mpi_) MPI_Finalize();
  }

  // Tells every other process that this one makes no more collectives (small messages, sent
  // eagerly: none waits for a receiver).
  void finish() override {
    std::lock_guard<std::mutex> lock(mu_);
    const int me = rank(), n = size();
    const std::string words = identity();
    std::vector<MPI_Request> sends;
    for (int r = 0; r < n; ++r) {
      if (r == me) continue;
      MPI_Request req;
      if (MPI_Isend(words.data(), static_cast<int>(words.size()), MPI_CHAR, r, kGoodbyeTag,
                    control_, &req) == MPI_SUCCESS)
        sends.push_back(req);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    int done = 0;
    while (!done && std::chrono::steady_clock::now() < deadline) {
      MPI_Testall(static_cast<int>(sends.size()), sends.data(), &done, MPI_STATUSES_IGNORE);
      if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!done)
      for (MPI_Request& req : sends)
        if (req != MPI_REQUEST_NULL) MPI_Request_free(&req);
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
          int flag = 0;
          MPI_Status status;
          check(MPI_Iprobe(peers[i], t, comm_, &flag, &status),
                "MPI_Iprobe for rank " + std::to_string(peers[i]));
          if (!flag) continue;
          int count = 0;
          MPI_Get_count(&status, MPI_BYTE, &count);
          replies[i].resize(static_cast<size_t>(count));
          check(MPI_Recv(replies[i].data(), count, MPI_BYTE, peers[i], t, comm_, MPI_STATUS_IGNORE),
                "MPI_Recv from rank " + std::to_string(peers[i]));
          received[i] = true;
          --pending;
        }
        receive_goodbyes();
        // Messages on two communicators may pass each other: a goodbye fails the wait only
        // once whatever the process sent before it had a moment to arrive.
        const auto now = std::chrono::steady_clock::now();
        for (size_t i = 0; i < peers.size(); ++i)
          if (!received[i] && !gone_[static_cast<size_t>(peers[i])].empty() &&
              now - gone_at_[static_cast<size_t>(peers[i])] > std::chrono::milliseconds(500))
            throw RuntimeError("MPI collective: waiting for rank " + std::to_string(peers[i]) +
                               " (" + gone_[static_cast<size_t>(peers[i])] +
                               "), which left the run (it finished, or stopped on an error)");
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
  // Records the goodbyes that arrived (under mu_).
  void receive_goodbyes() {
    for (;;) {
      int flag = 0;
      MPI_Status status;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kGoodbyeTag, control_, &flag, &status) != MPI_SUCCESS || !flag)
        return;
      int count = 0;
      MPI_Get_count(&status, MPI_CHAR, &count);
      std::string words(static_cast<size_t>(std::max(count, 0)), '\0');
      MPI_Recv(words.data(), count, MPI_CHAR, status.MPI_SOURCE, kGoodbyeTag, control_,
               MPI_STATUS_IGNORE);
      gone_[static_cast<size_t>(status.MPI_SOURCE)] = words.empty() ? "?" : words;
      gone_at_[static_cast<size_t>(status.MPI_SOURCE)] = std::chrono::steady_clock::now();
    }
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm control_ = MPI_COMM_NULL;  // goodbyes
  std::vector<std::string> gone_;     // per rank: its host:pid once it said goodbye
  std::vector<std::chrono::steady_clock::time_point> gone_at_;  // when the goodbye came
  int tag_ub_ = 32767;
  bool owns_mpi_ = false;
  std::mutex mu_;
};

}  // namespace

std::unique_ptr<runtime::Transport> make_mpi_transport(int* count, int* index) {
  auto t = std::make_unique<MpiTransport>();
  *count = t->size();
  *index = t->rank();
  return t;
}

}  // namespace cujax::distributed

#else

namespace cujax::distributed {

std::unique_ptr<runtime::Transport> make_mpi_transport(int*, int*) {
  throw Error("cujax was built without MPI (install libopenmpi-dev and reconfigure)");
}

}  // namespace cujax::distributed

#endif
