// What a payload is made of; shared by the sender (to build it) and the payload command.
#pragma once

#include <cstdint>
#include <string>

#include "util/size.h"

namespace iobench {

inline constexpr uint64_t kMinBytes = 64;
// The payload is held in memory on the sending side.
inline constexpr uint64_t kMaxBytes = 4 * kGiB;

struct PayloadSpec {
  uint64_t bytes = 100 * kMiB;
  uint64_t seed = 1;
  int zstd_level = 3;
  std::string file;       // empty: generated replication stream
  std::string cache_dir;  // empty: $XDG_CACHE_HOME/iobench or ~/.cache/iobench
  // The cache directory's bound: least recently used payloads go first; a larger payload is
  // built but not cached.
  uint64_t cache_max = uint64_t{6} << 30;
};

}  // namespace iobench
