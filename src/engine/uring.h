// The io_uring engine (liburing): up to --qd linked sends or receives of one buffer each per
// io_uring_enter, so the syscall count falls by the queue depth. Plain TCP only for now.
#pragma once

#include <memory>

#include "engine/engine.h"
#include "util/result.h"

namespace iobench {

class UringEngine final : public Engine {
 public:
  // Fails with the kernel's reason where io_uring is refused (ENOSYS, EPERM, io_uring_disabled).
  static Result<std::unique_ptr<Engine>> create(const EngineOptions& o);
  ~UringEngine() override;
  std::string_view name() const override { return "uring"; }
  Status send(Stream& s, std::span<const std::byte> data, IoBuffer& buf, IoCounters& io) override;
  Status recv(Stream& s, uint64_t total, IoBuffer& buf, ByteSink& sink, IoCounters& io) override;

 private:
  struct Ring;
  UringEngine(std::unique_ptr<Ring> ring, const EngineOptions& o);
  std::unique_ptr<Ring> ring_;
  EngineOptions opts_;
};

}  // namespace iobench
