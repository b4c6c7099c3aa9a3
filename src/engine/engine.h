// I/O engines: move an exact byte count through a Stream with a given buffer size. One loop per
// engine, no policy, no knowledge of what the bytes mean.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "engine/io_buffer.h"
#include "engine/io_counters.h"
#include "engine/tuning.h"
#include "net/stream.h"
#include "util/result.h"

namespace iobench {

// The tuning both sides share, and this side's own limit.
struct EngineOptions : EngineTuning {
  double timeout_s = 30;  // no progress for this long is an error
};

// One side's engine options from the run's tuning: the sender-only parts (zero-copy, registered
// buffers) apply only where this side sends. Client and server both build theirs here.
EngineOptions side_engine_options(const EngineTuning& t, bool sends, double timeout_s);

// Receives each chunk in order; may reject it (a corrupt stream).
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual Status consume(std::span<const std::byte> chunk) = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string_view name() const = 0;
  // Called before the clock starts with the bytes send() will be given: the uring engine's
  // --fixed-buffers copies them into memory it registers with the ring (a read-only file
  // mapping, as the payload cache is, cannot be registered).
  virtual Status prepare_send(std::span<const std::byte> data) {
    (void)data;
    return {};
  }
  // Writes all of `data`, at most buf.size() per call (asked before every call).
  virtual Status send(Stream& s, std::span<const std::byte> data, IoBuffer& buf,
                      IoCounters& io) = 0;
  // Reads exactly `total` bytes into buf.span() (asked before every call), never past `total`
  // so that what follows on the stream (the control channel) stays unread.
  virtual Status recv(Stream& s, uint64_t total, IoBuffer& buf, ByteSink& sink, IoCounters& io) = 0;
};

Result<std::unique_ptr<Engine>> make_engine(EngineKind kind, const EngineOptions& o = {});

// The memory an engine and its stream take for one connection whose buffers are at most `buf`
// (the payload a sender streams is apart): a receiver's buffer, an io_uring receiver's provided
// ring (2 x --qd buffers, a power of two) or batch, a TLS codec's inbox and outbox. A server
// counts it against its budget before it makes the engine; `what` says how it adds up.
struct EngineMemory {
  uint64_t bytes = 0;
  std::string what;
};
EngineMemory engine_memory(EngineKind kind, const EngineOptions& o, uint64_t buf, bool sends,
                           bool tls);
// The entries of the uring receiver's provided-buffer ring for --qd (uring_recv.cc).
uint32_t uring_ring_entries(uint32_t queue_depth);

}  // namespace iobench
