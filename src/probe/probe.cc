#include "probe/probe.h"

#include <sys/resource.h>
#include <time.h>

#include <cstdio>

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

ProbeSample probe_now(bool thread) {
  ProbeSample s;
  rusage ru{};
  getrusage(thread ? RUSAGE_THREAD : RUSAGE_SELF, &ru);
  s.cpu_ns = clock_ns(thread ? CLOCK_THREAD_CPUTIME_ID : CLOCK_PROCESS_CPUTIME_ID);
  s.wall_ns = clock_ns(CLOCK_MONOTONIC);
  s.user_us = tv_us(ru.ru_utime);
  s.sys_us = tv_us(ru.ru_stime);
  s.vol_ctxsw = ru.ru_nvcsw;
  s.invol_ctxsw = ru.ru_nivcsw;
  return s;
}

uint64_t peak_rss_bytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  uint64_t kib = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmHWM: %lu kB", &kib) == 1) break;
  std::fclose(f);
  return kib * 1024;
}

ProcessTimes process_times(bool reaped_children) {
  rusage ru{};
  getrusage(reaped_children ? RUSAGE_CHILDREN : RUSAGE_SELF, &ru);
  return process_times_of(ru);
}

ProcessTimes process_times_of(const rusage& ru) { return {tv_us(ru.ru_utime), tv_us(ru.ru_stime)}; }

bool reset_peak_rss() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

ProbeDelta operator-(const ProbeSample& end, const ProbeSample& start) {
  return {end.wall_ns - start.wall_ns,     end.cpu_ns - start.cpu_ns,
          end.user_us - start.user_us,     end.sys_us - start.sys_us,
          end.vol_ctxsw - start.vol_ctxsw, end.invol_ctxsw - start.invol_ctxsw};
}

}  // namespace iobench
