// The io_uring engine's receive paths. Multishot (default where the kernel allows): one
// request, re-armed only when the kernel ends it, fills buffers the engine provides in a ring;
// completion order is data order. Batched: --qd linked receives per io_uring_enter. TLS: the
// engine receives records into the stream's codec, which opens them.
#include <fmt/format.h>
#include <sys/socket.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/uring.h"
#include "engine/uring_ops.h"
#include "util/test_throw.h"
#include "util/size.h"

namespace iobench {

namespace uring {

Result<ProvidedRing> ProvidedRing::create(io_uring& ring, unsigned entries, size_t size, int bgid) {
  test_throw_bad_alloc("ring-alloc");
  ProvidedRing r;
  r.ring_ = &ring;
  r.entries_ = entries;
  r.size_ = size;
  r.bgid_ = bgid;
  void* br = nullptr;
  // The kernel maps the ring's entries as given: page-aligned memory it can read.
  if (posix_memalign(&br, 4096, entries * sizeof(io_uring_buf)) != 0)
    return fail("provided-buffer ring: out of memory");
  std::memset(br, 0, entries * sizeof(io_uring_buf));
  r.br_ = static_cast<io_uring_buf_ring*>(br);
  void* mem = nullptr;  // posix_memalign: aligned_alloc wants a size that is a page multiple
  if (posix_memalign(&mem, 4096, entries * size) != 0)
    return fail("provided buffers: out of memory");
  r.mem_ = static_cast<std::byte*>(mem);
  std::memset(r.mem_, 0, entries * size);  // touched now, not on the first receive
  io_uring_buf_reg reg{};
  reg.ring_addr = reinterpret_cast<uint64_t>(br);
  reg.ring_entries = entries;
  reg.bgid = static_cast<uint16_t>(bgid);
  const int rc = io_uring_register_buf_ring(&ring, &reg, 0);
  if (rc < 0) {
    r.ring_ = nullptr;  // not registered: release() only frees
    return fail(fmt::format("registering a provided-buffer ring: {}", std::strerror(-rc)));
  }
  io_uring_buf_ring_init(r.br_);
  const int mask = io_uring_buf_ring_mask(entries);
  for (unsigned i = 0; i < entries; ++i)
    io_uring_buf_ring_add(r.br_, r.buffer(i), static_cast<unsigned>(size),
                          static_cast<unsigned short>(i), mask, static_cast<int>(i));
  io_uring_buf_ring_advance(r.br_, static_cast<int>(entries));
  return r;
}

ProvidedRing::ProvidedRing(ProvidedRing&& o) noexcept { *this = std::move(o); }

ProvidedRing& ProvidedRing::operator=(ProvidedRing&& o) noexcept {
  if (this != &o) {
    release();
    ring_ = std::exchange(o.ring_, nullptr);
    br_ = std::exchange(o.br_, nullptr);
    mem_ = std::exchange(o.mem_, nullptr);
    entries_ = o.entries_;
    size_ = o.size_;
    bgid_ = o.bgid_;
  }
  return *this;
}

ProvidedRing::~ProvidedRing() { release(); }

void ProvidedRing::release() {
  if (ring_ && br_) io_uring_unregister_buf_ring(ring_, bgid_);
  std::free(br_);
  std::free(mem_);
  ring_ = nullptr;
  br_ = nullptr;
  mem_ = nullptr;
}

void ProvidedRing::recycle(unsigned bid) {
  io_uring_buf_ring_add(br_, buffer(bid), static_cast<unsigned>(size_),
                        static_cast<unsigned short>(bid), io_uring_buf_ring_mask(entries_), 0);
  io_uring_buf_ring_advance(br_, 1);
}

}  // namespace uring

using uring::BatchOptions;
using uring::Op;
using uring::Segment;

namespace {

// Ciphertext OpenSSL may hold inside (a partial record, or a read-ahead buffer) beyond what
// the codec's inbox shows: a generous bound on its read buffer (16K record + overhead).
constexpr uint64_t kHeldByTls = uint64_t{64} << 10;

// Wire bytes certain to arrive still: each plaintext byte needs at least one, minus what the
// inbox and OpenSSL may already hold. Receives that ask no more than this can wait for all.
uint64_t wire_bytes_certain(const WireCodec* codec, uint64_t remaining) {
  if (!codec) return remaining;
  const uint64_t held = codec->inbox_pending() + kHeldByTls;
  return remaining > held ? remaining - held : 0;
}

// Opens every complete record in the inbox into the receive buffer and hands the bytes on.
Status open_records(Stream& s, WireCodec& codec, uint64_t total, uint64_t& got, IoBuffer& buf,
                    ByteSink& sink, IoCounters& io) {
  while (got < total) {
    const std::span<std::byte> mem = buf.span();
    const size_t want = static_cast<size_t>(std::min<uint64_t>(mem.size(), total - got));
    IoResult r = codec.open(mem.first(want));
    if (r.state == IoResult::State::kWouldBlock) break;
    if (!r.ok())
      return fail(fmt::format("read failed after {} of {} bytes: {}", got, total, s.describe(r)));
    got += r.bytes;
    io.bytes += r.bytes;
    if (auto st = sink.consume(mem.first(r.bytes)); !st) return st;
  }
  // OpenSSL may have answered something (an alert, a key update): it goes out now.
  if (!codec.outbox().empty()) {
    IoResult f = s.flush();
    if (!f.ok()) return fail(fmt::format("TLS reply during receive: {}", s.describe(f)));
  }
  return {};
}

constexpr uint64_t kRecvTag = 1ULL << 62;
constexpr uint64_t kCancelTag = kRecvTag + 1;
constexpr int kBufferGroup = 0;

// One multishot receive over a provided-buffer ring, and where its bytes go: the sink (plain
// TCP, never past `total`) or the codec's inbox (TLS: bytes past the data phase stay there
// for the control channel that follows).
class Multishot {
 public:
  Multishot(io_uring& ring, int fd, WireCodec* codec, uint64_t total, ByteSink& sink,
            IoCounters& io, double timeout_s)
      : ring_(ring),
        fd_(fd),
        codec_(codec),
        total_(total),
        sink_(sink),
        io_(io),
        clock_(timeout_s) {}

  void use(uring::ProvidedRing pr) { pr_ = std::move(pr); }
  const uring::ProvidedRing& ring() const { return pr_; }
  bool armed() const { return armed_; }
  uint64_t got() const { return got_; }

  void arm() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    io_uring_prep_recv_multishot(sqe, fd_, nullptr, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = static_cast<uint16_t>(pr_.bgid());
    sqe->user_data = kRecvTag;
    ++io_.uring.sqes;
    armed_ = true;
  }

  // Submits what is queued, waits for `want` completions and takes all that are there.
  // Returns the first completion's error when the kernel refused the request outright.
  Result<int> wait_and_take(unsigned want) {
    io_uring_cqe* cqe = nullptr;
    for (;;) {
      __kernel_timespec ts = clock_.next_wait(want);
      ++io_.waits;
      int rc;
      do {
        rc = io_uring_submit_and_wait_timeout(&ring_, &cqe, want, &ts, nullptr);
      } while (rc == -EINTR);
      if (rc < 0 && rc != -ETIME) {
        ring_failed_ = true;
        return fail(fmt::format("io_uring_submit_and_wait: {}", std::strerror(-rc)));
      }
      if (io_uring_cq_ready(&ring_) > 0) break;
      if (clock_.expired()) {
        ring_failed_ = true;
        return fail("timed out (no progress)");
      }
    }
    clock_.progressed();
    int refused = 0;
    Status st;
    // Each completion is marked seen as soon as its buffer is back in the ring: the kernel goes
    // on posting while we work, and a full completion queue would end the request.
    while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
      const uint64_t tag = cqe->user_data;
      const int res = cqe->res;
      const uint32_t flags = cqe->flags;
      io_uring_cqe_seen(&ring_, cqe);
      ++io_.uring.cqes;
      if (tag == kCancelTag) {
        cancel_done_ = true;
        continue;
      }
      if (!(flags & IORING_CQE_F_MORE)) armed_ = false;
      if (res > 0) {
        const unsigned bid = flags >> IORING_CQE_BUFFER_SHIFT;
        if (st) st = deliver({pr_.buffer(bid), static_cast<size_t>(res)});
        pr_.recycle(bid);
        continue;
      }
      if (!st) continue;  // after an error only the ring's state is kept
      if (res == 0) {
        if (!stopping_) st = fail("peer closed the connection");
      } else if (stopping_ && res == -ECANCELED) {
        // the end we asked for
      } else if (res == -ENOBUFS) {
        ++rearms_;  // every buffer was full before we took one back: arm again
      } else if (!delivered_any_ && (res == -EINVAL || res == -EOPNOTSUPP)) {
        refused = res;
      } else {
        st = fail(std::strerror(-res));
      }
    }
    if (!st) return std::unexpected(st.error());
    return refused;
  }

  // Cancels the request (if the kernel has not ended it) and takes its last completions, so
  // the ring is clean for whatever runs on it next.
  Status stop() {
    if (!armed_) return {};
    stopping_ = true;
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    io_uring_prep_cancel64(sqe, kRecvTag, 0);
    sqe->user_data = kCancelTag;
    ++io_.uring.sqes;
    cancel_done_ = false;
    Status st;
    while ((armed_ || !cancel_done_) && !ring_failed_) {
      auto r = wait_and_take(1);
      if (!r && st) st = std::unexpected(r.error());
    }
    stopping_ = false;
    return st;
  }

  unsigned rearms() const { return rearms_; }

 private:
  Status deliver(std::span<const std::byte> bytes) {
    delivered_any_ = true;
    ++io_.calls;
    if (codec_) {
      std::span<std::byte> space = codec_->inbox_space(bytes.size());
      std::memcpy(space.data(), bytes.data(), bytes.size());
      codec_->received(bytes.size());
      return {};
    }
    if (got_ + bytes.size() > total_)
      return fail(fmt::format("{} bytes arrived past the end of the data phase",
                              got_ + bytes.size() - total_));
    got_ += bytes.size();
    io_.bytes += bytes.size();
    return sink_.consume(bytes);
  }

  io_uring& ring_;
  int fd_;
  WireCodec* codec_;
  uint64_t total_;
  ByteSink& sink_;
  IoCounters& io_;
  uring::ProgressClock clock_;
  uring::ProvidedRing pr_;
  bool armed_ = false;
  bool cancel_done_ = true;
  bool stopping_ = false;
  bool delivered_any_ = false;
  bool ring_failed_ = false;  // submitting or waiting failed: stop() cannot wait any longer
  uint64_t got_ = 0;          // plain TCP: bytes delivered to the sink
  unsigned rearms_ = 0;
};

}  // namespace

Status UringEngine::recv(Stream& s, uint64_t total, IoBuffer& buf, ByteSink& sink, IoCounters& io) {
  if (!s.wire_codec() && s.proto() != Proto::kTcp)
    return fail("--engine uring over TLS needs the memory-BIO model (--tls-io bio)");
  std::string why_not;
  if (opts_.uring_recv != UringRecv::kBatch) {
    auto ran = recv_multishot(s, total, buf, sink, io);
    if (!ran) return std::unexpected(ran.error());
    const std::optional<std::string>& refused = *ran;
    if (!refused) return {};
    if (opts_.uring_recv == UringRecv::kMultishot)
      return fail(fmt::format("--uring-recv multishot: {}", *refused));
    why_not = fmt::format(" (multishot unavailable: {})", *refused);
  }
  io.path = fmt::format("recv: batched, {} linked receives per io_uring_enter{}", opts_.queue_depth,
                        why_not);
  return recv_batched(s, total, buf, sink, io);
}

Result<std::optional<std::string>> UringEngine::recv_multishot(Stream& s, uint64_t total,
                                                               IoBuffer& buf, ByteSink& sink,
                                                               IoCounters& io) {
  io_uring& ring = ring_->ring;
  WireCodec* codec = s.wire_codec();
  // Twice --qd buffers (uring_ring_entries): with only --qd the ring would run dry and end the
  // request (ENOBUFS) at every wait. engine_memory counts them.
  const unsigned per_wait = std::clamp(opts_.queue_depth, 1u, 16384u);
  const unsigned entries = uring_ring_entries(opts_.queue_depth);
  auto first =
      uring::ProvidedRing::create(ring, entries, static_cast<size_t>(buf.size()), kBufferGroup);
  if (!first) return std::optional<std::string>(first.error().message);
  Multishot ms(ring, s.fd(), codec, total, sink, io, opts_.timeout_s);
  ms.use(std::move(*first));
  unsigned registrations = 1;
  uint64_t got = 0;  // plaintext handed to the sink
  ms.arm();
  Status st;
  while (got < total) {
    // Adaptive mode: a new size takes a new ring; the request on the old one ends first.
    const uint64_t size = buf.size();
    if (size != ms.ring().size()) {
      if (st = ms.stop(); !st) break;
      // The old request's last completions may have brought the data phase's last records:
      // they are opened before the next wait, which would otherwise wait for bytes already here.
      if (codec) {
        if (st = open_records(s, *codec, total, got, buf, sink, io); !st) break;
      } else {
        got = ms.got();
      }
      if (got >= total) break;
      ms.use({});  // the buffer group is free again only once the old ring is unregistered
      auto next =
          uring::ProvidedRing::create(ring, entries, static_cast<size_t>(size), kBufferGroup);
      if (!next) {
        st = std::unexpected(next.error());
        break;
      }
      ms.use(std::move(*next));
      ++registrations;
      ms.arm();
    }
    // Each completion carries at most one buffer: waiting for as many as the bytes certain to
    // come can fill never waits for one that will not come.
    const uint64_t certain = wire_bytes_certain(codec, total - got);
    const auto want =
        static_cast<unsigned>(std::clamp<uint64_t>((certain + size - 1) / size, 1, per_wait));
    auto refused = ms.wait_and_take(want);
    if (!refused) {
      st = std::unexpected(refused.error());
      break;
    }
    if (*refused != 0)
      return std::optional<std::string>(
          fmt::format("IORING_RECV_MULTISHOT refused: {}", std::strerror(-*refused)));
    if (codec) {
      if (st = open_records(s, *codec, total, got, buf, sink, io); !st) break;
    } else {
      got = ms.got();
    }
    if (!ms.armed() && got < total) ms.arm();
  }
  if (Status stopped = ms.stop(); st && !stopped) st = stopped;
  if (!st)
    return fail(
        fmt::format("read failed after {} of {} bytes: {}", got, total, st.error().message));
  io.path =
      fmt::format("recv: multishot, provided ring {} x {}", entries, format_size(ms.ring().size()));
  if (registrations > 1) io.path += fmt::format(", {} rings (resized)", registrations);
  if (ms.rearms() > 0) io.path += fmt::format(", re-armed {}x (ring ran dry)", ms.rearms());
  return std::optional<std::string>();
}

Status UringEngine::recv_batched(Stream& s, uint64_t total, IoBuffer& buf, ByteSink& sink,
                                 IoCounters& io) {
  WireCodec* codec = s.wire_codec();
  std::vector<Segment> segs(opts_.queue_depth);
  // Plain TCP: one buffer per request in flight, so a batch of `qd` receives fills qd buffers
  // in order; the slots follow the buffer's size between batches (adaptive mode).
  std::vector<std::byte> slots;
  BatchOptions bo;
  bo.timeout_s = opts_.timeout_s;
  uint64_t got = 0;
  while (got < total) {
    if (codec) {
      if (auto st = open_records(s, *codec, total, got, buf, sink, io); !st) return st;
      if (got == total) break;
    }
    const auto slot = static_cast<size_t>(buf.size());
    const uint64_t certain = wire_bytes_certain(codec, total - got);
    std::byte* base;
    size_t want;
    bo.waitall = certain >= slot || !codec;
    if (!codec) {
      if (slots.size() != slot * opts_.queue_depth) {
        slots = {};
        slots.resize(slot * opts_.queue_depth);
      }
      base = slots.data();
      want = static_cast<size_t>(std::min<uint64_t>(slots.size(), total - got));
    } else {
      // Whole buffers that surely fill; near the end, one receive of whatever comes.
      want = bo.waitall ? static_cast<size_t>(
                              std::min<uint64_t>(slot * opts_.queue_depth, certain / slot * slot))
                        : slot;
      base = codec->inbox_space(want).data();
    }
    const size_t n = uring::split(base, want, slot, segs.size(), segs.data());
    auto done = uring::run_batch(ring_->ring, Op::kRecv, s.fd(), std::span(segs).first(n), bo, io);
    if (!done)
      return fail(
          fmt::format("read failed after {} of {} bytes: {}", got, total, done.error().message));
    if (codec) {
      codec->received(*done);
      continue;
    }
    if (auto st = sink.consume(std::span(slots).first(*done)); !st) return st;
    got += *done;
    io.bytes += *done;
  }
  return {};
}

}  // namespace iobench
