// The bytes a sender streams: whole zstd frames padded to an exact size, built once and cached.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "payload/spec.h"
#include "util/result.h"

namespace iobench {

// A read-only mapping of a cache file: the page cache's pages, no copy, no zero-fill.
class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(void* addr, size_t size) : addr_(addr), size_(size) {}
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();
  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(addr_), size_}; }

 private:
  void* addr_ = nullptr;
  size_t size_ = 0;
};

struct Payload {
  std::vector<std::byte> data;  // exactly spec.bytes when built in memory (empty when mapped)
  MappedFile mapped;            // exactly spec.bytes when loaded from the cache
  uint64_t decoded_bytes = 0;   // what a zstd decoder yields from `data`
  uint64_t xxh3 = 0;            // XXH3-64 of `data`
  std::string source;           // "resp-v1 seed=1 level=3" or "file:/path level=3"
  std::string cache_path;
  bool from_cache = false;

  std::span<const std::byte> bytes() const { return data.empty() ? mapped.bytes() : data; }
};

// XXH3-64 of the payload's first `n` bytes (a --bytes-spread connection's share).
uint64_t prefix_xxh3(const Payload& p, uint64_t n);

// Called while a payload is built with the bytes made so far and the size; false stops it.
using BuildProgress = std::function<bool(uint64_t done, uint64_t total)>;

struct BuildOptions {
  unsigned threads = 0;  // 0: one per core; the bytes are the same for any count
  BuildProgress progress;
};

// Builds the payload in memory (no cache). Deterministic for a given spec.
Result<Payload> build_payload(const PayloadSpec& spec, const BuildOptions& options = {});

// The spec's payload mapped from the on-disk cache, if a valid one is there (nothing built).
std::optional<Payload> load_cached_payload(const PayloadSpec& spec);

// Loads from the on-disk cache, building and storing it first when missing or stale.
Result<Payload> load_payload(const PayloadSpec& spec, const BuildOptions& options = {});

// Whether the cache already holds a spec's payload (no build needed).
bool payload_cached(const PayloadSpec& spec);

// The cache file for a spec (the directory is created on demand by load_payload).
Result<std::string> payload_cache_path(const PayloadSpec& spec);

// XXH3-64 over bytes; the sender's reference for the receiver's running checksum.
uint64_t checksum(std::span<const std::byte> data);

// "resp-v1 seed=1 level=3" or "file:/path level=3": what a spec streams, for reports.
std::string describe_payload(const PayloadSpec& spec);

// Versions of the compression and hash libraries linked in, as {name, version}, for reports.
std::vector<std::pair<std::string, std::string>> payload_library_versions();

}  // namespace iobench
