// The pre-auth gate's choice of whom to cut and what it says a source holds (src/server/preauth.h).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <vector>

#include "server/preauth.h"
#include "server/server_state.h"

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

namespace iobench {
namespace {

TEST(EscapeForLog, ControlsAndCodePointsThatActOnADisplayAreEscaped) {
  EXPECT_EQ(escape_for_log("a\nb\x1b[2J"), "a\\nb\\x1b[2J");
  EXPECT_EQ(escape_for_log("raw \x9b" "31m"), "raw \\x9b31m");  // not UTF-8: its byte
  EXPECT_EQ(escape_for_log("\xc2\x9b" "31m"), "\\u{009b}31m");  // U+009B, the C1 CSI
  EXPECT_EQ(escape_for_log("x\xc2\x85y"), "x\\u{0085}y");      // U+0085, next line
  EXPECT_EQ(escape_for_log("x\xe2\x80\xa8y"), "x\\u{2028}y");  // line separator
  EXPECT_EQ(escape_for_log("\xe2\x80\xae" "cba"), "\\u{202e}cba");  // right-to-left override
  EXPECT_EQ(escape_for_log("caf\xc3\xa9 \xe2\x9c\x93"), "caf\xc3\xa9 \xe2\x9c\x93");  // as is
  EXPECT_EQ(escape_for_log("\xe2\x80"), "\\xe2\\x80");  // a cut sequence
}

}  // namespace
}  // namespace iobench
