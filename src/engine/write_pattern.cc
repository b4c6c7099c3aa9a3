#include "engine/write_pattern.h"

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/size.h"

namespace iobench {
namespace {

constexpr uint64_t kMaxWrite = 64ULL << 20;

Result<uint64_t> one_size(const std::string& text, const std::string& spec) {
  auto s = parse_size(text, "--write-pattern", 1, kMaxWrite);
  if (!s)
    return fail(fmt::format("invalid --write-pattern '{}': '{}' is not a size from 1 to 64M",
                            spec, text));
  return *s;
}

// The write sizes of the process with the most bytes written to sockets in a watch report.
Result<std::map<uint64_t, uint64_t>> busiest_writer(const nlohmann::json& doc) {
  std::map<uint64_t, uint64_t> best;
  uint64_t best_bytes = 0;
  for (const auto& p : doc.at("watch").at("processes")) {
    std::map<uint64_t, uint64_t> sizes;
    uint64_t bytes = 0;
    for (const auto& io : p.at("io")) {
      const std::string kind = io.at("fd_kind");
      if (io.at("family") != "write" || (kind != "tcp" && kind != "socket")) continue;
      bytes += io.at("bytes").get<uint64_t>();
      for (const auto& s : io.at("sizes")) {
        const int64_t size = s.at("result");
        if (size > 0) sizes[static_cast<uint64_t>(size)] += s.at("calls").get<uint64_t>();
      }
    }
    if (bytes > best_bytes) best_bytes = bytes, best = std::move(sizes);
  }
  if (best.empty()) return fail("no process in it wrote to a socket");
  return best;
}

}  // namespace

Result<WritePattern> WritePattern::from_watch(const std::string& path, uint64_t seed) {
  std::ifstream in(path);
  if (!in) return fail(fmt::format("invalid --write-pattern '@{}': cannot read it", path));
  WritePattern p;
  p.rng_.seed(seed);
  try {
    auto sizes = busiest_writer(nlohmann::json::parse(in));
    if (!sizes)
      return fail(fmt::format("invalid --write-pattern '@{}': {}", path, sizes.error().message));
    uint64_t total = 0;
    for (const auto& [size, n] : *sizes) {
      if (size > kMaxWrite) continue;
      total += n;
      p.weighted_.emplace_back(size, total);
    }
  } catch (const nlohmann::json::exception& e) {
    return fail(fmt::format("invalid --write-pattern '@{}': not an `iobench watch --json` "
                            "report ({})", path, e.what()));
  }
  return p;
}

Result<WritePattern> WritePattern::parse(const std::string& spec, uint64_t seed) {
  if (spec.starts_with("@")) return from_watch(spec.substr(1), seed);
  WritePattern p;
  p.rng_.seed(seed);
  std::stringstream items(spec);
  std::string item;
  while (std::getline(items, item, ',')) {
    const size_t plus = item.find("+tail:");
    auto head = one_size(item.substr(0, plus), spec);
    if (!head) return std::unexpected(head.error());
    p.steps_.push_back({*head, *head});
    if (plus == std::string::npos) continue;
    const std::string range = item.substr(plus + 6);
    const size_t dash = range.find('-');
    auto lo = one_size(range.substr(0, dash), spec);
    if (!lo) return std::unexpected(lo.error());
    auto hi = dash == std::string::npos ? lo : one_size(range.substr(dash + 1), spec);
    if (!hi) return std::unexpected(hi.error());
    if (*hi < *lo)
      return fail(fmt::format("invalid --write-pattern '{}': tail range {} is reversed", spec,
                              range));
    p.steps_.push_back({*lo, *hi});
  }
  if (p.steps_.empty())
    return fail(fmt::format("invalid --write-pattern '{}': expected e.g. 16384+tail:1-17, "
                            "16384,836 or @watch.json", spec));
  return p;
}

uint64_t WritePattern::next() {
  if (!weighted_.empty()) {
    const uint64_t r = std::uniform_int_distribution<uint64_t>(1, weighted_.back().second)(rng_);
    for (const auto& [size, upto] : weighted_)
      if (r <= upto) return size;
  }
  const Step& s = steps_[at_];
  at_ = (at_ + 1) % steps_.size();
  if (s.lo == s.hi) return s.lo;
  return std::uniform_int_distribution<uint64_t>(s.lo, s.hi)(rng_);
}

double WritePattern::mean() const {
  double sum = 0;
  if (!weighted_.empty()) {
    uint64_t before = 0;
    for (const auto& [size, upto] : weighted_) {
      sum += static_cast<double>(size) * static_cast<double>(upto - before);
      before = upto;
    }
    return sum / static_cast<double>(weighted_.back().second);
  }
  for (const Step& s : steps_) sum += (static_cast<double>(s.lo) + static_cast<double>(s.hi)) / 2;
  return sum / static_cast<double>(steps_.size());
}

}  // namespace iobench
