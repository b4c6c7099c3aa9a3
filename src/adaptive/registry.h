// The live connections of one side of one run: every open and close recomputes the policy's
// size, which each connection's IoBuffer adopts at its next I/O call. Shrinking is always
// granted; growing only into budget that others have freed, so that connections still holding
// an old, larger size (blocked in a call) never push the total past the budget. A joining
// connection gets at least the policy's floor, so the total can pass the budget by at most one
// floor per connection joining at that moment. Records what the report shows: the live-count
// timeline, each buffer change, and the peak of total buffer memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "adaptive/policy.h"
#include "engine/io_buffer.h"

namespace iobench {

struct LiveEvent {
  int64_t t_ns = 0;   // since the registry's start
  uint32_t live = 0;  // after this open or close
  uint64_t size = 0;  // the policy's size for that count (0 when none are live)
};

struct SizeChange {
  int64_t t_ns = 0;
  uint32_t conn = 0;
  uint64_t from = 0;    // 0: the connection's first size
  uint64_t to = 0;      // granted
  uint32_t live = 0;    // the live count the target was computed for
  uint64_t target = 0;  // the policy's size for `live`; `to` is less while the budget is full
};

struct RegistrySnapshot {
  std::vector<LiveEvent> timeline;
  std::vector<SizeChange> changes;
  uint64_t changes_dropped = 0;  // beyond kMaxRecorded
  uint32_t peak_live = 0;
  uint64_t peak_buffer_bytes = 0;  // the largest sum of all connections' buffer sizes
};

class LiveRegistry {
 public:
  static constexpr size_t kMaxRecorded = 2000;  // per list; the report stays bounded

  // `policy` must outlive the registry. Times are relative to `t0_ns` (CLOCK_MONOTONIC).
  LiveRegistry(const BufferPolicy& policy, int64_t t0_ns);

  class Member final : public BufferSizeSource {
   public:
    ~Member() override;  // the connection closes: live count - 1
    // Called only by the connection's own thread, then adopt() on that same thread.
    uint64_t target() const override {
      const uint64_t packed = reg_.target_.load(std::memory_order_relaxed);
      seen_live_ = static_cast<uint32_t>(packed >> 32);
      const uint64_t want = packed & 0xffffffffu;
      // Refused growth is retried only once some budget has been freed since.
      if (want > size_ && blocked_epoch_ == reg_.freed_epoch_.load(std::memory_order_relaxed))
        return size_;
      return want;
    }
    uint64_t adopt(uint64_t from, uint64_t to) override;

   private:
    friend class LiveRegistry;
    Member(LiveRegistry& reg, uint32_t conn) : reg_(reg), conn_(conn) {}
    LiveRegistry& reg_;
    uint32_t conn_;
    uint64_t size_ = 0;                      // as adopted by the connection's buffer
    mutable uint32_t seen_live_ = 0;         // the live count of the target last read
    uint64_t blocked_epoch_ = ~uint64_t{0};  // freed_epoch_ when growth was last refused
  };

  // The connection opens: live count + 1, new target for everyone.
  std::unique_ptr<Member> join(uint32_t conn);
  RegistrySnapshot snapshot() const;
  const BufferPolicy& policy() const { return policy_; }

 private:
  void set_live_locked(uint32_t live);  // records the event, publishes the new target
  const BufferPolicy& policy_;
  const int64_t t0_ns_;
  // live count << 32 | size, published together so a recorded change names the count its size
  // was computed for even when another connection opens in between.
  std::atomic<uint64_t> target_{0};
  std::atomic<uint64_t> freed_epoch_{0};  // + 1 whenever the total goes down
  mutable std::mutex mu_;
  uint32_t live_ = 0;
  uint64_t total_bytes_ = 0;
  RegistrySnapshot rec_;
};

}  // namespace iobench
