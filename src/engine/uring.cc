// The io_uring engine: creation, the shared batch machinery and the send paths (plain TCP, from
// registered memory, and TLS through the stream's memory-BIO codec). Receives: uring_recv.cc.
#include "engine/uring.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/uring_ops.h"
#include "probe/probe.h"
#include "util/size.h"

namespace iobench {

// --fixed-buffers: a copy of the payload in anonymous memory, registered as buffer 0, so no
// send pins pages (SEND_ZC) or walks page tables for them.
class UringEngine::Registered {
 public:
  static Result<std::unique_ptr<Registered>> create(io_uring& ring,
                                                    std::span<const std::byte> data) {
    std::unique_ptr<Registered> r(new Registered(ring));
    r->size_ = data.size();
    void* mem = nullptr;
    if (posix_memalign(&mem, 4096, data.size()) != 0)
      return fail(fmt::format("--fixed-buffers: cannot allocate {} bytes", data.size()));
    r->mem_ = static_cast<std::byte*>(mem);
    std::memcpy(r->mem_, data.data(), data.size());
    iovec iov{r->mem_, data.size()};
    const int64_t t0 = monotonic_ns();
    const int rc = io_uring_register_buffers(&ring, &iov, 1);
    if (rc < 0)
      return fail(fmt::format("--fixed-buffers: registering {} bytes with the ring: {}",
                              data.size(), std::strerror(-rc)));
    r->register_ns_ = monotonic_ns() - t0;
    r->registered_ = true;
    return r;
  }
  ~Registered() {
    if (registered_) io_uring_unregister_buffers(&ring_);
    std::free(mem_);
  }
  std::span<const std::byte> bytes() const { return {mem_, size_}; }
  int64_t register_ns() const { return register_ns_; }

 private:
  explicit Registered(io_uring& ring) : ring_(ring) {}
  io_uring& ring_;
  std::byte* mem_ = nullptr;
  size_t size_ = 0;
  bool registered_ = false;
  int64_t register_ns_ = 0;
};

Result<std::unique_ptr<Engine>> UringEngine::create(const EngineOptions& o) {
  auto r = std::make_unique<Ring>();
  io_uring_params p{};
  // Completions: a multishot receive posts one per provided buffer (2 x --qd of them) and the
  // kernel ends the request when the completion queue is full, so room for all of them.
  p.flags |= IORING_SETUP_CQSIZE;
  p.cq_entries = std::bit_ceil(4 * std::max(o.queue_depth, 1u) + 8);
  if (o.sqpoll) {
    // The poller sleeps after 50 ms without submissions; liburing wakes it when it must.
    p.flags |= IORING_SETUP_SQPOLL;
    p.sq_thread_idle = 50;
  }
  // Room for a batch plus a cancel: the SQ needs at least queue_depth + 1 entries.
  const int rc = io_uring_queue_init_params(std::max(o.queue_depth, 1u) + 1, &r->ring, &p);
  if (rc < 0)
    return fail(fmt::format("--engine uring: io_uring_queue_init{}: {}",
                            o.sqpoll ? " with IORING_SETUP_SQPOLL" : "", std::strerror(-rc)));
  r->live = true;
  return std::unique_ptr<Engine>(new UringEngine(std::move(r), o));
}

UringEngine::UringEngine(std::unique_ptr<Ring> ring, const EngineOptions& o)
    : ring_(std::move(ring)), opts_(o) {}

UringEngine::~UringEngine() = default;

namespace uring {

// Not in liburing 2.3's headers (Linux 6.2): ask SEND_ZC's notification to say whether the
// kernel copied after all, and the bit that says so.
#ifndef IORING_SEND_ZC_REPORT_USAGE
#define IORING_SEND_ZC_REPORT_USAGE (1U << 3)
#endif
#ifndef IORING_NOTIF_USAGE_ZC_COPIED
#define IORING_NOTIF_USAGE_ZC_COPIED (1U << 31)
#endif

bool take_notification(const io_uring_cqe* cqe, ZcState* zc, IoCounters& io) {
  if (!zc || !(cqe->flags & IORING_CQE_F_NOTIF)) return false;
  ++io.zc.notifications;
  if (static_cast<uint32_t>(cqe->res) & IORING_NOTIF_USAGE_ZC_COPIED) ++io.zc.copied;
  if (zc->pending > 0) --zc->pending;
  return true;
}

__kernel_timespec timespec_of(double s) {
  __kernel_timespec ts{};
  ts.tv_sec = static_cast<int64_t>(s);
  ts.tv_nsec = static_cast<int64_t>((s - static_cast<double>(ts.tv_sec)) * 1e9);
  return ts;
}

namespace {
constexpr int64_t kWaitSliceNs = 250'000'000;  // a partial batch is seen within this
}  // namespace

ProgressClock::ProgressClock(double timeout_s)
    : timeout_ns_(static_cast<int64_t>(timeout_s * 1e9)), last_ns_(monotonic_ns()) {}

void ProgressClock::progressed() { last_ns_ = monotonic_ns(); }

bool ProgressClock::expired() const { return monotonic_ns() - last_ns_ >= timeout_ns_; }

__kernel_timespec ProgressClock::next_wait(unsigned want) const {
  int64_t left = std::max<int64_t>(timeout_ns_ - (monotonic_ns() - last_ns_), 1'000'000);
  if (want > 1) left = std::min(left, kWaitSliceNs);
  return {left / 1'000'000'000, left % 1'000'000'000};
}

namespace {

void prep(io_uring_sqe* sqe, Op op, int fd, const Segment& s, const BatchOptions& o) {
  const int wait = o.waitall ? MSG_WAITALL : 0;
  if (op == Op::kRecv) {
    io_uring_prep_recv(sqe, fd, s.data, s.len, wait);
    return;
  }
  if (o.zc) {
    if (o.fixed)
      io_uring_prep_send_zc_fixed(sqe, fd, s.data, s.len, wait | MSG_NOSIGNAL,
                                  IORING_SEND_ZC_REPORT_USAGE, 0);
    else
      io_uring_prep_send_zc(sqe, fd, s.data, s.len, wait | MSG_NOSIGNAL,
                            IORING_SEND_ZC_REPORT_USAGE);
    return;
  }
  io_uring_prep_send(sqe, fd, s.data, s.len, wait | MSG_NOSIGNAL);
  if (o.fixed) {
    sqe->ioprio |= IORING_RECVSEND_FIXED_BUF;
    sqe->buf_index = 0;
  }
}
}  // namespace

Result<size_t> run_batch(io_uring& ring, Op op, int fd, std::span<const Segment> segs,
                         const BatchOptions& o, IoCounters& io) {
  const auto n = static_cast<unsigned>(segs.size());
  for (unsigned i = 0; i < n; ++i) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (!sqe) return fail("io_uring: submission queue full");
    prep(sqe, op, fd, segs[i], o);
    sqe->user_data = i;
    if (i + 1 < n) sqe->flags |= IOSQE_IO_LINK;
  }
  io.uring.sqes += n;
  ++io.waits;  // io_uring_enter: submit the batch and wait for all of it
  ProgressClock clock(o.timeout_s);
  __kernel_timespec ts = clock.next_wait(n);
  std::vector<int> res(n, -ECANCELED);
  io_uring_cqe* cqe = nullptr;
  int rc;
  do {
    rc = io_uring_submit_and_wait_timeout(&ring, &cqe, n, &ts, nullptr);
  } while (rc == -EINTR);
  if (rc < 0 && rc != -ETIME)
    return fail(fmt::format("io_uring_submit_and_wait: {}", std::strerror(-rc)));
  for (unsigned got = 0; got < n;) {
    ts = clock.next_wait(1);
    rc = io_uring_wait_cqe_timeout(&ring, &cqe, &ts);
    if (rc == -EINTR) continue;
    if (rc == -ETIME && !clock.expired()) continue;
    if (rc == -ETIME) return fail("timed out (no progress)");
    if (rc < 0) return fail(fmt::format("io_uring_wait_cqe: {}", std::strerror(-rc)));
    clock.progressed();
    ++io.uring.cqes;
    if (take_notification(cqe, o.zc, io)) {
      io_uring_cqe_seen(&ring, cqe);
      continue;
    }
    res[cqe->user_data] = cqe->res;
    if (o.zc) {
      ++io.zc.sends;
      if (cqe->flags & IORING_CQE_F_MORE) ++o.zc->pending;
    }
    io_uring_cqe_seen(&ring, cqe);
    ++got;
  }
  size_t done = 0;
  for (unsigned i = 0; i < n; ++i) {
    ++io.calls;
    if (res[i] == -ECANCELED) break;  // a link broke before it: resubmitted by the caller
    if (res[i] == -EINVAL && o.fixed && !o.zc)
      return fail(
          "this kernel refuses registered buffers for IORING_OP_SEND (EINVAL); "
          "--fixed-buffers works with --zerocopy (SEND_ZC)");
    if (res[i] < 0) return fail(std::strerror(-res[i]));
    if (res[i] == 0 && op == Op::kRecv) return fail("peer closed the connection");
    done += static_cast<size_t>(res[i]);
    if (static_cast<size_t>(res[i]) < segs[i].len) {
      if (op == Op::kSend) ++io.short_writes;
      break;  // short: the rest of the batch was cancelled
    }
  }
  return done;
}

size_t split(std::byte* data, size_t len, size_t piece, size_t max, Segment* out) {
  size_t n = 0;
  for (size_t off = 0; off < len && n < max; off += piece)
    out[n++] = {data + off, std::min(piece, len - off)};
  return n;
}

}  // namespace uring

using uring::BatchOptions;
using uring::Op;
using uring::Segment;

Status UringEngine::prepare_send(std::span<const std::byte> data) {
  registered_.reset();
  if (!opts_.fixed_buffers) return {};
  auto r = Registered::create(ring_->ring, data);
  if (!r) return std::unexpected(r.error());
  registered_ = std::move(*r);
  return {};
}

Status UringEngine::send(Stream& s, std::span<const std::byte> data, IoBuffer& buf,
                         IoCounters& io) {
  uring::ZcState zc_state;
  BatchOptions bo;
  bo.zc = opts_.zerocopy ? &zc_state : nullptr;
  bo.timeout_s = opts_.timeout_s;
  Status st;
  if (WireCodec* codec = s.wire_codec()) {
    io.path = "send: TLS records sealed in memory, sent by io_uring";
    st = send_sealed(s, *codec, data, buf, io, bo);
  } else if (s.proto() != Proto::kTcp) {
    return fail("--engine uring over TLS needs the memory-BIO model (--tls-io bio)");
  } else {
    if (opts_.fixed_buffers) {
      // A pass over a --source-window span sends a prefix of what was registered.
      if (!registered_ || registered_->bytes().size() < data.size())
        return fail("--fixed-buffers: the payload was not registered before the send");
      data = registered_->bytes().first(data.size());  // the same bytes, in registered memory
      bo.fixed = true;
      io.path = fmt::format(
          "send: from a registered copy of the payload ({}, registered in {:.1f} ms before the "
          "clock)",
          format_size(data.size()), static_cast<double>(registered_->register_ns()) / 1e6);
    }
    st = send_plain(s, data, buf, io, bo);
  }
  if (!st) return st;
  // The payload's pages are the sender's again only once every notification is in.
  const __kernel_timespec ts = uring::timespec_of(opts_.timeout_s);
  while (bo.zc && zc_state.pending > 0) {
    io_uring_cqe* cqe = nullptr;
    auto wait_ts = ts;
    const int rc = io_uring_wait_cqe_timeout(&ring_->ring, &cqe, &wait_ts);
    if (rc == -EINTR) continue;
    if (rc < 0)
      return fail(fmt::format("zerocopy: {} SEND_ZC notifications missing: {}", zc_state.pending,
                              std::strerror(-rc)));
    ++io.uring.cqes;
    uring::take_notification(cqe, bo.zc, io);
    io_uring_cqe_seen(&ring_->ring, cqe);
  }
  return {};
}

Status UringEngine::send_plain(Stream& s, std::span<const std::byte> data, IoBuffer& buf,
                               IoCounters& io, const BatchOptions& bo) {
  std::vector<Segment> segs(opts_.queue_depth);
  size_t off = 0;
  while (off < data.size()) {
    const size_t n = uring::split(const_cast<std::byte*>(data.data()) + off, data.size() - off,
                                  static_cast<size_t>(buf.size()), segs.size(), segs.data());
    auto done = uring::run_batch(ring_->ring, Op::kSend, s.fd(), std::span(segs).first(n), bo, io);
    if (!done)
      return fail(fmt::format("write failed after {} of {} bytes: {}", off, data.size(),
                              done.error().message));
    off += *done;
    io.bytes += *done;
  }
  return {};
}

// TLS: up to --qd buffers are sealed into records in the codec's outbox, then its bytes leave
// as --qd linked sends; what a short send leaves goes first in the next batch.
Status UringEngine::send_sealed(Stream& s, WireCodec& codec, std::span<const std::byte> data,
                                IoBuffer& buf, IoCounters& io, const BatchOptions& bo) {
  std::vector<Segment> segs(opts_.queue_depth);
  size_t off = 0;           // plaintext sealed
  size_t unsent_plain = 0;  // of which the records are not all on the wire yet
  while (off < data.size() || !codec.outbox().empty()) {
    size_t sealed = 0;
    for (; sealed < opts_.queue_depth && off < data.size(); ++sealed) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), data.size() - off));
      if (auto st = codec.seal(data.subspan(off, want)); !st)
        return fail(fmt::format("write failed after {} of {} bytes: {}", io.bytes, data.size(),
                                st.error().message));
      off += want;
      unsent_plain += want;
    }
    const std::span<const std::byte> wire = codec.outbox();
    const size_t pieces = std::max<size_t>(sealed, 1);
    const size_t piece = (wire.size() + pieces - 1) / pieces;
    const size_t n = uring::split(const_cast<std::byte*>(wire.data()), wire.size(), piece,
                                  segs.size(), segs.data());
    auto done = uring::run_batch(ring_->ring, Op::kSend, s.fd(), std::span(segs).first(n), bo, io);
    if (!done)
      return fail(fmt::format("write failed after {} of {} bytes: {}", io.bytes, data.size(),
                              done.error().message));
    codec.sent(*done);
    if (codec.outbox().empty()) {
      io.bytes += unsent_plain;
      unsent_plain = 0;
    }
  }
  return {};
}

}  // namespace iobench
