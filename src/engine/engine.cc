#include <fmt/format.h>

#include "engine/blocking.h"

namespace iobench {

Result<std::unique_ptr<Engine>> make_engine(std::string_view name) {
  if (name == "blocking") return std::make_unique<BlockingEngine>();
  return fail(fmt::format("unknown engine '{}' (available: blocking)", name));
}

}  // namespace iobench
