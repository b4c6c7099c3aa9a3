#include <fmt/format.h>

#include "engine/blocking.h"
#include "engine/epoll.h"
#include "engine/uring.h"

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

}  // namespace iobench
