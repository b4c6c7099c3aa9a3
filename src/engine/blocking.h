// The blocking engine: plain read()/write() loops, one call per buffer.
#pragma once

#include "engine/engine.h"

namespace iobench {

class BlockingEngine final : public Engine {
 public:
  explicit BlockingEngine(const EngineOptions& o = {}) : opts_(o) {}
  std::string_view name() const override { return "blocking"; }
  Status send(Stream& s, std::span<const std::byte> data, IoBuffer& buf, IoCounters& io) override;
  Status recv(Stream& s, uint64_t total, IoBuffer& buf, ByteSink& sink, IoCounters& io) override;

 private:
  EngineOptions opts_;
};

}  // namespace iobench
