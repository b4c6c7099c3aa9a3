// The server's one memory budget (--memory-budget): every byte a session can make the server
// hold — payloads, receive buffers and io_uring rings, a --fixed-buffers copy, TLS buffers,
// control frames — is taken from it before it is allocated, and given back when freed. A
// request that does not fit is refused with the reason; nothing the wire asks for is allocated
// unchecked (CERT MEM35-C; Valkey's maxmemory-clients, nginx's client_max_body_size).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

namespace iobench {

class MemoryBudget {
 public:
  // Bytes taken and not yet given back; shared with every Hold, so a hold may outlive the
  // budget (a payload freed by the last session out, after the server's state is gone).
  using Counter = std::shared_ptr<std::atomic<uint64_t>>;

  // Bytes taken from the budget, given back when destroyed.
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& o) noexcept : held_(std::move(o.held_)), bytes_(std::exchange(o.bytes_, 0)) {}
    Hold& operator=(Hold&& o) noexcept {
      if (this != &o) {
        give_back();
        held_ = std::move(o.held_);
        bytes_ = std::exchange(o.bytes_, 0);
      }
      return *this;
    }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold() { give_back(); }
    uint64_t bytes() const { return bytes_; }

   private:
    friend class MemoryBudget;
    Hold(Counter held, uint64_t bytes) : held_(std::move(held)), bytes_(bytes) {}
    void give_back() {
      if (held_ && bytes_ != 0) *held_ -= bytes_;
      bytes_ = 0;
    }
    Counter held_;
    uint64_t bytes_ = 0;
  };

  explicit MemoryBudget(uint64_t limit = UINT64_MAX) : limit_(limit) {}
  void set_limit(uint64_t bytes) { limit_ = bytes; }

  // `bytes` taken when they fit beside what is held (atomically: two sessions cannot both pass
  // the check); nullopt when they do not.
  std::optional<Hold> take(uint64_t bytes) {
    for (uint64_t h = held_->load();;) {
      if (bytes > limit_ || h > limit_ - bytes) return std::nullopt;
      if (held_->compare_exchange_weak(h, h + bytes)) return Hold(held_, bytes);
    }
  }
  uint64_t held() const { return held_->load(); }
  uint64_t limit() const { return limit_; }

 private:
  uint64_t limit_;
  Counter held_ = std::make_shared<std::atomic<uint64_t>>(0);
};

}  // namespace iobench
