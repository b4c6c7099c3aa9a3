#include <fmt/format.h>

#include "engine/blocking.h"
#include "engine/epoll.h"
#include "engine/uring.h"

namespace iobench {

Result<std::unique_ptr<Engine>> make_engine(std::string_view name, const EngineOptions& o) {
  if (name == "blocking") return std::make_unique<BlockingEngine>(o);
  if (name == "epoll") return EpollEngine::create(o);
  if (name == "uring") return UringEngine::create(o);
  return fail(fmt::format("unknown engine '{}' (available: blocking, epoll, uring)", name));
}

}  // namespace iobench
