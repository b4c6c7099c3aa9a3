#include "adaptive/registry.h"

#include <algorithm>

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
  const uint64_t size = live > 0 ? policy_.size_for(live) : 0;
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
  reg_.set_live_locked(reg_.live_ - 1);
}

void LiveRegistry::Member::adopted(uint64_t from, uint64_t to) {
  std::lock_guard lock(reg_.mu_);
  size_ = to;
  reg_.total_bytes_ = reg_.total_bytes_ - from + to;
  reg_.rec_.peak_buffer_bytes = std::max(reg_.rec_.peak_buffer_bytes, reg_.total_bytes_);
  if (reg_.rec_.changes.size() < kMaxRecorded)
    reg_.rec_.changes.push_back({monotonic_ns() - reg_.t0_ns_, conn_, from, to, seen_live_});
  else
    ++reg_.rec_.changes_dropped;
}

RegistrySnapshot LiveRegistry::snapshot() const {
  std::lock_guard lock(mu_);
  return rec_;
}

}  // namespace iobench
