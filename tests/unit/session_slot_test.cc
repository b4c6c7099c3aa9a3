// The server's --max-conns slots: claimed under the bound, given back on every path, and a
// full server that waits (bounded) for a session that is ending rather than saying busy.
#include "server/session_slot.h"

#include "server/client_shares.h"
#include "server/server_state.h"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <thread>
#include <vector>

namespace iobench {
namespace {

constexpr int64_t kFar = INT64_MAX / 2;

TEST(SessionSlot, ClaimsUpToTheBoundAndGivesBackOnDestruction) {
  std::atomic<uint32_t> taken{0};
  {
    auto a = SessionSlot::claim(taken, 2, kFar, 0);
    auto b = SessionSlot::claim(taken, 2, kFar, 0);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(taken.load(), 2u);
    EXPECT_FALSE(SessionSlot::claim(taken, 2, kFar, 0));  // full, no wait: busy
    EXPECT_EQ(taken.load(), 2u);                           // a refused claim takes nothing
  }
  EXPECT_EQ(taken.load(), 0u);
}

TEST(SessionSlot, MovedSlotIsGivenBackOnce) {
  std::atomic<uint32_t> taken{0};
  {
    SessionSlot first = *SessionSlot::claim(taken, 2, kFar, 0);
    SessionSlot moved = std::move(first);  // `first` gives back nothing when it ends
    EXPECT_EQ(taken.load(), 1u);
    SessionSlot other = *SessionSlot::claim(taken, 2, kFar, 0);
    EXPECT_EQ(taken.load(), 2u);
    moved = std::move(other);  // gives back what `moved` held, takes `other`'s
    EXPECT_EQ(taken.load(), 1u);
  }
  EXPECT_EQ(taken.load(), 0u);
}

TEST(SessionSlot, FullServerWaitsForAnEndingSession) {
  std::atomic<uint32_t> taken{0};
  auto ending = SessionSlot::claim(taken, 1, kFar, 0);
  ASSERT_TRUE(ending);
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ending.reset();
  });
  auto next = SessionSlot::claim(taken, 1, kFar, 10'000'000'000);
  closer.join();
  EXPECT_TRUE(next);
  EXPECT_EQ(taken.load(), 1u);
}

TEST(SessionSlot, WaitNeverPassesTheDeadline) {
  std::atomic<uint32_t> taken{0};
  auto held = SessionSlot::claim(taken, 1, kFar, 0);
  ASSERT_TRUE(held);
  const int64_t t0 = monotonic_ns();
  EXPECT_FALSE(SessionSlot::claim(taken, 1, t0 + 30'000'000, 10'000'000'000));
  const int64_t waited = monotonic_ns() - t0;
  EXPECT_GE(waited, 30'000'000);
  EXPECT_LT(waited, 5'000'000'000);  // the deadline, not the 10 s wait (generous: shared host)
}

// A group every connection of which was refused or has gone is dropped at the next lookup:
// before #88 a client opening groups that failed kept each 2 x --idle-timeout (+19 MiB, and
// every lookup scanned them all).
TEST(GroupTable, AGroupNoSessionHoldsIsDroppedAtTheNextLookup) {
  GroupTable table;
  proto::Hello h;
  h.conns = 2;
  for (uint64_t id = 1; id <= 100; ++id) {
    h.group_id = id;
    ASSERT_TRUE(table.get(h, 16384, false, 30));  // the shared_ptr dropped at once: refused
  }
  EXPECT_LE(table.size(), 1u);
  h.group_id = 1000;
  auto held = table.get(h, 16384, false, 30);
  ASSERT_TRUE(held);
  h.group_id = 1001;
  ASSERT_TRUE(table.get(h, 16384, false, 30));
  EXPECT_EQ(table.size(), 2u);  // the held one stays beside the newest
  h.group_id = 1000;
  auto again = table.get(h, 16384, false, 30);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->get(), held->get());  // its other connections find it
}

// The fair shares: a client alone holds the whole; beside a waiting one, its newest sessions
// past its share are cut (their sockets shut down), and leave() says why.
TEST(ClientShares, AClientOverItsShareIsCutNewestFirstOnlyWhileAnotherWaits) {
  ClientShares shares;
  int fds[4][2];
  std::vector<ClientShares::Member> members;
  for (auto& pair : fds) {
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
    members.push_back(shares.join("a", pair[0]));
  }
  EXPECT_EQ(shares.make_room("a", ClientShares::Resource::kSlots, 4), 0u);  // alone
  EXPECT_EQ(shares.make_room("b", ClientShares::Resource::kSlots, 4), 2u);  // share 2 of 4
  EXPECT_FALSE(members[0].leave());
  EXPECT_FALSE(members[1].leave());
  EXPECT_TRUE(members[2].leave());
  const auto cut = members[3].leave();  // the newest, cut first: while a held all four
  ASSERT_TRUE(cut);
  EXPECT_NE(cut->find("a held 4 session(s) of this server's 4 session(s) (share 2 session(s) "
                      "among 2 clients), and b waited"),
            std::string::npos)
      << *cut;
  char byte;
  EXPECT_EQ(::read(fds[3][1], &byte, 1), 0);  // shut down: the peer reads its end
  for (auto& pair : fds) {
    ::close(pair[0]);
    ::close(pair[1]);
  }
}

}  // namespace
}  // namespace iobench
