// The TCP transport between processes: what a collective reports when a peer dies under it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <thread>
#include <vector>

#include "cujax/core/error.h"
#include "distributed/tcp_transport.h"
#include "free_port.h"

namespace cujax {
namespace {

struct Outcome {
  std::string message;  // what the coordinator's collective threw
  pid_t child = 0;
  int status = 0;  // the child's, from waitpid
};

// Process 1 connects, then `leave`s without a goodbye while the coordinator streams a payload to
// it that it never reads.
Outcome send_to_a_peer_that(void (*leave)()) {
  Outcome out;
  const std::string address = "127.0.0.1:" + std::to_string(testutil::free_port());
  distributed::TcpTimeouts timeouts;
  timeouts.initialization = 30;
  out.child = ::fork();
  if (out.child < 0) ADD_FAILURE() << "fork failed";
  if (out.child == 0) {
    try {
      auto transport = distributed::make_tcp_transport(address, 2, 1, timeouts);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      leave();
    } catch (...) {
      ::_exit(2);
    }
    ::_exit(0);
  }
  auto coordinator = distributed::make_tcp_transport(address, 2, 0, timeouts);
  const std::vector<std::byte> payload(std::size_t{64} << 20);
  try {
    coordinator->exchange(1, {1}, payload, 30);
  } catch (const Error& e) {
    out.message = e.what();
  }
  EXPECT_EQ(::waitpid(out.child, &out.status, 0), out.child);
  return out;
}

void expect_named_as_gone(const Outcome& out) {
  EXPECT_NE(out.message.find("process 1 ("), std::string::npos) << out.message;
  EXPECT_NE(out.message.find(":" + std::to_string(out.child) + ")"), std::string::npos)
      << out.message;
  EXPECT_NE(out.message.find("exited or crashed"), std::string::npos) << out.message;
}

// However the coordinator learns of the crash first (its send fails, or its reader sees the
// connection reset), the collective names the dead process and says how it left, as in a run
// killed mid-step (distributed_failure_test.sh).
TEST(TcpTransport, ASendToAKilledProcessNamesIt) {
  const Outcome out = send_to_a_peer_that([] { ::kill(::getpid(), SIGKILL); });
  ASSERT_TRUE(WIFSIGNALED(out.status) && WTERMSIG(out.status) == SIGKILL)
      << "the child failed to connect (status " << out.status << ")";
  expect_named_as_gone(out);
}

// A peer that closes its connection in order but unannounced may leave the coordinator's send
// waiting for a window that never opens; its reader's end of the connection ends the send.
TEST(TcpTransport, ASendToAProcessThatClosedWithoutAGoodbyeEnds) {
  const Outcome out = send_to_a_peer_that([] {});  // the transport's destructor closes
  ASSERT_TRUE(WIFEXITED(out.status) && WEXITSTATUS(out.status) == 0)
      << "the child failed to connect (status " << out.status << ")";
  expect_named_as_gone(out);
}

}  // namespace
}  // namespace cujax
