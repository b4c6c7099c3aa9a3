// What a payload is made of; shared by the sender (to build it) and the payload command.
#pragma once

#include <cstdint>
#include <string>

#include "util/fields.h"
#include "util/size.h"

namespace iobench {

inline constexpr uint64_t kMinBytes = 64;
// The payload is held in memory on the sending side.
inline constexpr uint64_t kMaxBytes = 4 * kGiB;
inline constexpr int kMinZstdLevel = 1, kMaxZstdLevel = 19;

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

// The payload cache's options, the same for the client, `iobench payload` and the server.
inline constexpr Field kCacheDirField{.name = "cache_dir",
                                      .flag = "--cache-dir",
                                      .help = "Payload cache (default ~/.cache/iobench)",
                                      .unreported = true,
                                      .value_name = "DIR"};
inline constexpr Field kCacheMaxField{
    .name = "cache_max",
    .flag = "--cache-max",
    .help = "Bound of the payload cache; least recently used payloads go first (default 6G)",
    .min = 0,
    .max = int64_t{1} << 50,
    .size = true,
    .unreported = true};

// What a run's payload is, described once: the client's and `iobench payload`'s flags and their
// bounds, the JSON options block and the CSV (a file and the cache are local: unreported).
template <typename Self, typename Visit>
  requires DescribesAs<Self, PayloadSpec>
void describe(Self& p, Visit&& visit) {
  visit(Field{.name = "bytes",
              .flag = "--bytes",
              .help = "Payload bytes to stream (default 100MiB; 100M, 1GiB, ...)",
              .min = kMinBytes,
              .max = kMaxBytes,
              .size = true,
              .short_flag = "-n"},
        p.bytes);
  visit(Field{.name = "seed",
              .flag = "--seed",
              .help = "Seed of the replication-stream generator (default 1)"},
        p.seed);
  visit(Field{.name = "zstd_level",
              .flag = "--zstd-level",
              .help = "zstd level of the payload (default 3)",
              .min = kMinZstdLevel,
              .max = kMaxZstdLevel,
              .value_name = "LEVEL"},
        p.zstd_level);
  visit(Field{.name = "file",
              .flag = "--payload",
              .help = "Stream this file (zstd-compressed, cached) instead",
              .unreported = true,
              .value_name = "FILE"},
        p.file);
  visit(kCacheDirField, p.cache_dir);
  visit(kCacheMaxField, p.cache_max);
}

}  // namespace iobench
