// The io_uring engine (liburing): up to --qd linked sends or receives of one buffer each per
// io_uring_enter, so the syscall count falls by the queue depth; receives are one multishot
// request over a ring of provided buffers where the kernel allows. TLS runs in the memory-BIO
// model: the engine moves the records, the stream's WireCodec seals and opens them.
#pragma once

#include <memory>
#include <optional>

#include "engine/engine.h"
#include "util/result.h"

namespace iobench {

namespace uring {
struct BatchOptions;
}

class UringEngine final : public Engine {
 public:
  // Fails with the kernel's reason where io_uring is refused (ENOSYS, EPERM, io_uring_disabled).
  static Result<std::unique_ptr<Engine>> create(const EngineOptions& o);
  ~UringEngine() override;
  std::string_view name() const override { return "uring"; }
  Status prepare_send(std::span<const std::byte> data) override;
  Status send(Stream& s, std::span<const std::byte> data, IoBuffer& buf, IoCounters& io) override;
  Status recv(Stream& s, uint64_t total, IoBuffer& buf, ByteSink& sink, IoCounters& io) override;

 private:
  struct Ring;
  class Registered;
  UringEngine(std::unique_ptr<Ring> ring, const EngineOptions& o);
  Status send_plain(Stream& s, std::span<const std::byte> data, IoBuffer& buf, IoCounters& io,
                    const uring::BatchOptions& bo);
  Status send_sealed(Stream& s, WireCodec& codec, std::span<const std::byte> data, IoBuffer& buf,
                     IoCounters& io, const uring::BatchOptions& bo);
  Status recv_batched(Stream& s, uint64_t total, IoBuffer& buf, ByteSink& sink, IoCounters& io);
  // Empty when it ran; otherwise why multishot could not start (the caller falls back).
  Result<std::optional<std::string>> recv_multishot(Stream& s, uint64_t total, IoBuffer& buf,
                                                    ByteSink& sink, IoCounters& io);
  std::unique_ptr<Ring> ring_;
  std::unique_ptr<Registered> registered_;  // --fixed-buffers: the payload's registered copy
  EngineOptions opts_;
};

}  // namespace iobench
