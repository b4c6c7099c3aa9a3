// A log-linear latency histogram in HdrHistogram's layout (Gil Tene's; Valkey vendors
// HdrHistogram_c in deps/hdr_histogram): two significant digits (256 sub-buckets, half of them
// per power of two above the first), integer values from 1, here nanoseconds. A value's bucket
// is its counts index; any index maps back to the range of values it holds, so a histogram
// written as (index, count) pairs is read back exactly by anyone who knows the layout
// (iobench_tools/lib/openload.py does, in Python).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace iobench {

namespace hdr {
inline constexpr int kSubBucketHalfCountMagnitude = 7;  // 2 significant digits: 2 x 10^2 < 256
inline constexpr uint32_t kSubBucketHalfCount = 1u << kSubBucketHalfCountMagnitude;
inline constexpr uint64_t kSubBucketMask = 2 * kSubBucketHalfCount - 1;

// The counts index of `value` (0 is counted with 1's sub-bucket: nothing here takes 0 ns).
uint32_t index_of(uint64_t value);
// The lowest and the highest value counted at `index`.
uint64_t lowest_at(uint32_t index);
uint64_t highest_at(uint32_t index);
}  // namespace hdr

class LogLinearHistogram {
 public:
  void record(uint64_t value, uint64_t count = 1);
  // A histogram counted elsewhere in this layout (the kernel's, `iobench watch --event-loop`):
  // its counts by index and its exact maximum; the minimum is its lowest bucket's lowest value.
  static LogLinearHistogram from_buckets(const std::map<uint32_t, uint64_t>& counts, uint64_t max);
  void add(const LogLinearHistogram& other);
  uint64_t count() const { return total_; }
  uint64_t max() const { return max_; }
  uint64_t min() const { return total_ ? min_ : 0; }
  // The value at quantile q (0..1) as HdrHistogram reports it: the highest value equivalent to
  // the bucket in which the ceil(q x count)-th value falls, never above max() (max() for q = 1;
  // 0 when empty).
  uint64_t at_quantile(double q) const;
  // The non-zero buckets, in index order: what a report writes.
  const std::map<uint32_t, uint64_t>& buckets() const { return counts_; }

 private:
  std::map<uint32_t, uint64_t> counts_;  // sparse: a 100 ms slice fills a few dozen buckets
  uint64_t total_ = 0;
  uint64_t max_ = 0;
  uint64_t min_ = UINT64_MAX;
};

}  // namespace iobench
