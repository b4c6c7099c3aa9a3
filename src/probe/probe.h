// Wall clock and CPU time of this process, sampled around a data phase.
#pragma once

#include <sys/resource.h>

#include <cstdint>

#include "util/fields.h"
#include "util/names.h"

namespace iobench {

struct ProbeSample {
  int64_t wall_ns = 0;  // CLOCK_MONOTONIC
  int64_t cpu_ns = 0;   // CLOCK_PROCESS_CPUTIME_ID: exact, all threads of the process
  int64_t user_us = 0;  // getrusage(RUSAGE_SELF)
  int64_t sys_us = 0;
  int64_t vol_ctxsw = 0;    // voluntary context switches (blocked waiting for I/O)
  int64_t invol_ctxsw = 0;  // preempted
};

// Whose CPU clock a side's figures are: its process's, or its thread's (one connection of
// several in one process, --conns).
enum class CpuScope { kProcess, kThread };

template <>
struct Names<CpuScope> {
  static constexpr std::array table{std::pair{CpuScope::kProcess, std::string_view{"process"}},
                                    std::pair{CpuScope::kThread, std::string_view{"thread"}}};
};

// Deltas between two samples. On a tick-accounting kernel the user/sys split is sampled per
// tick (4 ms at HZ=250) and coarse on short runs; cpu_ns (user + sys) is exact. Described once:
// each side's RESULT carries it as its `probe` block.
struct ProbeDelta {
  int64_t wall_ns = 0;
  int64_t cpu_ns = 0;
  int64_t user_us = 0;
  int64_t sys_us = 0;
  int64_t vol_ctxsw = 0;
  int64_t invol_ctxsw = 0;
};

template <typename Self, typename Visit>
  requires DescribesAs<Self, ProbeDelta>
void describe(Self& d, Visit&& visit) {
  visit(Field{"wall_ns"}, d.wall_ns);
  visit(Field{"cpu_ns"}, d.cpu_ns);
  visit(Field{"user_us"}, d.user_us);
  visit(Field{"sys_us"}, d.sys_us);
  visit(Field{"vol_ctxsw"}, d.vol_ctxsw);
  visit(Field{"invol_ctxsw"}, d.invol_ctxsw);
}

// `thread`: this thread only (CLOCK_THREAD_CPUTIME_ID, RUSAGE_THREAD) — one connection among
// several; otherwise the whole process (all threads, io_uring workers included).
ProbeSample probe_now(bool thread = false);
// The process's resident-set peak since the last reset_peak_rss(), in bytes (0 if unknown).
uint64_t peak_rss_bytes();
// Restarts the peak (writes 5 to /proc/self/clear_refs); false where the kernel refuses.
bool reset_peak_rss();
ProbeDelta operator-(const ProbeSample& end, const ProbeSample& start);
int64_t monotonic_ns();

// A whole process's CPU from getrusage or wait4 (user + sys; the total is the scheduler's
// exact runtime, the split tick-sampled).
struct ProcessTimes {
  int64_t user_us = 0;
  int64_t sys_us = 0;
  int64_t cpu_ns() const { return (user_us + sys_us) * 1000; }
};
// This process so far (RUSAGE_SELF), or every child it has reaped (RUSAGE_CHILDREN).
ProcessTimes process_times(bool reaped_children = false);
// The CPU times of a rusage (e.g. a child's, from wait4).
ProcessTimes process_times_of(const rusage& ru);

}  // namespace iobench
