// The host's busy time: /proc/stat's parser, the window arithmetic, and both live sources.
#include "probe/host_busy.h"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace iobench {
namespace {

constexpr std::string_view kStat =
    "cpu  100 0 50 1000 10 0 5 0 0 0\n"
    "cpu0 60 0 30 400 4 0 3 0 0 0\n"
    "cpu1 40 0 20 600 6 0 2 0 0 0\n"
    "intr 12345 0 0\n"
    "ctxt 999\n";

TEST(HostBusy, ProcStatCountsIdleAndIowaitOfEachCpuLine) {
  const HostIdleSample s = proc_stat_idle(kStat, 10'000'000);
  EXPECT_EQ(s.source, HostBusySource::kProcStat);
  EXPECT_EQ(s.cpus, 2u);  // the summary "cpu " line is not a CPU
  EXPECT_EQ(s.idle_ns, (400 + 4 + 600 + 6) * 10'000'000LL);
}

TEST(HostBusy, ProcStatWithoutCpuLinesIsNoSource) {
  const HostIdleSample s = proc_stat_idle("intr 1\nctxt 2\n", 10'000'000);
  EXPECT_EQ(s.source, HostBusySource::kNone);
  EXPECT_EQ(s.cpus, 0u);
}

TEST(HostBusy, WindowIsCapacityLessIdleClampedToCapacity) {
  HostIdleSample a{.wall_ns = 0, .idle_ns = 0, .cpus = 2, .source = HostBusySource::kCpuidle};
  HostIdleSample b = a;
  b.wall_ns = 1'000'000'000;
  b.idle_ns = 500'000'000;
  HostBusy h = b - a;
  EXPECT_EQ(h.busy_ns, 1'500'000'000);
  EXPECT_EQ(h.cpus, 2u);
  EXPECT_EQ(h.source, HostBusySource::kCpuidle);
  b.idle_ns = 5'000'000'000;  // idle periods begun before the window: never below zero
  EXPECT_EQ((b - a).busy_ns, 0);
  b.idle_ns = -1;  // never above every CPU busy the whole window
  EXPECT_EQ((b - a).busy_ns, 2'000'000'000);
}

TEST(HostBusy, DifferentSourcesOrCpuCountsGiveNoFigure) {
  HostIdleSample a{.wall_ns = 0, .idle_ns = 0, .cpus = 2, .source = HostBusySource::kCpuidle};
  HostIdleSample b{.wall_ns = 10, .idle_ns = 0, .cpus = 2, .source = HostBusySource::kProcStat};
  EXPECT_EQ((b - a).source, HostBusySource::kNone);
  b.source = HostBusySource::kCpuidle;
  b.cpus = 3;  // a CPU came online in between
  EXPECT_EQ((b - a).source, HostBusySource::kNone);
}

TEST(HostBusy, LiveReadingsHaveASourceAndTheTestKnobForcesProcStat) {
  const HostIdleSample now = host_idle_now();
  EXPECT_NE(now.source, HostBusySource::kNone);
  EXPECT_GT(now.cpus, 0u);
  ::setenv("IOBENCH_TEST_HOST_IDLE", "proc_stat", 1);
  const HostIdleSample forced = host_idle_now();
  ::unsetenv("IOBENCH_TEST_HOST_IDLE");
  EXPECT_EQ(forced.source, HostBusySource::kProcStat);
  EXPECT_EQ(forced.cpus, now.cpus);
}

}  // namespace
}  // namespace iobench
