// The io_uring engine's building blocks, shared by its send and receive paths (uring.cc,
// uring_recv.cc): the ring, linked batches of sends or receives, and the provided-buffer ring
// that multishot receives fill.
#pragma once

#include <liburing.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/engine.h"
#include "engine/uring.h"
#include "util/result.h"

namespace iobench {

struct UringEngine::Ring {
  io_uring ring{};
  bool live = false;  // io_uring_queue_init succeeded
  ~Ring() {
    if (live) io_uring_queue_exit(&ring);
  }
};

namespace uring {

// One request of a batch: its memory and length.
struct Segment {
  std::byte* data = nullptr;
  size_t len = 0;
};

// --zerocopy: each SEND_ZC completes twice — its result (IORING_CQE_F_MORE: a notification
// follows) and, once the kernel has released the pages, a notification (IORING_CQE_F_NOTIF).
struct ZcState {
  uint64_t pending = 0;  // notifications still to come
};

// The no-progress clock of a wait loop (--timeout). It runs from the last completion seen, not
// from each wait: a wait for several completions that ends with part of them (io_uring returns
// what came when its timer fires) must not start the clock again. Such a wait is cut into
// slices, so the time a part came is known within one slice.
class ProgressClock {
 public:
  explicit ProgressClock(double timeout_s);
  void progressed();
  bool expired() const;
  // The next wait's timeout: what is left, at most one slice when waiting for more than one.
  __kernel_timespec next_wait(unsigned want) const;

 private:
  int64_t timeout_ns_;
  int64_t last_ns_;
};

// Accounts a CQE; true when it is a SEND_ZC notification rather than a request's result.
bool take_notification(const io_uring_cqe* cqe, ZcState* zc, IoCounters& io);

enum class Op { kSend, kRecv };

struct BatchOptions {
  // Each request must finish its whole segment (MSG_WAITALL); a short one breaks the link.
  bool waitall = true;
  ZcState* zc = nullptr;  // sends: SEND_ZC
  bool fixed = false;     // sends: from registered buffer 0 (IORING_RECVSEND_FIXED_BUF)
  double timeout_s = 30;  // no completion for this long is an error
};

// One batch: a request per segment, linked so they run in order, submitted and waited for
// with one io_uring_enter. Returns the bytes done by the batch's in-order prefix (a short or
// failed request cancels the rest, which the caller submits again); an error result ends the
// transfer. A receive of 0 bytes is the peer closing.
Result<size_t> run_batch(io_uring& ring, Op op, int fd, std::span<const Segment> segs,
                         const BatchOptions& o, IoCounters& io);

// Seconds as io_uring's timeout.
__kernel_timespec timespec_of(double s);

// Splits [data, data+len) into segments of at most `piece` bytes, at most `max` of them.
size_t split(std::byte* data, size_t len, size_t piece, size_t max, Segment* out);

// A ring of `entries` receive buffers of `size` bytes that the kernel picks from (buffer group
// `bgid`); a buffer is given back once its bytes are consumed.
class ProvidedRing {
 public:
  static Result<ProvidedRing> create(io_uring& ring, unsigned entries, size_t size, int bgid);
  ProvidedRing() = default;  // none
  ProvidedRing(ProvidedRing&& o) noexcept;
  ProvidedRing& operator=(ProvidedRing&& o) noexcept;
  ~ProvidedRing();
  std::byte* buffer(unsigned bid) const { return mem_ + static_cast<size_t>(bid) * size_; }
  void recycle(unsigned bid);
  size_t size() const { return size_; }
  unsigned entries() const { return entries_; }
  int bgid() const { return bgid_; }

 private:
  void release();
  io_uring* ring_ = nullptr;
  io_uring_buf_ring* br_ = nullptr;
  std::byte* mem_ = nullptr;
  unsigned entries_ = 0;
  size_t size_ = 0;
  int bgid_ = 0;
};

}  // namespace uring
}  // namespace iobench
