#include "probe/placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <utility>
#include <vector>

namespace iobench {
namespace {

std::string list_text(const cpu_set_t& set) {
  std::string out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    int last = cpu;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
    if (!out.empty()) out += ',';
    out += last == cpu ? fmt::format("{}", cpu) : fmt::format("{}-{}", cpu, last);
    cpu = last;
  }
  return out;
}

cpu_set_t allowed_set() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) CPU_ZERO(&set);
  return set;
}

}  // namespace

std::string allowed_cpus_text() { return list_text(allowed_set()); }

namespace {

// Calls f(lo, hi) for each range of a list in the kernel's format ("0-3,6": 0..3, then 6..6),
// a trailing newline allowed; false, before any call, when the list is malformed.
template <typename F>
bool for_each_cpu_range(std::string_view list, F&& f) {
  while (!list.empty() && list.back() == '\n') list.remove_suffix(1);
  std::vector<std::pair<int, int>> ranges;
  while (!list.empty()) {
    const size_t comma = std::min(list.find(','), list.size());
    const std::string_view range = list.substr(0, comma);
    const size_t dash = range.find('-');
    int lo = 0, hi = 0;
    const auto first = std::from_chars(range.data(), range.data() + range.size(), lo);
    if (first.ec != std::errc{}) return false;
    hi = lo;
    if (dash != std::string_view::npos &&
        std::from_chars(range.data() + dash + 1, range.data() + range.size(), hi).ec != std::errc{})
      return false;
    if (hi < lo) return false;
    ranges.emplace_back(lo, hi);
    list.remove_prefix(std::min(comma + 1, list.size()));
  }
  for (auto [lo, hi] : ranges) f(lo, hi);
  return true;
}

}  // namespace

std::vector<int> cpu_list(std::string_view list) {
  std::vector<int> out;
  bool fits = true;  // CPU numbers a cpu_set_t can hold: a list beyond them is not this host's
  const bool ok = for_each_cpu_range(list, [&](int lo, int hi) {
    fits = fits && hi < CPU_SETSIZE;
    for (int c = lo; fits && c <= hi; ++c) out.push_back(c);
  });
  return ok && fits ? out : std::vector<int>{};
}

int cpu_list_count(std::string_view list) {
  int count = 0;
  if (!for_each_cpu_range(list, [&](int lo, int hi) { count += hi - lo + 1; })) return 0;
  return count;
}

bool cpu_allowed(int cpu) {
  if (cpu < 0 || cpu >= CPU_SETSIZE) return false;
  const cpu_set_t set = allowed_set();
  return CPU_ISSET(cpu, &set);
}

int allowed_cpu_count() {
  const cpu_set_t set = allowed_set();
  return CPU_COUNT(&set);
}

Status check_cpu_usable(int cpu, std::string_view who) {
  if (cpu < 0 || cpu_allowed(cpu)) return {};
  return fail(fmt::format("CPU {} is not one this {} may run on (allowed: {})", cpu, who,
                          allowed_cpus_text()));
}

Result<ThreadPin> ThreadPin::pin(int cpu) {
  ThreadPin p;
  if (cpu < 0) return p;
  if (auto st = check_cpu_usable(cpu, "process"); !st) return std::unexpected(st.error());
  p.previous_ = allowed_set();
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0)
    return fail(fmt::format("pinning to CPU {}: {}", cpu, std::strerror(errno)));
  p.restore_ = true;
  return p;
}

ThreadPin::ThreadPin(ThreadPin&& o) noexcept
    : restore_(std::exchange(o.restore_, false)), previous_(o.previous_) {}

ThreadPin::~ThreadPin() {
  if (restore_) (void)sched_setaffinity(0, sizeof previous_, &previous_);
}

void CpuSamples::sample() {
  const int cpu = sched_getcpu();
  if (cpu < 0 || cpu >= CPU_SETSIZE) return;
  if (!any_) CPU_ZERO(&seen_);
  CPU_SET(cpu, &seen_);
  any_ = true;
}

std::string CpuSamples::text() const { return any_ ? list_text(seen_) : std::string{}; }

}  // namespace iobench
