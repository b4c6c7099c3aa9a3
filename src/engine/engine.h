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
#include "engine/tuning.h"
#include "net/stream.h"
#include "util/result.h"

namespace iobench {

// What the engine itself did; kept current while it runs, so a failure still reports progress.
struct IoCounters {
  uint64_t calls = 0;         // read or write calls issued on the Stream
  uint64_t bytes = 0;         // bytes those calls moved
  uint64_t short_writes = 0;  // writes the kernel accepted only in part
  uint64_t waits = 0;         // readiness waits (epoll_wait)
  uint64_t would_block = 0;   // calls that found nothing to do (EAGAIN)
  // --zerocopy (sender): sends issued zero-copy, completion notifications read, and sends the
  // kernel reported it copied after all.
  uint64_t zc_sends = 0;
  uint64_t zc_notifications = 0;
  uint64_t zc_copied = 0;
  // uring: submission entries submitted, completion entries reaped.
  uint64_t sqes = 0;
  uint64_t cqes = 0;
  // How the engine ran where it had a choice, e.g. "recv: multishot, provided ring 8 x 16K".
  std::string path;
};

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

}  // namespace iobench
