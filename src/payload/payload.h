// The bytes a sender streams: whole zstd frames padded to an exact size, built once and cached.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cli/options.h"
#include "util/result.h"

namespace iobench {

struct Payload {
  std::vector<std::byte> data;  // exactly spec.bytes
  uint64_t decoded_bytes = 0;   // what a zstd decoder yields from `data`
  uint64_t xxh3 = 0;            // XXH3-64 of `data`
  std::string source;           // "resp-v1 seed=1 level=3" or "file:/path level=3"
  std::string cache_path;
  bool from_cache = false;

  std::span<const std::byte> bytes() const { return data; }
};

// Builds the payload in memory (no cache). Deterministic for a given spec.
Result<Payload> build_payload(const PayloadSpec& spec);

// Loads from the on-disk cache, building and storing it first when missing or stale.
Result<Payload> load_payload(const PayloadSpec& spec);

// The cache file for a spec (the directory is created on demand by load_payload).
Result<std::string> payload_cache_path(const PayloadSpec& spec);

// XXH3-64 over bytes; the sender's reference for the receiver's running checksum.
uint64_t checksum(std::span<const std::byte> data);

// Versions of the compression and hash libraries linked in, as {name, version}, for reports.
std::vector<std::pair<std::string, std::string>> payload_library_versions();

}  // namespace iobench
