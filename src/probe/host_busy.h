// The host's busy time over a window: every CPU's time not idle, whoever spent it (both sides,
// the kernel's softirqs and ksoftirqd, other processes). On an emulated link part of a
// transfer's kernel work lands outside both processes; this figure holds it wherever it lands.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <utility>

#include "util/fields.h"
#include "util/names.h"

namespace iobench {

// Where the idle time comes from: cpuidle's per-state residency (microseconds, updated as each
// idle period ends) or /proc/stat's idle + iowait (USER_HZ ticks, 10 ms), or nowhere.
enum class HostBusySource { kNone, kCpuidle, kProcStat };
template <>
struct Names<HostBusySource> {
  static constexpr std::array table{
      std::pair{HostBusySource::kNone, std::string_view{"none"}},
      std::pair{HostBusySource::kCpuidle, std::string_view{"cpuidle"}},
      std::pair{HostBusySource::kProcStat, std::string_view{"proc_stat"}}};
};

// One reading: the monotonic clock and the idle time summed over the online CPUs.
struct HostIdleSample {
  int64_t wall_ns = 0;
  int64_t idle_ns = 0;
  uint32_t cpus = 0;
  HostBusySource source = HostBusySource::kNone;
};

// Now, from cpuidle when every online CPU has it, else /proc/stat.
HostIdleSample host_idle_now();
// /proc/stat's text: the "cpuN" lines' idle + iowait (fields 4 and 5) in nanoseconds.
HostIdleSample proc_stat_idle(std::string_view text, int64_t ns_per_tick);

// The window's figure, described once: each side's RESULT carries it as its `host` block.
struct HostBusy {
  int64_t busy_ns = 0;  // cpus x wall - idle: CPU time spent on anything, all CPUs
  uint32_t cpus = 0;    // CPUs counted (online)
  HostBusySource source = HostBusySource::kNone;
};

template <typename Self, typename Visit>
  requires DescribesAs<Self, HostBusy>
void describe(Self& h, Visit&& visit) {
  visit(Field{"busy_ns"}, h.busy_ns);
  visit(Field{"cpus"}, h.cpus);
  visit(Field{"source"}, h.source);
}

// Busy time between two readings (none when either had no source, or the sources differ). An
// idle period under way at a reading is counted when it ends: a CPU idle across the window's
// start adds its idle time from before the start, so on a quiet host the figure is a lower bound
// by at most one idle period per CPU.
HostBusy operator-(const HostIdleSample& end, const HostIdleSample& start);

}  // namespace iobench
