// The statistics a comparison and --repeat auto decide with, on samples whose answers are known.
#include "util/stats.h"

#include <gtest/gtest.h>

#include <vector>

namespace iobench::stats {
namespace {

TEST(Stats, MedianOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(median(std::vector<double>{3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median(std::vector<double>{4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median(std::vector<double>{}), 0);
}

TEST(Stats, MannWhitneyExactOnSeparatedSamples) {
  // Every value of one set below every value of the other: U = 0, and of the C(10,5) = 252
  // arrangements only 2 are as extreme (two-sided).
  const std::vector<double> a{1, 2, 3, 4, 5}, b{6, 7, 8, 9, 10};
  EXPECT_NEAR(mann_whitney_p(a, b), 2.0 / 252, 1e-12);
  EXPECT_NEAR(mann_whitney_p(b, a), 2.0 / 252, 1e-12);
  // Three runs a side can never tell at 5%: even full separation is 2 of C(6,3) = 20.
  EXPECT_NEAR(mann_whitney_p(std::vector<double>{1, 2, 3}, std::vector<double>{4, 5, 6}), 0.1,
              1e-12);
}

TEST(Stats, MannWhitneyExactMatchesAKnownTable) {
  // a = {1, 4, 6}, b = {2, 3, 5, 7}: U(a > b) = 0 + 2 + 3 = 5. For 3 vs 4 the counts of
  // U = 0..12 are 1,1,2,3,4,4,5,4,4,3,2,1,1 (of C(7,3) = 35): P(U <= 5) = 15/35, P(U >= 5) =
  // 24/35, two-sided 30/35.
  const std::vector<double> a{1, 4, 6}, b{2, 3, 5, 7};
  EXPECT_NEAR(mann_whitney_p(a, b), 30.0 / 35, 1e-12);
  // a = {8, 9, 10} above b = {1, 2, 3, 4}: U = 12, P(U >= 12) = 1/35, two-sided 2/35.
  EXPECT_NEAR(mann_whitney_p(std::vector<double>{8, 9, 10}, std::vector<double>{1, 2, 3, 4}),
              2.0 / 35, 1e-12);
}

TEST(Stats, MannWhitneyWithTiesUsesTheNormalApproximation) {
  const std::vector<double> same{5, 5, 5, 5, 5};
  EXPECT_DOUBLE_EQ(mann_whitney_p(same, same), 1);
  // Separated 20 vs 20 with ties inside each set: far below 1e-6.
  std::vector<double> a, b;
  for (int i = 0; i < 20; ++i) {
    a.push_back(i / 2);
    b.push_back(100 + i / 2);
  }
  EXPECT_LT(mann_whitney_p(a, b), 1e-6);
  EXPECT_DOUBLE_EQ(mann_whitney_p(a, std::vector<double>{}), 1);
}

TEST(Stats, RatioIntervalBracketsTheRatioAndIsDeterministic) {
  const std::vector<double> base{10, 10, 10, 10, 10}, twice{20, 20, 20, 20, 20};
  const Interval c = ratio_ci(base, twice);
  EXPECT_DOUBLE_EQ(c.low, 2);
  EXPECT_DOUBLE_EQ(c.high, 2);
  const std::vector<double> noisy_base{9, 10, 11, 10, 10.5, 9.5}, noisy{19, 21, 20, 22, 18, 20};
  const Interval n = ratio_ci(noisy_base, noisy);
  EXPECT_LT(n.low, 2);
  EXPECT_GT(n.high, 2);
  EXPECT_GT(n.low, 1.5);
  EXPECT_LT(n.high, 2.5);
  const Interval again = ratio_ci(noisy_base, noisy);
  EXPECT_DOUBLE_EQ(n.low, again.low);
  EXPECT_DOUBLE_EQ(n.high, again.high);
}

TEST(Stats, MedianIntervalNarrowsWithAgreeingRuns) {
  const Interval tight = median_ci(std::vector<double>{100, 100.5, 99.5, 100.2, 99.8, 100.1});
  const Interval wide = median_ci(std::vector<double>{80, 120, 95, 110, 100, 90});
  EXPECT_LE(tight.low, 100);
  EXPECT_GE(tight.high, 100);
  EXPECT_LT(tight.high - tight.low, 1.1);
  EXPECT_GT(wide.high - wide.low, 10);
}

}  // namespace
}  // namespace iobench::stats
