#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "engine/blocking.h"
#include "engine/epoll.h"
#include "engine/uring.h"
#include "util/size.h"

namespace iobench {

EngineOptions side_engine_options(const EngineTuning& t, bool sends, double timeout_s) {
  EngineOptions eo;
  static_cast<EngineTuning&>(eo) = t;
  eo.zerocopy = t.zerocopy && sends;
  eo.fixed_buffers = t.fixed_buffers && sends;
  eo.timeout_s = timeout_s;
  return eo;
}

Result<std::unique_ptr<Engine>> make_engine(EngineKind kind, const EngineOptions& o) {
  switch (kind) {
    case EngineKind::kBlocking:
      return std::make_unique<BlockingEngine>(o);
    case EngineKind::kEpoll:
      return EpollEngine::create(o);
    case EngineKind::kUring:
      return UringEngine::create(o);
  }
  return fail("unknown engine");
}

uint32_t uring_ring_entries(uint32_t queue_depth) {
  // A wait asks for at most --qd completions; while they are taken the kernel still needs
  // buffers to fill, so twice as many (a power of two: the ring's index is masked).
  return std::bit_ceil(2 * std::clamp(queue_depth, 1u, 16384u));
}

EngineMemory engine_memory(EngineKind kind, const EngineOptions& o, uint64_t buf, bool sends,
                           bool tls) {
  EngineMemory m;
  const uint64_t qd = std::max(o.queue_depth, 1u);
  const bool uring = kind == EngineKind::kUring;
  if (!sends) {
    m.bytes += buf;  // the receive buffer (a sender's is a chunk size over the payload)
    m.what = fmt::format("a receive buffer of {}", format_size(buf));
  }
  if (uring && !sends) {
    // Multishot's provided ring, or (its fallback, never both at once) qd buffers of a batch.
    const uint32_t entries = uring_ring_entries(o.queue_depth);
    const uint64_t ring = uint64_t{entries} * buf;
    m.bytes += ring;
    m.what += fmt::format(", an io_uring provided ring of {} x {} (2 x --qd {}): {}", entries,
                          format_size(buf), qd, format_bytes_human(ring));
  }
  if (tls) {
    // The bio model's inbox and outbox: one call's worth each, --qd calls' under uring, plus a
    // record of slack (16 KiB and its header and tag).
    constexpr uint64_t kRecordSlack = 17 * kKiB;
    const uint64_t per_call = (uring ? qd : 1) * buf + kRecordSlack;
    m.bytes += 2 * per_call;
    m.what += fmt::format("{}TLS buffers of 2 x {}", m.what.empty() ? "" : ", ",
                          format_bytes_human(per_call));
  }
  if (m.what.empty()) m.what = "no buffers of its own";
  return m;
}

}  // namespace iobench
