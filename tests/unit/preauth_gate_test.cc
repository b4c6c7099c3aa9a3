// The pre-auth gate's choice of whom to cut and what it says a source holds (src/server/preauth.h).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <vector>

#include "server/preauth.h"

namespace iobench {
namespace {

// Connected sockets the gate may shut down; closed at the end of the test.
struct Sockets {
  std::vector<std::array<int, 2>> pairs;
  int next() {
    std::array<int, 2> sv{};
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv.data()), 0);
    pairs.push_back(sv);
    return sv[0];
  }
  ~Sockets() {
    for (auto [a, b] : pairs) ::close(a), ::close(b);
  }
};

TEST(PreAuthGate, ASourceHoldsItsConnectionsUntilTheyAreReleasedCutOrNot) {
  Sockets fds;
  PreAuthGate gate(2, 60);
  EXPECT_FALSE(gate.holds("10.0.0.1"));
  auto flood1 = gate.admit(fds.next(), "10.0.0.2");
  auto flood2 = gate.admit(fds.next(), "10.0.0.2");
  EXPECT_TRUE(gate.holds("10.0.0.2"));
  EXPECT_FALSE(gate.holds("10.0.0.1"));
  // At the cap a newcomer from a quieter source cuts one of the busiest source's, never itself.
  auto client = gate.admit(fds.next(), "10.0.0.1");
  EXPECT_EQ(client.cut(), PreAuthCut::kNone);
  EXPECT_EQ((flood1.cut() == PreAuthCut::kMadeRoom) + (flood2.cut() == PreAuthCut::kMadeRoom), 1);
  // A cut connection's handler has not ended yet: its source still holds it.
  (void)(flood1.cut() == PreAuthCut::kMadeRoom ? flood2 : flood1).release();
  EXPECT_TRUE(gate.holds("10.0.0.2"));
  (void)flood1.release();
  (void)flood2.release();
  EXPECT_FALSE(gate.holds("10.0.0.2"));
  EXPECT_TRUE(gate.holds("10.0.0.1"));
}

}  // namespace
}  // namespace iobench
