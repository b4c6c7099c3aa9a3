// A session's place under --max-conns: claimed once the client is authorised, held for the
// session's life, given back when it ends (server.cc).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <thread>
#include <utility>

#include "probe/probe.h"

namespace iobench {

// One of the --max-conns session slots, held by an authorised session for as long as it lives
// (a flood of unauthenticated connections cannot make a valid one busy).
class SessionSlot {
 public:
  // A slot, or none when every one stays taken. A session whose client already has its last
  // figures may still be closing and logging, and that client's next run (the counting run
  // after the measured one, the next size) connects at once: a full server waits for a slot
  // to free, at most `wait_ns` and never past the handshake deadline, before it says busy.
  static std::optional<SessionSlot> claim(std::atomic<uint32_t>& taken, uint32_t max,
                                          int64_t deadline_ns, int64_t wait_ns = kSlotWaitNs) {
    const int64_t until = std::min(deadline_ns, monotonic_ns() + wait_ns);
    for (uint32_t n = taken.load();;) {
      if (n < max && taken.compare_exchange_weak(n, n + 1)) return SessionSlot(taken);
      if (n >= max) {
        if (monotonic_ns() >= until) return std::nullopt;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        n = taken.load();
      }
    }
  }
  SessionSlot(SessionSlot&& o) noexcept : taken_(std::exchange(o.taken_, nullptr)) {}
  SessionSlot(const SessionSlot&) = delete;
  SessionSlot& operator=(const SessionSlot&) = delete;
  SessionSlot& operator=(SessionSlot&& o) noexcept {
    if (this != &o) {
      if (taken_) --*taken_;
      taken_ = std::exchange(o.taken_, nullptr);
    }
    return *this;
  }
  ~SessionSlot() {
    if (taken_) --*taken_;
  }

  static constexpr int64_t kSlotWaitNs = 2'000'000'000;

 private:
  explicit SessionSlot(std::atomic<uint32_t>& taken) : taken_(&taken) {}
  std::atomic<uint32_t>* taken_ = nullptr;
};

}  // namespace iobench
