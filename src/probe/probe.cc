#include "probe/probe.h"

#include <sys/resource.h>
#include <time.h>

namespace iobench {
namespace {
int64_t clock_ns(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
int64_t tv_us(const timeval& tv) {
  return static_cast<int64_t>(tv.tv_sec) * 1'000'000 + tv.tv_usec;
}
}  // namespace

int64_t monotonic_ns() { return clock_ns(CLOCK_MONOTONIC); }

ProbeSample probe_now() {
  ProbeSample s;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  s.cpu_ns = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
  s.wall_ns = clock_ns(CLOCK_MONOTONIC);
  s.user_us = tv_us(ru.ru_utime);
  s.sys_us = tv_us(ru.ru_stime);
  s.vol_ctxsw = ru.ru_nvcsw;
  s.invol_ctxsw = ru.ru_nivcsw;
  return s;
}

ProbeDelta operator-(const ProbeSample& end, const ProbeSample& start) {
  return {end.wall_ns - start.wall_ns,     end.cpu_ns - start.cpu_ns,
          end.user_us - start.user_us,     end.sys_us - start.sys_us,
          end.vol_ctxsw - start.vol_ctxsw, end.invol_ctxsw - start.invol_ctxsw};
}

}  // namespace iobench
