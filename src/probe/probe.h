// Wall clock and CPU time of this process, sampled around a data phase.
#pragma once

#include <cstdint>

namespace iobench {

struct ProbeSample {
  int64_t wall_ns = 0;  // CLOCK_MONOTONIC
  int64_t cpu_ns = 0;   // CLOCK_PROCESS_CPUTIME_ID: exact, all threads of the process
  int64_t user_us = 0;  // getrusage(RUSAGE_SELF)
  int64_t sys_us = 0;
  int64_t vol_ctxsw = 0;    // voluntary context switches (blocked waiting for I/O)
  int64_t invol_ctxsw = 0;  // preempted
};

// Deltas between two samples. On a tick-accounting kernel the user/sys split is sampled per
// tick (4 ms at HZ=250) and coarse on short runs; cpu_ns (user + sys) is exact.
struct ProbeDelta {
  int64_t wall_ns = 0;
  int64_t cpu_ns = 0;
  int64_t user_us = 0;
  int64_t sys_us = 0;
  int64_t vol_ctxsw = 0;
  int64_t invol_ctxsw = 0;
};

ProbeSample probe_now();
ProbeDelta operator-(const ProbeSample& end, const ProbeSample& start);
int64_t monotonic_ns();

}  // namespace iobench
