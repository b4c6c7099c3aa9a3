// A log-linear histogram (util/histogram.h) in a report: its quantiles in µs, its non-zero
// buckets as [index, count] pairs and the layout that reads them back (iobench load's report,
// iobench watch --event-loop's).
#pragma once

#include <nlohmann/json.hpp>

#include "util/histogram.h"

namespace iobench {

inline nlohmann::json quantiles_us(const LogLinearHistogram& h) {
  auto us = [](uint64_t ns) { return static_cast<double>(ns) / 1000.0; };
  return {{"count", h.count()},          {"p50", us(h.at_quantile(0.5))},
          {"p90", us(h.at_quantile(0.9))}, {"p99", us(h.at_quantile(0.99))},
          {"p999", us(h.at_quantile(0.999))}, {"max", us(h.max())}};
}

inline nlohmann::json buckets_json(const LogLinearHistogram& h) {
  nlohmann::json buckets = nlohmann::json::array();
  for (const auto& [index, n] : h.buckets()) buckets.push_back({index, n});
  return buckets;
}

inline nlohmann::json histogram_layout_json() {
  return {{"layout", "HdrHistogram"}, {"unit", "ns"},
          {"sub_bucket_half_count_magnitude", hdr::kSubBucketHalfCountMagnitude},
          {"unit_magnitude", 0}};
}

}  // namespace iobench
