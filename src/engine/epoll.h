// The epoll engine: non-blocking socket, one readiness wait whenever a call would block, as an
// event loop (Valkey's ae) moves a replication stream.
#pragma once

#include "engine/engine.h"
#include "util/result.h"

namespace iobench {

class EpollEngine final : public Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const EngineOptions& o);
  ~EpollEngine() override;
  std::string_view name() const override { return "epoll"; }
  Status send(Stream& s, std::span<const std::byte> data, IoBuffer& buf, IoCounters& io) override;
  Status recv(Stream& s, uint64_t total, IoBuffer& buf, ByteSink& sink, IoCounters& io) override;

 private:
  EpollEngine(int epfd, const EngineOptions& o) : epfd_(epfd), opts_(o) {}
  // Registers the stream's descriptor for `events`, in the engine's trigger mode.
  Status watch(Stream& s, uint32_t events);
  void unwatch(Stream& s);
  // One epoll_wait; an error when nothing is ready within the timeout.
  Status wait(IoCounters& io, const char* what, uint64_t done, uint64_t total);

  int epfd_;
  EngineOptions opts_;
};

}  // namespace iobench
