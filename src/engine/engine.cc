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

Result<std::unique_ptr<Engine>> make_engine(std::string_view name, const EngineOptions& o) {
  if (name == "blocking") return std::make_unique<BlockingEngine>(o);
  if (name == "epoll") return EpollEngine::create(o);
  if (name == "uring") return UringEngine::create(o);
  return fail(fmt::format("unknown engine '{}' (available: blocking, epoll, uring)", name));
}

}  // namespace iobench
