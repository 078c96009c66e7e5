#include "distributed/tcp_transport.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

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

namespace cujax::distributed {

namespace {

using Clock = std::chrono::steady_clock;
// The tag of the frame a process sends the coordinator when it is done (collective tags are
// products of small counters, far below it).
constexpr uint64_t kGoodbye = ~uint64_t{0};

// A frame: source process, destination process, tag, payload length, payload.
struct Header {
  int32_t src = 0;
  int32_t dst = 0;
  uint64_t tag = 0;
  uint64_t size = 0;
};

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

bool read_all(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
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
  TcpTransport(const std::string& address, int count, int index, double timeout_seconds)
      : count_(count),
        index_(index),
        timeout_seconds_(timeout_seconds),
        peers_(static_cast<size_t>(count), -1),
        ended_(static_cast<size_t>(count), false) {
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(timeout_seconds));
    if (index == 0)
      accept_all(address, deadline);
    else
      connect_to_coordinator(address, deadline);
    for (int p = 0; p < count_; ++p)
      if (peers_[p] >= 0) readers_.emplace_back([this, p] { read_loop(p); });
  }

  ~TcpTransport() override {
    for (int fd : peers_)
      if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
    for (auto& t : readers_) t.join();
    for (int fd : peers_)
      if (fd >= 0) ::close(fd);
  }

  // The coordinator relays between the others, so it must not close while a frame between
  // two of them may still pass through it: each process says goodbye after its last
  // collective, the coordinator returns when every other said it (or its connection ended),
  // and the others when the coordinator has closed.
  void finish() override {
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(timeout_seconds_));
    if (index_ != 0) {
      try {
        send_frame(Header{index_, 0, kGoodbye, 0}, nullptr);
      } catch (const Error&) {
        return;  // the coordinator is already gone
      }
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_until(lock, deadline, [&] {
      for (int p = 0; p < count_; ++p)
        if (peers_[p] >= 0 && !ended_[p] && !(index_ == 0 && mailbox_.count({p, kGoodbye})))
          return false;
      return true;
    });
  }

  std::vector<std::vector<std::byte>> exchange(uint64_t tag, const std::vector<int>& peers,
                                               const std::vector<std::byte>& payload,
                                               double timeout_seconds) override {
    for (int p : peers) send_frame(Header{index_, p, tag, payload.size()}, payload.data());
    std::vector<std::vector<std::byte>> replies(peers.size());
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(timeout_seconds));
    std::unique_lock<std::mutex> lock(mu_);
    for (size_t i = 0; i < peers.size(); ++i) {
      const auto key = std::make_pair(peers[i], tag);
      while (mailbox_[key].empty()) {
        if (!broken_.empty()) throw RuntimeError("TCP collective: " + broken_);
        if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && mailbox_[key].empty())
          throw RuntimeError("TCP collective timed out after " + std::to_string(timeout_seconds) +
                             " s waiting for process " + std::to_string(peers[i]));
      }
      replies[i] = std::move(mailbox_[key].front());
      mailbox_[key].pop_front();
      if (mailbox_[key].empty()) mailbox_.erase(key);
    }
    return replies;
  }

 private:
  // The coordinator: accept count-1 connections; each first sends its process index.
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
      const int ms = static_cast<int>(std::max<int64_t>(
          0,
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
      pollfd pfd{listen_fd_, POLLIN, 0};
      if (::poll(&pfd, 1, ms) <= 0) {
        std::string missing;
        for (int p = 1; p < count_; ++p)
          if (peers_[p] < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(p);
        ::close(listen_fd_);
        throw Error("distributed::initialize: processes " + missing + " did not connect to " +
                    address + " in time");
      }
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      int32_t who = -1;
      if (!read_all(fd, &who, sizeof who) || who <= 0 || who >= count_ || peers_[who] >= 0) {
        ::close(fd);
        continue;
      }
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      peers_[who] = fd;
      ++connected;
    }
    ::close(listen_fd_);
  }

  // Other processes: connect to the coordinator, retrying until it listens.
  void connect_to_coordinator(const std::string& address, Clock::time_point deadline) {
    for (;;) {
      addrinfo* ai = resolve(address, false);
      const int fd = ::socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
      const bool ok = fd >= 0 && ::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
      freeaddrinfo(ai);
      if (ok) {
        const int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        const int32_t me = index_;
        if (!write_all(fd, &me, sizeof me)) {
          ::close(fd);
          throw Error("distributed::initialize: lost the coordinator at " + address);
        }
        peers_[0] = fd;
        return;
      }
      if (fd >= 0) ::close(fd);
      if (Clock::now() > deadline)
        throw Error("distributed::initialize: cannot connect to the coordinator at " + address);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  // The socket a frame for `dst` leaves on: direct to or from the coordinator, else through it.
  int socket_for(int dst) const { return index_ == 0 ? peers_[dst] : peers_[0]; }

  void send_frame(const Header& h, const void* data) {
    const int fd = socket_for(h.dst);
    std::lock_guard<std::mutex> lock(send_mu_);
    if (fd < 0 || !write_all(fd, &h, sizeof h) || !write_all(fd, data, h.size))
      throw RuntimeError("TCP collective: cannot send to process " + std::to_string(h.dst));
  }

  void read_loop(int p) {
    const int fd = peers_[p];
    for (;;) {
      Header h;
      if (!read_all(fd, &h, sizeof h)) break;
      std::vector<std::byte> data(h.size);
      if (!read_all(fd, data.data(), h.size)) break;
      if (h.dst != index_) {  // the coordinator relays
        try {
          send_frame(h, data.data());
        } catch (const Error&) {
          break;
        }
        continue;
      }
      std::lock_guard<std::mutex> lock(mu_);
      mailbox_[{h.src, h.tag}].push_back(std::move(data));
      cv_.notify_all();
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_.empty()) broken_ = "the connection to process " + std::to_string(p) + " closed";
    ended_[p] = true;
    cv_.notify_all();
  }

  int count_;
  int index_;
  double timeout_seconds_;
  int listen_fd_ = -1;
  std::vector<int> peers_;   // socket per process (coordinator: all; others: only [0])
  std::vector<bool> ended_;  // per peer: its reader saw the connection end (guarded by mu_)
  std::vector<std::thread> readers_;
  std::mutex send_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int, uint64_t>, std::deque<std::vector<std::byte>>> mailbox_;
  std::string broken_;
};

}  // namespace

std::unique_ptr<runtime::Transport> make_tcp_transport(const std::string& address, int count,
                                                       int index, double timeout_seconds) {
  return std::make_unique<TcpTransport>(address, count, index, timeout_seconds);
}

}  // namespace cujax::distributed
