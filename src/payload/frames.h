// Building a payload's bytes: zstd frames of raw chunks, compressed on every core, padded to an
// exact size. Chunk i depends only on (source, i), so the output is the same for any thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "payload/payload.h"
#include "util/result.h"

namespace iobench {

inline constexpr size_t kRawChunk = 1 << 20;  // 1 MiB of raw stream per zstd frame

// Where raw (uncompressed) chunks come from. Thread-safe: chunks are made on several threads.
class RawSource {
 public:
  virtual ~RawSource() = default;
  // Appends chunk `index` (at least `n` bytes; it begins `offset` raw bytes into the stream).
  virtual void chunk(uint64_t index, uint64_t offset, size_t n, std::string& out) const = 0;
};

// The RESP replication stream: chunk i from a generator seeded by (seed, i).
class GeneratedSource final : public RawSource {
 public:
  explicit GeneratedSource(uint64_t seed) : seed_(seed) {}
  void chunk(uint64_t index, uint64_t offset, size_t n, std::string& out) const override;

 private:
  uint64_t seed_;
};

// A user's file, cycled: chunk bytes are the file's from `offset` on.
class FileSource final : public RawSource {
 public:
  explicit FileSource(std::string content) : content_(std::move(content)) {}
  void chunk(uint64_t index, uint64_t offset, size_t n, std::string& out) const override;

 private:
  std::string content_;
};

// The threads a build with these options compresses on (0 in options: one per core).
unsigned build_threads(const BuildOptions& options);

// The memory a build holds beside its payload, counted before it starts: per thread a zstd
// compression context at `level` (zstd's own size for a chunk of 1 MiB and a command: 1.3 MiB at level 3,
// 13 MiB at 9, 35 MiB at 19), a raw chunk, and the compressed frames of a batch in flight.
uint64_t build_working_bytes(int level, unsigned threads);

// Fills `out` with whole zstd frames, then one skippable frame for the rest, so the size is exact
// and a decoder accepts every byte. Returns the number of data frames.
Result<uint64_t> fill_frames(const RawSource& source, int level, uint64_t bytes,
                             std::vector<std::byte>& out, const BuildOptions& options);

}  // namespace iobench
