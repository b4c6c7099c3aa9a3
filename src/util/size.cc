#include "util/size.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <string>

namespace iobench {
namespace {

Result<uint64_t> unit_multiplier(std::string_view unit) {
  std::string u;
  for (char c : unit) u.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (u.empty() || u == "b") return 1;
  if (u == "k" || u == "kib" || u == "kb") return uint64_t{1} << 10;
  if (u == "m" || u == "mib" || u == "mb") return uint64_t{1} << 20;
  if (u == "g" || u == "gib" || u == "gb") return uint64_t{1} << 30;
  return fail("unknown unit");
}

}  // namespace

Result<uint64_t> parse_size(std::string_view text, std::string_view what, uint64_t min,
                            uint64_t max) {
  auto bad = [&](std::string_view why) {
    return fail(fmt::format("invalid {} '{}': {} (expected e.g. 512, 16k, 64KiB, 1M; range {}..{})",
                            what, text, why, format_size(min), format_size(max)));
  };
  if (text.empty()) return bad("empty");
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0) return bad("not a number");
  uint64_t number = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, number);
  if (ec != std::errc{} || ptr != text.data() + digits) return bad("number too large");
  // A decimal fraction ("1.5G") is accepted when it comes to a whole number of bytes.
  size_t end = digits;
  uint64_t fraction = 0, scale = 1;
  if (end < text.size() && text[end] == '.') {
    ++end;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) {
      if (scale >= 1'000'000'000) return bad("too many decimals");
      fraction = fraction * 10 + static_cast<uint64_t>(text[end++] - '0');
      scale *= 10;
    }
    if (scale == 1) return bad("no digits after the decimal point");
  }
  auto mult = unit_multiplier(text.substr(end));
  if (!mult) return bad(fmt::format("unknown unit '{}'", text.substr(end)));
  if (number > std::numeric_limits<uint64_t>::max() / *mult) return bad("number too large");
  if (fraction * *mult % scale != 0)
    return bad(fmt::format("{} is not a whole number of bytes", text));
  uint64_t value = number * *mult + fraction * *mult / scale;
  if (value < min || value > max) return bad("out of range");
  return value;
}

std::vector<std::string_view> split_commas(std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    out.push_back(text.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

Result<std::vector<uint64_t>> parse_size_list(std::string_view text, std::string_view what,
                                              uint64_t min, uint64_t max) {
  return parse_comma_list(text,
                          [&](std::string_view item) { return parse_size(item, what, min, max); });
}

Result<double> parse_duration(std::string_view text, std::string_view what, double max_s) {
  auto bad = [&](std::string_view why) {
    return fail(fmt::format("invalid {} '{}': {} (expected e.g. 250ms, 1.5s, 500us; at most {} s)",
                            what, text, why, max_s));
  };
  size_t end = 0;
  while (end < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.'))
    ++end;
  if (end == 0) return bad("not a number");
  const std::string number(text.substr(0, end));
  char* stop = nullptr;
  double v = std::strtod(number.c_str(), &stop);
  if (stop != number.c_str() + number.size()) return bad("not a number");
  const std::string_view unit = text.substr(end);
  double scale;
  if (unit.empty() || unit == "s")
    scale = 1;
  else if (unit == "ms")
    scale = 1e-3;
  else if (unit == "us")
    scale = 1e-6;
  else
    return bad(fmt::format("unknown unit '{}'", unit));
  v *= scale;
  if (!(v >= 0 && v <= max_s)) return bad("out of range");
  return v;
}

std::string format_size(uint64_t bytes) {
  if (bytes != 0 && bytes % (uint64_t{1} << 30) == 0) return fmt::format("{}G", bytes >> 30);
  if (bytes != 0 && bytes % (uint64_t{1} << 20) == 0) return fmt::format("{}M", bytes >> 20);
  if (bytes != 0 && bytes % (uint64_t{1} << 10) == 0) return fmt::format("{}K", bytes >> 10);
  return fmt::format("{}", bytes);
}

std::string format_bytes_human(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= (uint64_t{1} << 30)) return fmt::format("{:.2f} GiB", b / (1 << 30));
  if (bytes >= (uint64_t{1} << 20)) return fmt::format("{:.1f} MiB", b / (1 << 20));
  if (bytes >= (uint64_t{1} << 10)) return fmt::format("{:.1f} KiB", b / (1 << 10));
  return fmt::format("{} B", bytes);
}

}  // namespace iobench
