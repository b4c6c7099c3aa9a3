#include "adaptive/registry.h"

#include <algorithm>
#include <bit>

#include "probe/probe.h"

namespace iobench {

LiveRegistry::LiveRegistry(const BufferPolicy& policy, int64_t t0_ns)
    : policy_(policy), t0_ns_(t0_ns) {
  target_.store(uint64_t{1} << 32 | policy_.size_for(1), std::memory_order_relaxed);
}

void LiveRegistry::set_live_locked(uint32_t live) {
  live_ = live;
  rec_.peak_live = std::max(rec_.peak_live, live);
  // With none live the target keeps the last value: nobody reads it until the next join.
  const uint64_t prev = target_.load(std::memory_order_relaxed) & 0xffffffffu;
  const uint64_t size = live > 0 ? policy_.next_size(live, prev) : 0;
  if (live > 0) target_.store(uint64_t{live} << 32 | size, std::memory_order_relaxed);
  if (rec_.timeline.size() < kMaxRecorded)
    rec_.timeline.push_back({monotonic_ns() - t0_ns_, live, size});
}

std::unique_ptr<LiveRegistry::Member> LiveRegistry::join(uint32_t conn) {
  std::lock_guard lock(mu_);
  set_live_locked(live_ + 1);
  return std::unique_ptr<Member>(new Member(*this, conn));
}

LiveRegistry::Member::~Member() {
  std::lock_guard lock(reg_.mu_);
  reg_.total_bytes_ -= size_;
  reg_.freed_epoch_.fetch_add(1, std::memory_order_relaxed);
  reg_.set_live_locked(reg_.live_ - 1);
}

uint64_t LiveRegistry::Member::adopt(uint64_t from, uint64_t to) {
  std::lock_guard lock(reg_.mu_);
  const uint64_t budget = reg_.policy_.budget();
  uint64_t granted = to;
  if (budget > 0 && to > from) {
    const uint64_t others = reg_.total_bytes_ - from;
    const uint64_t room = budget > others ? budget - others : 0;
    if (room < to) {
      // Powers of two like the policy's sizes; a joining connection gets at least the floor.
      granted = room > 0 ? std::bit_floor(room) : 0;
      if (from == 0) granted = std::max(granted, reg_.policy_.floor());
      granted = std::clamp(granted, from, to);
    }
  }
  // Short of the target: ask again only once someone frees memory.
  if (granted < to) blocked_epoch_ = reg_.freed_epoch_.load(std::memory_order_relaxed);
  if (granted == from) return from;
  size_ = granted;
  reg_.total_bytes_ = reg_.total_bytes_ - from + granted;
  if (granted < from) reg_.freed_epoch_.fetch_add(1, std::memory_order_relaxed);
  reg_.rec_.peak_buffer_bytes = std::max(reg_.rec_.peak_buffer_bytes, reg_.total_bytes_);
  if (reg_.rec_.changes.size() < kMaxRecorded)
    reg_.rec_.changes.push_back(
        {monotonic_ns() - reg_.t0_ns_, conn_, from, granted, seen_live_, to});
  else
    ++reg_.rec_.changes_dropped;
  return granted;
}

RegistrySnapshot LiveRegistry::snapshot() const {
  std::lock_guard lock(mu_);
  return rec_;
}

}  // namespace iobench
