#include "probe/syscall_counter.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace iobench {
namespace {

TEST(SyscallCounter, CountsWritesExactlyWhereTheKernelAllows) {
  SyscallCounter c;
  if (!c.available()) GTEST_SKIP() << "perf_event tracepoints unavailable here: " << c.reason();
  c.start();
  for (int i = 0; i < 1000; ++i) (void)!::write(-1, "", 0);
  KernelSyscalls k = c.stop();
  ASSERT_TRUE(k.available);
  uint64_t writes = 0;
  for (const auto& [name, n] : k.by_name)
    if (name == "write") writes = n;
  EXPECT_EQ(writes, 1000u);
  EXPECT_EQ(k.total, 1000u) << "the disabling ioctl is taken out";
  // Counting again starts from zero.
  c.start();
  (void)!::write(-1, "", 0);
  EXPECT_EQ(c.stop().total, 1u);
}

TEST(SyscallCounter, MissingTracefsIsReportedNotFatal) {
  SyscallCounter c("/nonexistent-tracefs");
  EXPECT_FALSE(c.available());
  EXPECT_NE(c.reason().find("/nonexistent-tracefs"), std::string::npos) << c.reason();
  c.start();
  KernelSyscalls k = c.stop();
  EXPECT_FALSE(k.available);
  EXPECT_EQ(k.reason, c.reason());
}

TEST(SyscallCounter, BogusTracepointIdIsRefusedWithTheReason) {
  const auto dir = std::filesystem::temp_directory_path() / "iobench-fake-tracefs";
  std::filesystem::create_directories(dir / "events/raw_syscalls/sys_enter");
  std::ofstream(dir / "events/raw_syscalls/sys_enter/id") << "4294967295\n";
  SyscallCounter c(dir.string());
  EXPECT_FALSE(c.available());
  EXPECT_NE(c.reason().find("perf_event_open(raw_syscalls:sys_enter, id 4294967295)"),
            std::string::npos)
      << c.reason();
  std::filesystem::remove_all(dir);
}

TEST(SyscallCounter, AbsentPerTypeTracepointsAreSkippedAndNamed) {
  const std::string real = find_tracefs();
  if (real.empty()) GTEST_SKIP() << "no tracefs here";
  // Only the total's id exists in this fake tracefs: every per-type event is "missing".
  const auto dir = std::filesystem::temp_directory_path() / "iobench-partial-tracefs";
  std::filesystem::create_directories(dir / "events/raw_syscalls/sys_enter");
  uint64_t id = 0;
  std::ifstream(real + "/events/raw_syscalls/sys_enter/id") >> id;  // tracefs files stat as empty
  std::ofstream(dir / "events/raw_syscalls/sys_enter/id") << id << "\n";
  SyscallCounter c(dir.string());
  if (!c.available()) GTEST_SKIP() << c.reason();
  c.start();
  KernelSyscalls k = c.stop();
  EXPECT_TRUE(k.available);
  EXPECT_EQ(k.missing.size(), counted_syscall_names().size());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace iobench
