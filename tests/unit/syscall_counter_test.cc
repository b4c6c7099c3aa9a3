#include "probe/syscall_counter.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "probe/bpf_counter.h"
#include "probe/placement.h"
#include "probe/task_io_counter.h"

namespace iobench {
namespace {

class EachBackend : public ::testing::TestWithParam<CounterKind> {};

// ThreadSanitizer's runtime has a background thread of its own whose calls (seen: one in a
// window of 1000 writes) are rightly in a whole-process total; the write counts stay exact.
#if defined(__SANITIZE_THREAD__)
constexpr bool kOtherThreadsCall = true;
#else
constexpr bool kOtherThreadsCall = false;
#endif

void expect_total(uint64_t total, uint64_t calls) {
  if (kOtherThreadsCall)
    EXPECT_GE(total, calls);
  else
    EXPECT_EQ(total, calls);
}

// Both backends count exactly what this process did in the window, and nothing of their own
// reading (the disabling ioctl, the bpf() lookups).
TEST_P(EachBackend, CountsWritesExactlyWhereTheKernelAllows) {
  SyscallCounter c(GetParam());
  if (!c.available()) GTEST_SKIP() << "unavailable here: " << c.reason();
  EXPECT_EQ(name_of(c.source()), GetParam() == CounterKind::kBpf ? "bpf" : "perf_event");
  c.start();
  for (int i = 0; i < 1000; ++i) (void)!::write(-1, "", 0);
  KernelSyscalls k = c.stop();
  ASSERT_TRUE(k.available);
  EXPECT_EQ(k.source, c.source());
  uint64_t writes = 0;
  for (const auto& [name, n] : k.by_name)
    if (name == "write") writes = n;
  EXPECT_EQ(writes, 1000u);
  expect_total(k.total, 1000u);
  // Counting again starts from zero.
  c.start();
  (void)!::write(-1, "", 0);
  expect_total(c.stop().total, 1u);
}

// Syscalls of another thread of the process count too (a uring worker, a server's sessions).
TEST_P(EachBackend, CountsThreadsStartedDuringTheWindow) {
  SyscallCounter c(GetParam());
  if (!c.available()) GTEST_SKIP() << "unavailable here: " << c.reason();
  c.start();
  std::thread t([] {
    for (int i = 0; i < 500; ++i) (void)!::write(-1, "", 0);
  });
  t.join();
  KernelSyscalls k = c.stop();
  uint64_t writes = 0;
  for (const auto& [name, n] : k.by_name)
    if (name == "write") writes = n;
  EXPECT_EQ(writes, 500u);
  EXPECT_GE(k.total, 500u) << "clone and the thread's own start-up are in the total";
}

INSTANTIATE_TEST_SUITE_P(SyscallCounter, EachBackend,
                         ::testing::Values(CounterKind::kBpf, CounterKind::kTracepoints),
                         [](const auto& p) {
                           return p.param == CounterKind::kBpf ? "bpf" : "tracepoints";
                         });

TEST(SyscallCounter, AutoPrefersBpfAndSaysWhyNotWhenItFallsBack) {
  SyscallCounter a(CounterKind::kAuto);
  SyscallCounter bpf(CounterKind::kBpf);
  if (bpf.available()) {
    EXPECT_EQ(name_of(a.source()), "bpf");
  } else {
    EXPECT_NE(name_of(a.source()), "bpf");
    EXPECT_FALSE(a.bpf_refusal().empty());
    EXPECT_EQ(a.bpf_refusal(), bpf.reason());
  }
  EXPECT_EQ(counter_kind_from("tracepoints"), CounterKind::kTracepoints);
  EXPECT_EQ(counter_kind_from("taskio"), CounterKind::kTaskIo);
  EXPECT_FALSE(counter_kind_from("ebpf").has_value());
}

TEST(SyscallCounter, MissingTracefsIsReportedNotFatal) {
  SyscallCounter c(CounterKind::kTracepoints, "/nonexistent-tracefs");
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
  SyscallCounter c(CounterKind::kTracepoints, dir.string());
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
  SyscallCounter c(CounterKind::kTracepoints, dir.string());
  if (!c.available()) GTEST_SKIP() << c.reason();
  c.start();
  KernelSyscalls k = c.stop();
  EXPECT_TRUE(k.available);
  EXPECT_EQ(k.missing.size(), counted_syscall_names().size());
  std::filesystem::remove_all(dir);
}

// The program runs on every syscall of the machine only while attached: between windows, an idle
// process (a server waiting for clients) costs the host nothing.
TEST(BpfSyscallCounter, CountsOnlyWhileAttached) {
  auto b = BpfSyscallCounter::open(getpid());
  if (!b) GTEST_SKIP() << "unavailable here: " << b.error().message;
  EXPECT_FALSE((*b)->attached()) << "open() leaves it detached";
  const uint64_t before = (*b)->read(BpfSyscallCounter::kTotal);
  for (int i = 0; i < 100; ++i) (void)!::write(-1, "", 0);
  EXPECT_EQ((*b)->read(BpfSyscallCounter::kTotal), before);
  ASSERT_TRUE((*b)->attach());
  for (int i = 0; i < 100; ++i) (void)!::write(-1, "", 0);
  const uint64_t attached = (*b)->read(BpfSyscallCounter::kTotal);
  EXPECT_EQ(attached - before, 101u) << "100 writes and the reading bpf() call";
  (*b)->detach();
  for (int i = 0; i < 100; ++i) (void)!::write(-1, "", 0);
  EXPECT_EQ((*b)->read(BpfSyscallCounter::kTotal), attached + 1) << "only the detaching close(2)";
  // A SyscallCounter attaches for a window and detaches at disarm(), window after window.
  SyscallCounter c(CounterKind::kBpf);
  EXPECT_FALSE(c.armed());
  for (int round = 0; round < 2; ++round) {
    c.arm();
    EXPECT_TRUE(c.armed());
    c.start();
    (void)!::write(-1, "", 0);
    expect_total(c.stop().total, 1u);
    c.disarm();
    EXPECT_FALSE(c.armed());
  }
}

// Task I/O accounting counts read- and write-family calls the kernel reached (a write to a bad
// descriptor fails before that), every thread of the process, and nothing of its own readings.
TEST(TaskIoCounter, CountsReadsAndWritesExactly) {
  SyscallCounter c(CounterKind::kTaskIo);
  if (!c.available()) GTEST_SKIP() << "unavailable here: " << c.reason();
  EXPECT_EQ(name_of(c.source()), "task_io");
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  const int zero = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(null, 0);
  ASSERT_GE(zero, 0);
  char byte = 0;
  for (int round = 0; round < 2; ++round) {
    c.start();
    for (int i = 0; i < 300; ++i) (void)!::write(null, &byte, 1);
    std::thread t([&] {
      for (int i = 0; i < 200; ++i) (void)!::read(zero, &byte, 1);
    });
    t.join();
    (void)!::write(-1, "", 0);  // EBADF: not a write the kernel reached
    KernelSyscalls k = c.stop();
    ASSERT_TRUE(k.available) << k.reason;
    EXPECT_EQ(name_of(k.source), "task_io");
    EXPECT_EQ(k.by_name,
              (std::vector<std::pair<std::string, uint64_t>>{{"read", 200}, {"write", 300}}));
    EXPECT_EQ(k.total, 500u);
    EXPECT_NE(k.coverage.find("epoll_wait"), std::string::npos) << "says what it cannot see";
  }
  ::close(null);
  ::close(zero);
}

TEST(TaskIoCounter, ParsesTheKernelsTextAndRefusesOthers) {
  auto r = parse_task_io(
      "rchar: 10\nwchar: 20\nsyscr: 3\nsyscw: 4\nread_bytes: 0\nwrite_bytes: 0\n"
      "cancelled_write_bytes: 0\n");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->reads, 3u);
  EXPECT_EQ(r->writes, 4u);
  EXPECT_FALSE(parse_task_io("rchar: 10\nwchar: 20\n"));
  auto bad = parse_task_io("syscr: 3x\nsyscw: 4\n");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("bad syscr value '3x'"), std::string::npos);
}

TEST(TaskIoCounter, AFailedStartReadingIsARefusalNotALifetimeCount) {
  // A file that reads well at open, not at start(), and well again at stop(): without the start
  // reading there is no window, and stop() must say so instead of returning the file's totals.
  const auto path = std::filesystem::temp_directory_path() / "iobench-fake-proc-io";
  const std::string good = "syscr: 1000\nsyscw: 2000\n";
  std::ofstream(path) << good;
  ::setenv("IOBENCH_PROC_IO", path.c_str(), 1);
  SyscallCounter c(CounterKind::kTaskIo);
  ::unsetenv("IOBENCH_PROC_IO");
  ASSERT_TRUE(c.available()) << c.reason();
  std::filesystem::resize_file(path, 0);
  c.start();
  std::ofstream(path) << good;
  KernelSyscalls k = c.stop();
  EXPECT_FALSE(k.available);
  EXPECT_NE(k.reason.find("at the start of the data phase"), std::string::npos) << k.reason;
  EXPECT_NE(k.reason.find("no syscr/syscw lines"), std::string::npos) << k.reason;
  std::filesystem::remove(path);
}

TEST(TaskIoCounter, AnUnreadableFileIsARefusalNamingIt) {
  auto t = TaskIoCounter::open("/nonexistent/io");
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().message, "cannot open /nonexistent/io: No such file or directory");
}

}  // namespace
}  // namespace iobench

namespace iobench {
namespace {

// The kernel's CPU list format, read once for every caller (placement lines, the bpf counter's
// per-CPU maps, the host's busy time).
TEST(CpuList, TheKernelsFormatOneParserForCountAndMembers) {
  EXPECT_EQ(cpu_list("0-3,6\n"), (std::vector<int>{0, 1, 2, 3, 6}));
  EXPECT_EQ(cpu_list_count("0-3,6"), 5);
  EXPECT_EQ(cpu_list_count(""), 0);
  for (const char* bad : {"3-1", "x", "1,,2", "0-"}) {
    EXPECT_TRUE(cpu_list(bad).empty()) << bad;
    EXPECT_EQ(cpu_list_count(bad), 0) << bad;
  }
  // A peer's text is counted, never expanded: a huge range allocates nothing.
  EXPECT_EQ(cpu_list_count("0-99999"), 100000);
  EXPECT_TRUE(cpu_list("0-99999").empty());
}

}  // namespace
}  // namespace iobench
