#include "util/histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace iobench {
namespace hdr {
namespace {

// HdrHistogram's bucket (power of two above the first 256 values) and sub-bucket of a value.
int bucket_of(uint64_t value) {
  return 63 - std::countl_zero(value | kSubBucketMask) - kSubBucketHalfCountMagnitude;
}

}  // namespace

uint32_t index_of(uint64_t value) {
  const int bucket = bucket_of(value);
  const uint64_t sub = value >> bucket;
  return static_cast<uint32_t>(((static_cast<uint64_t>(bucket) + 1)
                                << kSubBucketHalfCountMagnitude) +
                               (sub - kSubBucketHalfCount));
}

uint64_t lowest_at(uint32_t index) {
  int bucket = static_cast<int>(index >> kSubBucketHalfCountMagnitude) - 1;
  uint64_t sub = (index & (kSubBucketHalfCount - 1)) + kSubBucketHalfCount;
  if (bucket < 0) {
    sub -= kSubBucketHalfCount;
    bucket = 0;
  }
  return sub << bucket;
}

uint64_t highest_at(uint32_t index) { return lowest_at(index + 1) - 1; }

}  // namespace hdr

void LogLinearHistogram::record(uint64_t value, uint64_t count) {
  if (count == 0) return;
  counts_[hdr::index_of(value)] += count;
  total_ += count;
  max_ = std::max(max_, value);
  min_ = std::min(min_, value);
}

LogLinearHistogram LogLinearHistogram::from_buckets(const std::map<uint32_t, uint64_t>& counts,
                                                    uint64_t max) {
  LogLinearHistogram h;
  for (const auto& [index, n] : counts) {
    if (n == 0) continue;
    h.counts_[index] += n;
    h.total_ += n;
    h.min_ = std::min(h.min_, hdr::lowest_at(index));
  }
  h.max_ = h.total_ ? max : 0;
  return h;
}

void LogLinearHistogram::add(const LogLinearHistogram& other) {
  for (const auto& [index, n] : other.counts_) counts_[index] += n;
  total_ += other.total_;
  max_ = std::max(max_, other.max_);
  if (other.total_) min_ = std::min(min_, other.min_);
}

uint64_t LogLinearHistogram::at_quantile(double q) const {
  if (total_ == 0) return 0;
  if (q >= 1) return max_;
  const auto rank = std::max<uint64_t>(
      1, static_cast<uint64_t>(std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(total_))));
  uint64_t seen = 0;
  for (const auto& [index, n] : counts_) {
    seen += n;
    if (seen >= rank) return std::min(hdr::highest_at(index), max_);
  }
  return max_;
}

}  // namespace iobench
