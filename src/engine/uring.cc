#include "engine/uring.h"

#include <fmt/format.h>
#include <liburing.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace iobench {

struct UringEngine::Ring {
  io_uring ring{};
  bool live = false;  // io_uring_queue_init succeeded
  ~Ring() {
    if (live) io_uring_queue_exit(&ring);
  }
};

Result<std::unique_ptr<Engine>> UringEngine::create(const EngineOptions& o) {
  auto r = std::make_unique<Ring>();
  io_uring_params p{};
  if (o.sqpoll) {
    // The poller sleeps after 50 ms without submissions; liburing wakes it when it must.
    p.flags |= IORING_SETUP_SQPOLL;
    p.sq_thread_idle = 50;
  }
  const int rc = io_uring_queue_init_params(std::max(o.queue_depth, 1u), &r->ring, &p);
  if (rc < 0)
    return fail(fmt::format("--engine uring: io_uring_queue_init{}: {}",
                            o.sqpoll ? " with IORING_SETUP_SQPOLL" : "", std::strerror(-rc)));
  r->live = true;
  return std::unique_ptr<Engine>(new UringEngine(std::move(r), o));
}

UringEngine::UringEngine(std::unique_ptr<Ring> ring, const EngineOptions& o)
    : ring_(std::move(ring)), opts_(o) {}

UringEngine::~UringEngine() = default;

namespace {

// Not in liburing 2.3's headers (Linux 6.2): ask SEND_ZC's notification to say whether the
// kernel copied after all, and the bit that says so.
#ifndef IORING_SEND_ZC_REPORT_USAGE
#define IORING_SEND_ZC_REPORT_USAGE (1U << 3)
#endif
#ifndef IORING_NOTIF_USAGE_ZC_COPIED
#define IORING_NOTIF_USAGE_ZC_COPIED (1U << 31)
#endif

// --zerocopy: each SEND_ZC completes twice — its result (IORING_CQE_F_MORE: a notification
// follows) and, once the kernel has released the pages, a notification (IORING_CQE_F_NOTIF).
struct ZcState {
  uint64_t pending = 0;  // notifications still to come
};

// Accounts a CQE; true when it is a SEND_ZC notification rather than a request's result.
bool take_notification(const io_uring_cqe* cqe, ZcState* zc, IoCounters& io) {
  if (!zc || !(cqe->flags & IORING_CQE_F_NOTIF)) return false;
  ++io.zc_notifications;
  if (static_cast<uint32_t>(cqe->res) & IORING_NOTIF_USAGE_ZC_COPIED) ++io.zc_copied;
  if (zc->pending > 0) --zc->pending;
  return true;
}

// One batch: up to `depth` requests of at most `buf` bytes each, linked so they run in order,
// each with MSG_WAITALL so the kernel finishes a whole buffer before the next starts. Returns
// the bytes done by the batch's in-order prefix; an error result ends the transfer.
Result<size_t> run_batch(io_uring& ring, bool sending, int fd, std::byte* base, size_t len,
                         size_t buf, unsigned depth, IoCounters& io, ZcState* zc = nullptr) {
  unsigned n = 0;
  for (size_t off = 0; off < len && n < depth; off += buf, ++n) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    const size_t chunk = std::min(buf, len - off);
    if (sending && zc)
      io_uring_prep_send_zc(sqe, fd, base + off, chunk, MSG_WAITALL | MSG_NOSIGNAL,
                            IORING_SEND_ZC_REPORT_USAGE);
    else if (sending)
      io_uring_prep_send(sqe, fd, base + off, chunk, MSG_WAITALL | MSG_NOSIGNAL);
    else
      io_uring_prep_recv(sqe, fd, base + off, chunk, MSG_WAITALL);
    sqe->user_data = n;
    if (off + chunk < len && n + 1 < depth) sqe->flags |= IOSQE_IO_LINK;
  }
  ++io.waits;  // io_uring_enter: submit the batch and wait for all of it
  int rc;
  do {
    rc = io_uring_submit_and_wait(&ring, n);
  } while (rc == -EINTR);
  if (rc < 0) return fail(fmt::format("io_uring_submit_and_wait: {}", std::strerror(-rc)));
  std::vector<int> res(n, -ECANCELED);
  for (unsigned got = 0; got < n;) {
    io_uring_cqe* cqe = nullptr;
    rc = io_uring_wait_cqe(&ring, &cqe);
    if (rc == -EINTR) continue;
    if (rc < 0) return fail(fmt::format("io_uring_wait_cqe: {}", std::strerror(-rc)));
    if (take_notification(cqe, zc, io)) {
      io_uring_cqe_seen(&ring, cqe);
      continue;
    }
    res[cqe->user_data] = cqe->res;
    if (zc) {
      ++io.zc_sends;
      if (cqe->flags & IORING_CQE_F_MORE) ++zc->pending;
    }
    io_uring_cqe_seen(&ring, cqe);
    ++got;
  }
  size_t done = 0;
  for (unsigned i = 0; i < n; ++i) {
    ++io.calls;
    const size_t chunk = std::min(buf, len - done);
    if (res[i] == -ECANCELED) break;  // a link broke before it: resubmitted by the caller
    if (res[i] < 0) return fail(std::strerror(-res[i]));
    if (res[i] == 0 && !sending) return fail("peer closed the connection");
    done += static_cast<size_t>(res[i]);
    if (static_cast<size_t>(res[i]) < chunk) {
      if (sending) ++io.short_writes;
      break;  // short: the rest of the batch was cancelled
    }
  }
  return done;
}

}  // namespace

Status UringEngine::send(Stream& s, std::span<const std::byte> data, IoBuffer& buf,
                         IoCounters& io) {
  if (s.kind() != "tcp") return fail("--engine uring carries plain TCP only in this build");
  ZcState zc_state;
  ZcState* zc = opts_.zerocopy ? &zc_state : nullptr;
  size_t off = 0;
  while (off < data.size()) {
    auto done =
        run_batch(ring_->ring, true, s.fd(), const_cast<std::byte*>(data.data()) + off,
                  data.size() - off, static_cast<size_t>(buf.size()), opts_.queue_depth, io, zc);
    if (!done)
      return fail(fmt::format("write failed after {} of {} bytes: {}", off, data.size(),
                              done.error().message));
    off += *done;
    io.bytes += *done;
  }
  // The payload's pages are the sender's again only once every notification is in.
  while (zc && zc->pending > 0) {
    io_uring_cqe* cqe = nullptr;
    __kernel_timespec ts{static_cast<int64_t>(opts_.timeout_s), 0};
    const int rc = io_uring_wait_cqe_timeout(&ring_->ring, &cqe, &ts);
    if (rc == -EINTR) continue;
    if (rc < 0)
      return fail(fmt::format("zerocopy: {} SEND_ZC notifications missing: {}", zc->pending,
                              std::strerror(-rc)));
    take_notification(cqe, zc, io);
    io_uring_cqe_seen(&ring_->ring, cqe);
  }
  return {};
}

Status UringEngine::recv(Stream& s, uint64_t total, IoBuffer& buf, ByteSink& sink, IoCounters& io) {
  if (s.kind() != "tcp") return fail("--engine uring carries plain TCP only in this build");
  // One buffer per request in flight, so a batch of `qd` receives fills qd buffers in order;
  // the slots follow the buffer's size between batches (adaptive mode).
  std::vector<std::byte> slots;
  uint64_t got = 0;
  while (got < total) {
    const auto slot = static_cast<size_t>(buf.size());
    if (slots.size() != slot * opts_.queue_depth) {
      slots = {};
      slots.resize(slot * opts_.queue_depth);
    }
    const size_t want = static_cast<size_t>(std::min<uint64_t>(slots.size(), total - got));
    auto done =
        run_batch(ring_->ring, false, s.fd(), slots.data(), want, slot, opts_.queue_depth, io);
    if (!done)
      return fail(
          fmt::format("read failed after {} of {} bytes: {}", got, total, done.error().message));
    if (auto st = sink.consume(std::span(slots).first(*done)); !st) return st;
    got += *done;
    io.bytes += *done;
  }
  return {};
}

}  // namespace iobench
