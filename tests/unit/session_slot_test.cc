// The server's --max-conns slots: claimed under the bound, given back on every path, and a
// full server that waits (bounded) for a session that is ending rather than saying busy.
#include "server/session_slot.h"

#include <gtest/gtest.h>

#include <thread>

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

}  // namespace
}  // namespace iobench
