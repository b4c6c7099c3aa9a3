// Parsing of human-written byte sizes ("16k", "64KiB", "100M") and size lists ("1k,4k,16k").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace iobench {

inline constexpr uint64_t kKiB = 1024;
inline constexpr uint64_t kMiB = 1024 * kKiB;
inline constexpr uint64_t kGiB = 1024 * kMiB;

// Binary units only: k/K/KiB = 1024, m/M/MiB = 1024^2, g/G/GiB = 1024^3, optional "B"; a
// decimal fraction ("1.5G") when it comes to whole bytes.
// `what` names the option in error messages; the value must lie in [min, max].
Result<uint64_t> parse_size(std::string_view text, std::string_view what, uint64_t min,
                            uint64_t max);

// "a,b,,c" -> {"a", "b", "", "c"}: the items of a comma-separated list, empty ones kept (for
// the caller's parser to refuse with its own message).
std::vector<std::string_view> split_commas(std::string_view text);

// A comma-separated list, each item parsed by `one` (a Result-returning parser); the first
// item it refuses is the list's error.
template <typename Parse>
auto parse_comma_list(std::string_view text, Parse one)
    -> Result<std::vector<typename decltype(one(text))::value_type>> {
  std::vector<typename decltype(one(text))::value_type> out;
  for (std::string_view item : split_commas(text)) {
    auto v = one(item);
    if (!v) return std::unexpected(v.error());
    out.push_back(std::move(*v));
  }
  return out;
}

// Comma-separated list of sizes, each checked as parse_size does; duplicates are kept in order.
Result<std::vector<uint64_t>> parse_size_list(std::string_view text, std::string_view what,
                                              uint64_t min, uint64_t max);

// Durations: "250ms", "1.5s", "500us", "2" (seconds); `what` names the option, range in seconds.
Result<double> parse_duration(std::string_view text, std::string_view what, double max_s);

// "16K", "1M", "1500" — the shortest exact spelling, for tables and file names.
std::string format_size(uint64_t bytes);

// "100.0 MiB" style, for human-readable logs.
std::string format_bytes_human(uint64_t bytes);

}  // namespace iobench
