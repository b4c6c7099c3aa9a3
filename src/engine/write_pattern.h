// A sender's write sizes following a pattern instead of one buffer size (--write-pattern): what
// a real primary writes, replayed, so its cost can be set beside writing whole chunks.
//
//   "16384+tail:1-17"  16384 bytes, then a size drawn from 1..17, in turn (Valkey's connset
//                      writer: a 16 KiB slice, then the buffer's overshoot)
//   "16384,836"        these sizes in turn
//   "@FILE"            the sizes an `iobench watch --json` FILE shows the busiest socket writer
//                      making, drawn in proportion to their counts
// Draws are seeded (--seed): a run's sequence of sizes is reproducible.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/io_buffer.h"
#include "util/result.h"

namespace iobench {

class WritePattern : public WriteSizeSequence {
 public:
  static Result<WritePattern> parse(const std::string& spec, uint64_t seed);
  // The next write's size.
  uint64_t next() override;
  // The mean write size (the pattern's bytes per write, before short writes).
  double mean() const;

 private:
  struct Step {
    uint64_t lo, hi;  // a size drawn from lo..hi (lo == hi: that size)
  };
  static Result<WritePattern> from_watch(const std::string& path, uint64_t seed);
  std::vector<Step> steps_;  // in turn
  size_t at_ = 0;
  std::vector<std::pair<uint64_t, uint64_t>> weighted_;  // size, cumulative count (from a file)
  std::mt19937_64 rng_;
};

}  // namespace iobench
