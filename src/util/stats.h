// Statistics for deciding between two sets of runs: the median, a bootstrap confidence interval
// (of one median, or of the ratio of two), and the Mann-Whitney U test. Deterministic: the
// bootstrap draws from a fixed seed, so the same runs give the same interval.
#pragma once

#include <cstdint>
#include <span>

namespace iobench::stats {

double median(std::span<const double> v);

struct Interval {
  double low = 0, high = 0;
};

// 95% (by default) percentile bootstrap interval of median(next) / median(base), `draws`
// resamples of each set with replacement. A base median of zero gives [0, 0].
Interval ratio_ci(std::span<const double> base, std::span<const double> next, double level = 0.95,
                  int draws = 4000);

// The same for one set's median: how far the median of these runs may be from the truth.
Interval median_ci(std::span<const double> v, double level = 0.95, int draws = 4000);

// Two-sided p-value of the Mann-Whitney U test that the two sets come from one distribution:
// exact (every arrangement counted) without ties and up to 30 runs a side, otherwise the normal
// approximation with tie and continuity corrections. 1 when either set is empty.
double mann_whitney_p(std::span<const double> a, std::span<const double> b);

}  // namespace iobench::stats
