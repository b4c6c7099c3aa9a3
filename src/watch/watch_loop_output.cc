// `iobench watch --event-loop`'s report: per class (an iteration with or without a large write,
// a large write on an event-loop thread or elsewhere) its count, its total time and its
// quantiles in µs; the JSON adds each histogram's buckets, so any quantile can be read again.
#include <fmt/format.h>

#include <array>

#include "util/histogram_json.h"
#include "watch/bpf_loop_programs.h"
#include "watch/watch_report.h"

namespace iobench {
namespace {

struct ClassName {
  const char* key;    // the JSON's
  const char* label;  // the table's
};

// In watch_bpf::LoopClass's order.
constexpr std::array<ClassName, watch_bpf::kLoopClasses> kClasses = {{
    {"iterations", "iterations without a large write"},
    {"iterations_with_large_write", "iterations with a large write"},
    {"large_writes_in_loop", "large writes, event-loop threads"},
    {"large_writes_elsewhere", "large writes, other threads"},
}};

double us(uint64_t ns) { return static_cast<double>(ns) / 1e3; }

}  // namespace

void print_loop_table(const WatchReport& r) {
  if (r.loop.empty()) return;
  fmt::print("\nevent loop (epoll wait to wait, every watched thread; large write: >= {} B), µs:\n",
             r.large_write);
  fmt::print("  {:<34} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}\n", "", "count", "total s", "p50",
             "p99", "p99.9", "max");
  for (size_t i = 0; i < r.loop.size() && i < kClasses.size(); ++i) {
    const LogLinearHistogram& h = r.loop[i].ns;
    fmt::print("  {:<34} {:>9} {:>9.3f} {:>9.1f} {:>9.1f} {:>9.1f} {:>10.1f}\n", kClasses[i].label,
               h.count(), static_cast<double>(r.loop[i].sum_ns) / 1e9, us(h.at_quantile(0.5)),
               us(h.at_quantile(0.99)), us(h.at_quantile(0.999)), us(h.max()));
  }
}

nlohmann::json loop_json(const WatchReport& r) {
  if (r.loop.empty()) return nullptr;
  nlohmann::json out = {{"large_write_bytes", r.large_write},
                        {"histogram", histogram_layout_json()}};
  for (size_t i = 0; i < r.loop.size() && i < kClasses.size(); ++i) {
    nlohmann::json q = quantiles_us(r.loop[i].ns);
    q["total_s"] = static_cast<double>(r.loop[i].sum_ns) / 1e9;
    q["buckets"] = buckets_json(r.loop[i].ns);
    out[kClasses[i].key] = std::move(q);
  }
  return out;
}

}  // namespace iobench
