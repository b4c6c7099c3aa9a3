// The fan-out writer's event loop on io_uring (--fanout event-loop --send-engine uring): each
// round submits one send per replica, all in one io_uring_enter, and reaps their completions; a
// send the socket took only in part is submitted again for the rest (a stall: the socket filled)
// and the next chunk waits until every replica has taken this one, as with epoll. TLS runs in
// the memory-BIO model: the chunk is sealed into the stream's codec and its records sent. A
// replica whose send completes nothing for --timeout is cancelled and dropped.
#include <fmt/format.h>
#include <liburing.h>
#include <sys/socket.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <unordered_map>

#include "fanout/fanout.h"
#include "probe/probe.h"

namespace iobench {
namespace {

constexpr int64_t kSliceNs = 250'000'000;  // a silent replica is found within --timeout + this
// A send waits in the kernel for room instead of failing with EAGAIN: one that took this long
// (copying 64 KiB takes tens of microseconds) waited, and counts as a stall.
constexpr int64_t kSlowSendNs = 1'000'000;

class UringLoop final : public FanoutShapeLoop {
 public:
  UringLoop(double timeout_s) : timeout_ns_(static_cast<int64_t>(timeout_s * 1e9)) {}
  ~UringLoop() override {
    if (live_) io_uring_queue_exit(&ring_);
  }
  UringLoop(const UringLoop&) = delete;
  UringLoop& operator=(const UringLoop&) = delete;

  Status init(uint32_t replicas) {
    const int rc = io_uring_queue_init(std::bit_ceil(2 * replicas + 8), &ring_, 0);
    if (rc < 0) return fail(fmt::format("io_uring_queue_init: {}", std::strerror(-rc)));
    live_ = true;
    return {};
  }

  void round(std::span<FanoutReplicaState* const> live, FanoutCounts& c) override {
    for (FanoutReplicaState* r : live) start_chunk(*r, c);
    while (inflight_ > 0) reap(c);
  }

 private:
  struct Send {
    bool cancelling = false;
    bool stalled = false;     // this chunk took more than one send
    uint64_t sealed_end = 0;  // TLS: plaintext sealed into the codec's outbox
  };

  // The bytes the replica's next send carries: plaintext, or the codec's sealed records.
  static std::span<const std::byte> next_bytes(FanoutReplicaState& r) {
    if (WireCodec* codec = r.stream->wire_codec()) return codec->outbox();
    return r.data.subspan(r.off, r.chunk_end - r.off);
  }

  void start_chunk(FanoutReplicaState& r, FanoutCounts& c) {
    Send& s = sends_[&r];
    s.stalled = false;
    if (WireCodec* codec = r.stream->wire_codec(); codec && r.chunk_end > s.sealed_end) {
      if (auto st = codec->seal(r.data.subspan(r.off, r.chunk_end - r.off)); !st) {
        drop_replica(r, "event-loop (uring): " + st.error().message);
        return;
      }
      s.sealed_end = r.chunk_end;
    }
    r.pending_since_ns = r.last_progress_ns = monotonic_ns();
    if (next_bytes(r).empty()) return finish_chunk(r, s);
    submit_send(r, c);
  }

  void submit_send(FanoutReplicaState& r, FanoutCounts& c) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (!sqe) {  // the queue is full: push what is queued first
      io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
    }
    const std::span<const std::byte> bytes = next_bytes(r);
    io_uring_prep_send(sqe, r.stream->fd(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
    io_uring_sqe_set_data(sqe, &r);
    ++inflight_;
    ++c.writes;
    ++r.io->calls;
    ++r.io->uring.sqes;
  }

  // The chunk is all on the wire: the stall time, and whether the replica is done.
  void finish_chunk(FanoutReplicaState& r, const Send& s) {
    const int64_t took = monotonic_ns() - r.pending_since_ns;
    if (s.stalled || took > kSlowSendNs) r.fig.stall_ns += took;
    if (!s.stalled && took > kSlowSendNs) ++r.fig.stalls;
    r.pending_since_ns = 0;
    if (r.off == r.data.size()) r.finished = true;
  }

  void take(FanoutReplicaState& r, int res, FanoutCounts& c) {
    Send& s = sends_[&r];
    --inflight_;
    ++r.io->uring.cqes;
    if (s.cancelling) {
      r.fig.stall_ns += monotonic_ns() - r.pending_since_ns;
      return drop_replica(r, fmt::format("event-loop (uring): its send took nothing for {:.1f} s "
                                         "(--timeout); the other replicas waited for it",
                                         static_cast<double>(timeout_ns_) / 1e9));
    }
    if (res < 0) return drop_replica(r, fmt::format("event-loop (uring): its send failed: {}",
                                                    std::strerror(-res)));
    const auto n = static_cast<size_t>(res);
    r.last_progress_ns = monotonic_ns();
    if (WireCodec* codec = r.stream->wire_codec()) {
      codec->sent(n);
      if (codec->outbox().empty()) {
        r.io->bytes += r.chunk_end - r.off;
        r.off = r.chunk_end;
      }
    } else {
      if (n < r.chunk_end - r.off) ++r.io->short_writes;
      r.off += n;
      r.io->bytes += n;
    }
    if (next_bytes(r).empty()) return finish_chunk(r, s);
    ++r.fig.stalls;  // the socket took part of it: the rest waits for room
    s.stalled = true;
    submit_send(r, c);
  }

  void reap(FanoutCounts& c) {
    io_uring_cqe* cqe = nullptr;
    __kernel_timespec ts{0, kSliceNs};
    ++c.waits;
    const int rc = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
    if (rc >= 0 || rc == -ETIME) {
      unsigned head = 0, seen = 0;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        ++seen;
        if (auto* r = static_cast<FanoutReplicaState*>(io_uring_cqe_get_data(cqe)))
          take(*r, cqe->res, c);
      }
      io_uring_cq_advance(&ring_, seen);
    }
    cancel_the_silent();
  }

  // Replicas whose send has completed nothing for --timeout: cancel it (its completion, with
  // -ECANCELED or what it sent, drops the replica).
  void cancel_the_silent() {
    const int64_t now = monotonic_ns();
    for (auto& [r, s] : sends_) {
      if (s.cancelling || r->pending_since_ns == 0 || r->finished) continue;
      if (now - r->last_progress_ns <= timeout_ns_) continue;
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      if (!sqe) return;  // next time
      io_uring_prep_cancel64(sqe, reinterpret_cast<uint64_t>(r), 0);
      io_uring_sqe_set_data(sqe, nullptr);
      s.cancelling = true;
      ::shutdown(r->stream->fd(), SHUT_RDWR);  // a send the cancel cannot reach ends too
    }
  }

  io_uring ring_{};
  bool live_ = false;
  int64_t timeout_ns_;
  uint32_t inflight_ = 0;
  std::unordered_map<const FanoutReplicaState*, Send> sends_;
};

}  // namespace

Result<std::unique_ptr<FanoutShapeLoop>> make_uring_loop(double timeout_s, uint32_t replicas) {
  auto loop = std::make_unique<UringLoop>(timeout_s);
  if (auto st = loop->init(replicas); !st) return std::unexpected(st.error());
  return std::unique_ptr<FanoutShapeLoop>(std::move(loop));
}

}  // namespace iobench
