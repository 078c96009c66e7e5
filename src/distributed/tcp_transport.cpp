#include "distributed/tcp_transport.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "cujax/core/error.h"
#include "distributed/process_identity.h"

namespace cujax::distributed {

namespace {

using Clock = std::chrono::steady_clock;
// Control frames. Their tags are far above collective tags (products of small counters).
constexpr uint64_t kGoodbye = ~uint64_t{0};        // to the coordinator: no more collectives
constexpr uint64_t kHeartbeat = ~uint64_t{0} - 1;  // either way: still alive
// From the coordinator: process `src` left the run; the payload is a byte (1: it failed) and
// the sentence saying how.
constexpr uint64_t kDeparted = ~uint64_t{0} - 2;
constexpr size_t kMaxIdentity = 300;
// How long a failed send waits for the broken connection's reader to say why it broke.
constexpr std::chrono::seconds kBrokenConnectionGrace{2};

// A frame: source process, destination process, tag, payload length, payload.
struct Header {
  int32_t src = 0;
  int32_t dst = 0;
  uint64_t tag = 0;
  uint64_t size = 0;
};

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

int ms_until(Clock::time_point deadline) {
  return static_cast<int>(std::clamp<int64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count(), 0,
      1 << 30));
}

std::string format_seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", s);
  return text;
}

bool write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Stamps `heard` (nanoseconds) whenever bytes arrive: a large frame is progress too.
bool read_all(int fd, void* data, size_t n, std::atomic<int64_t>* heard = nullptr) {
  char* p = static_cast<char*>(data);
  while (n) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    if (heard) heard->store(now_ns());
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// read_all, giving up at `deadline` (the start-up handshake).
bool read_before(int fd, void* data, size_t n, Clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (n) {
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, ms_until(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool write_string(int fd, const std::string& s) {
  const uint32_t n = static_cast<uint32_t>(s.size());
  return write_all(fd, &n, sizeof n) && write_all(fd, s.data(), s.size());
}

bool read_string(int fd, std::string* s, Clock::time_point deadline) {
  uint32_t n = 0;
  if (!read_before(fd, &n, sizeof n, deadline) || n > kMaxIdentity) return false;
  s->resize(n);
  return read_before(fd, s->data(), n, deadline);
}

std::pair<std::string, std::string> split_address(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size())
    throw Error("distributed::initialize: coordinator_address '" + address + "' is not host:port");
  return {address.substr(0, colon), address.substr(colon + 1)};
}

addrinfo* resolve(const std::string& address, bool passive) {
  const auto [host, port] = split_address(address);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* result = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &result); rc != 0)
    throw Error("distributed::initialize: cannot resolve coordinator_address '" + address +
                "': " + gai_strerror(rc));
  return result;
}

class TcpTransport final : public runtime::Transport {
 public:
  TcpTransport(const std::string& address, int count, int index, const TcpTimeouts& timeouts)
      : count_(count),
        index_(index),
        timeouts_(timeouts),
        peers_(static_cast<size_t>(count), -1),
        ids_(static_cast<size_t>(count)),
        send_mu_(new std::mutex[static_cast<size_t>(count)]),
        heard_(new std::atomic<int64_t>[static_cast<size_t>(count)]),
        gone_(static_cast<size_t>(count)),
        cut_(static_cast<size_t>(count)) {
    ids_[static_cast<size_t>(index)] = process_identity();
    const auto deadline = Clock::now() + seconds(timeouts.initialization);
    if (index == 0)
      accept_all(address, deadline);
    else
      connect_to_coordinator(address, deadline);
    for (int p = 0; p < count_; ++p) {
      heard_[p].store(now_ns());
      if (peers_[p] >= 0) readers_.emplace_back([this, p] { read_loop(p); });
    }
    heartbeat_ = std::thread([this] { heartbeat_loop(); });
  }

  ~TcpTransport() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    stop_cv_.notify_all();
    heartbeat_.join();
    for (int fd : peers_)
      if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
    for (auto& t : readers_) t.join();
    for (int fd : peers_)
      if (fd >= 0) ::close(fd);
  }

  // The coordinator relays between the others, so it must not close while a frame between
  // two of them may still pass through it: each process says goodbye after its last
  // collective, and the coordinator returns when every other said it (or failed). The
  // coordinator also tells the others that it left, so that none waits for it in vain.
  void finish() override {
    const auto deadline = Clock::now() + seconds(timeouts_.finish);
    {
      std::lock_guard<std::mutex> lock(mu_);
      finishing_ = true;
    }
    if (index_ != 0) {
      try {
        send_frame(Header{index_, 0, kGoodbye, 0}, nullptr);
      } catch (const Error&) {
        return;  // the coordinator is already gone
      }
    } else {
      for (int q = 1; q < count_; ++q) notify_departed(q, 0, name(0) + " left the run", false);
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_until(lock, deadline, [&] {
      if (index_ != 0) return !gone_[0].empty();
      for (int p = 1; p < count_; ++p)
        if (peers_[p] >= 0 && gone_[p].empty()) return false;
      return true;
    });
  }

  std::vector<std::vector<std::byte>> exchange(uint64_t tag, const std::vector<int>& peers,
                                               const std::vector<std::byte>& payload,
                                               double timeout_seconds) override {
    for (int p : peers) send_frame(Header{index_, p, tag, payload.size()}, payload.data());
    std::vector<std::vector<std::byte>> replies(peers.size());
    const auto deadline = Clock::now() + seconds(timeout_seconds);
    std::unique_lock<std::mutex> lock(mu_);
    for (size_t i = 0; i < peers.size(); ++i) {
      const auto key = std::make_pair(peers[i], tag);
      auto it = mailbox_.find(key);
      while (it == mailbox_.end()) {
        if (!failure_.empty()) throw RuntimeError("TCP collective: " + failure_);
        if (!gone_[peers[i]].empty())
          throw RuntimeError("TCP collective: waiting for " + gone_[peers[i]]);
        if (cv_.wait_until(lock, deadline) == std::cv_status::timeout &&
            mailbox_.find(key) == mailbox_.end())
          throw RuntimeError("TCP collective timed out after " + format_seconds(timeout_seconds) +
                             " s waiting for " + name(peers[i]));
        it = mailbox_.find(key);
      }
      replies[i] = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) mailbox_.erase(it);
    }
    return replies;
  }

 private:
  // "process P (host:pid)" where this process knows P's identity.
  std::string name(int p) const {
    const std::string& id = ids_[static_cast<size_t>(p)];
    return "process " + std::to_string(p) + (id.empty() ? "" : " (" + id + ")");
  }

  // The coordinator: accept count-1 connections; each first sends its process index and
  // identity, and hears the coordinator's identity back.
  void accept_all(const std::string& address, Clock::time_point deadline) {
    addrinfo* ai = resolve(address, true);
    listen_fd_ = ::socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    const int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    const bool bound = listen_fd_ >= 0 && ::bind(listen_fd_, ai->ai_addr, ai->ai_addrlen) == 0 &&
                       ::listen(listen_fd_, count_) == 0;
    freeaddrinfo(ai);
    if (!bound)
      throw Error("distributed::initialize: cannot listen at coordinator_address '" + address +
                  "': " + std::strerror(errno));
    for (int connected = 1; connected < count_;) {
      pollfd pfd{listen_fd_, POLLIN, 0};
      if (::poll(&pfd, 1, ms_until(deadline)) <= 0) {
        std::string missing;
        for (int p = 1; p < count_; ++p)
          if (peers_[p] < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(p);
        ::close(listen_fd_);
        for (int fd : peers_)
          if (fd >= 0) ::close(fd);
        throw Error("distributed::initialize: processes " + missing + " did not connect to " +
                    address + " within " + format_seconds(timeouts_.initialization) +
                    " s (CUJAX_INIT_TIMEOUT)");
      }
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      // A stranger that sends nothing must not hold up the start.
      const auto handshake = std::min(deadline, Clock::now() + std::chrono::seconds(5));
      int32_t who = -1;
      std::string id;
      if (!read_before(fd, &who, sizeof who, handshake) || who <= 0 || who >= count_ ||
          peers_[who] >= 0 || !read_string(fd, &id, handshake) || !write_string(fd, ids_[0])) {
        ::close(fd);
        continue;
      }
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      peers_[who] = fd;
      ids_[static_cast<size_t>(who)] = id;
      ++connected;
    }
    ::close(listen_fd_);
  }

  // Other processes: connect to the coordinator, retrying until it listens or the deadline.
  void connect_to_coordinator(const std::string& address, Clock::time_point deadline) {
    for (;;) {
      addrinfo* ai = resolve(address, false);
      const int fd = ::socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
      const bool ok = fd >= 0 && ::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
      const int err = errno;
      freeaddrinfo(ai);
      if (ok) {
        const int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        const int32_t me = index_;
        if (!write_all(fd, &me, sizeof me) || !write_string(fd, ids_[index_]) ||
            !read_string(fd, &ids_[0], deadline)) {
          ::close(fd);
          throw Error("distributed::initialize: the coordinator at " + address +
                      " closed the connection at start-up (is process " + std::to_string(index_) +
                      " running twice?)");
        }
        peers_[0] = fd;
        return;
      }
      if (fd >= 0) ::close(fd);
      if (Clock::now() > deadline)
        throw Error("distributed::initialize: cannot reach the coordinator at " + address +
                    " within " + format_seconds(timeouts_.initialization) +
                    " s (CUJAX_INIT_TIMEOUT): " + std::strerror(err));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  // The socket a frame for `dst` leaves on: direct to or from the coordinator, else through it.
  int socket_for(int dst) const { return index_ == 0 ? dst : 0; }

  void send_frame(const Header& h, const void* data) {
    const int via = socket_for(h.dst);
    const int fd = peers_[via];
    std::lock_guard<std::mutex> lock(send_mu_[via]);
    if (fd < 0 || !write_all(fd, &h, sizeof h) || !write_all(fd, data, h.size)) {
      // The connection broke: its reader learns how (closed, cut off, a goodbye) a moment
      // later, so wait for that rather than report a bare send failure.
      std::unique_lock<std::mutex> state(mu_);
      cv_.wait_for(state, kBrokenConnectionGrace,
                   [&] { return stopping_ || !failure_.empty() || !gone_[via].empty(); });
      if (!failure_.empty()) throw RuntimeError("TCP collective: " + failure_);
      if (!gone_[via].empty()) throw RuntimeError("TCP collective: " + gone_[via]);
      throw RuntimeError("TCP collective: cannot send to " + name(h.dst));
    }
  }

  // Records that `p` no longer takes part (once); a failure fails every collective from now
  // on. The coordinator passes the news on to the others, from the reader of `p` so that it
  // follows every frame of `p` it relayed.
  void depart(int p, const std::string& why, bool failed) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!gone_[p].empty()) return;
      gone_[p] = why;
      if (failed && failure_.empty()) failure_ = why;
    }
    cv_.notify_all();
    if (index_ == 0 && p != 0)
      for (int q = 1; q < count_; ++q)
        if (q != p) notify_departed(q, p, why, failed);
  }

  void notify_departed(int to, int p, const std::string& why, bool failed) {
    std::vector<char> payload(1 + why.size());
    payload[0] = failed ? 1 : 0;
    std::memcpy(payload.data() + 1, why.data(), why.size());
    try {
      send_frame(Header{p, to, kDeparted, payload.size()}, payload.data());
    } catch (const Error&) {
      // `to` is gone too: its own reader reports it.
    }
  }

  void read_loop(int p) {
    const int fd = peers_[p];
    for (;;) {
      Header h;
      if (!read_all(fd, &h, sizeof h, &heard_[p])) break;
      std::vector<std::byte> data(h.size);
      if (!read_all(fd, data.data(), h.size, &heard_[p])) break;
      if (h.tag == kHeartbeat) continue;
      if (h.tag == kGoodbye) {
        depart(p, name(p) + " left the run (it finished, or stopped on an error)", false);
        continue;
      }
      if (h.tag == kDeparted && h.size > 0 && h.src >= 0 && h.src < count_) {
        const std::string why(reinterpret_cast<const char*>(data.data()) + 1, h.size - 1);
        depart(h.src, why, data[0] != std::byte{0});
        continue;
      }
      if (h.dst != index_) {  // the coordinator relays
        try {
          send_frame(h, data.data());
        } catch (const Error&) {
          // The destination is gone: its own reader reports it.
        }
        continue;
      }
      std::lock_guard<std::mutex> lock(mu_);
      mailbox_[{h.src, h.tag}].push_back(std::move(data));
      cv_.notify_all();
    }
    std::string why;
    bool failed = true;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_ || !gone_[p].empty()) return;
      if (!cut_[p].empty()) {
        why = cut_[p];
      } else if (p == 0 && finishing_) {
        why = name(0) + " finished";  // it closes after every goodbye
        failed = false;
      } else {
        why = name(p) + " exited or crashed (its connection closed without a goodbye)";
      }
    }
    // A send blocked on a peer that no longer reads would wait forever: end it too.
    if (failed) ::shutdown(fd, SHUT_RDWR);
    depart(p, why, failed);
  }

  // Sends a heartbeat to each directly connected process about every second and cuts off a
  // process that sent nothing for the heartbeat timeout (its reader then reports it): a
  // stopped or unreachable process closes no connection.
  void heartbeat_loop() {
    const auto interval = seconds(std::min(1.0, timeouts_.heartbeat / 4));
    const int64_t limit_ns = static_cast<int64_t>(timeouts_.heartbeat * 1e9);
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_cv_.wait_for(lock, interval, [&] { return stopping_; })) {
      std::vector<int> live;
      for (int p = 0; p < count_; ++p)
        if (peers_[p] >= 0 && gone_[p].empty()) live.push_back(p);
      lock.unlock();
      for (int p : live) {
        // Skipped while a frame is being sent: its bytes say as much.
        std::unique_lock<std::mutex> send(send_mu_[p], std::try_to_lock);
        pollfd pfd{peers_[p], POLLOUT, 0};
        if (send.owns_lock() && ::poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLOUT)) {
          const Header beat{index_, p, kHeartbeat, 0};
          write_all(peers_[p], &beat, sizeof beat);
        }
      }
      const int64_t now = now_ns();
      lock.lock();
      for (int p : live) {
        if (now - heard_[p].load() <= limit_ns || !gone_[p].empty() || !cut_[p].empty()) continue;
        cut_[p] = name(p) + " sent nothing for " + format_seconds(timeouts_.heartbeat) +
                  " s (the heartbeat timeout, CUJAX_HEARTBEAT_TIMEOUT): it hangs, or its host "
                  "is unreachable";
        ::shutdown(peers_[p], SHUT_RDWR);
      }
    }
  }

  int count_;
  int index_;
  TcpTimeouts timeouts_;
  int listen_fd_ = -1;
  std::vector<int> peers_;                 // socket per process (coordinator: all; others: [0])
  std::vector<std::string> ids_;           // host:pid per process, where known (fixed at start)
  std::unique_ptr<std::mutex[]> send_mu_;  // per socket: one frame at a time
  std::unique_ptr<std::atomic<int64_t>[]> heard_;  // per socket: when bytes last arrived
  std::vector<std::thread> readers_;
  std::thread heartbeat_;
  std::mutex mu_;  // guards what follows
  std::condition_variable cv_;
  std::condition_variable stop_cv_;
  std::map<std::pair<int, uint64_t>, std::deque<std::vector<std::byte>>> mailbox_;
  std::vector<std::string> gone_;  // per process: how it left the run; empty while it takes part
  std::vector<std::string> cut_;   // per socket: why the heartbeat check closed it
  std::string failure_;            // the first process failure: fails every collective
  bool finishing_ = false;
  bool stopping_ = false;
};

}  // namespace

std::unique_ptr<runtime::Transport> make_tcp_transport(const std::string& address, int count,
                                                       int index, const TcpTimeouts& timeouts) {
  return std::make_unique<TcpTransport>(address, count, index, timeouts);
}

}  // namespace cujax::distributed
