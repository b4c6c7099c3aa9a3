#include "util/stats.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace iobench::stats {
namespace {

constexpr uint64_t kSeed = 0x10be7c5u;  // fixed: the same runs give the same interval

double percentile(std::vector<double>& v, double q) {
  std::sort(v.begin(), v.end());
  const double at = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(at));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (at - static_cast<double>(lo));
}

double resampled_median(std::span<const double> v, std::mt19937_64& rng, std::vector<double>& buf) {
  std::uniform_int_distribution<size_t> pick(0, v.size() - 1);
  buf.resize(v.size());
  for (double& x : buf) x = v[pick(rng)];
  return median(buf);
}

Interval interval_of(std::vector<double>& draws, double level) {
  return {percentile(draws, (1 - level) / 2), percentile(draws, 1 - (1 - level) / 2)};
}

// Arrangements of m + n ranks (no ties) whose U statistic is u, for u = 0..m*n.
std::vector<double> u_counts(size_t m, size_t n) {
  // f[j][u]: arrangements of i of the first set and j of the second with statistic u, built
  // up over i; adding the largest value to the first set adds j to U.
  std::vector<std::vector<double>> f(n + 1, std::vector<double>(m * n + 1, 0));
  for (size_t j = 0; j <= n; ++j) f[j][0] = 1;
  for (size_t i = 1; i <= m; ++i) {
    std::vector<std::vector<double>> g(n + 1, std::vector<double>(m * n + 1, 0));
    for (size_t j = 0; j <= n; ++j)
      for (size_t u = 0; u <= m * n; ++u) {
        // The largest value is from the first set (it beats all j of the second) or the second.
        if (u >= j) g[j][u] += f[j][u - j];
        if (j > 0) g[j][u] += g[j - 1][u];
      }
    f = std::move(g);
  }
  return f[n];
}

}  // namespace

double median(std::span<const double> v) {
  if (v.empty()) return 0;
  std::vector<double> s(v.begin(), v.end());
  std::sort(s.begin(), s.end());
  const size_t n = s.size();
  return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

Interval ratio_ci(std::span<const double> base, std::span<const double> next, double level,
                  int draws) {
  if (base.empty() || next.empty() || median(base) == 0) return {};
  std::mt19937_64 rng(kSeed);
  std::vector<double> ratios, a, b;
  ratios.reserve(static_cast<size_t>(draws));
  for (int i = 0; i < draws; ++i) {
    const double m = resampled_median(base, rng, a);
    if (m != 0) ratios.push_back(resampled_median(next, rng, b) / m);
  }
  if (ratios.empty()) return {};
  return interval_of(ratios, level);
}

Interval median_ci(std::span<const double> v, double level, int draws) {
  if (v.empty()) return {};
  std::mt19937_64 rng(kSeed);
  std::vector<double> medians, buf;
  medians.reserve(static_cast<size_t>(draws));
  for (int i = 0; i < draws; ++i) medians.push_back(resampled_median(v, rng, buf));
  return interval_of(medians, level);
}

double mann_whitney_p(std::span<const double> a, std::span<const double> b) {
  if (a.empty() || b.empty()) return 1;
  double u = 0;  // pairs where a's value is the larger, ties counting half
  bool ties = false;
  for (double x : a)
    for (double y : b) {
      if (x > y) u += 1;
      if (x == y) {
        u += 0.5;
        ties = true;
      }
    }
  const auto m = static_cast<double>(a.size()), n = static_cast<double>(b.size());
  std::vector<double> all(a.begin(), a.end());
  all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end());
  ties = ties || std::adjacent_find(all.begin(), all.end()) != all.end();
  if (!ties && a.size() <= 30 && b.size() <= 30) {
    const std::vector<double> counts = u_counts(a.size(), b.size());
    double total = 0, below = 0, above = 0;
    for (size_t k = 0; k < counts.size(); ++k) {
      total += counts[k];
      if (static_cast<double>(k) <= u) below += counts[k];
      if (static_cast<double>(k) >= u) above += counts[k];
    }
    return std::min(1.0, 2 * std::min(below, above) / total);
  }
  // Normal approximation; the variance shrinks with each group of tied values.
  double tie_term = 0;
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    while (j < all.size() && all[j] == all[i]) ++j;
    const auto t = static_cast<double>(j - i);
    tie_term += t * t * t - t;
    i = j;
  }
  const double total = m + n;
  const double var = m * n / 12 * ((total + 1) - tie_term / (total * (total - 1)));
  if (var <= 0) return 1;
  const double z = (std::abs(u - m * n / 2) - 0.5) / std::sqrt(var);
  return std::min(1.0, std::erfc(std::max(z, 0.0) / std::sqrt(2.0)));
}

}  // namespace iobench::stats
