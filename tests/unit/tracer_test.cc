#include "probe/tracer.h"

#include <unistd.h>

#include <cstdlib>

#include <gtest/gtest.h>

namespace iobench {
namespace {

TEST(TracerParse, StraceSummary) {
  const std::string text = R"(% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 71.24    0.001701          25      2050           write
 15.24    0.001221          11        68         1 read
  2.00    0.000010           5         2           getsockopt
------ ----------- ----------- --------- --------- ----------------
100.00    0.002932          13      2120         1 total
)";
  auto c = parse_strace_summary(text);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->tool, TracerTool::kStrace);
  EXPECT_EQ(c->total, 2120u);
  ASSERT_EQ(c->by_name.size(), 3u);
  EXPECT_EQ(c->by_name[0], (std::pair<std::string, uint64_t>{"write", 2050}));
  EXPECT_EQ(c->by_name[1].second, 68u);
}

TEST(TracerParse, StraceGarbageIsAnError) {
  EXPECT_FALSE(parse_strace_summary("------\n 1 2 3 four five six\n"));
  auto empty = parse_strace_summary("");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->total, 0u);
}

TEST(TracerParse, PerfStatCsv) {
  const std::string text =
      "# started on Sun Nov 22 11:59:00 2026\n\n"
      "2134,,raw_syscalls:sys_enter,1000,100.00,,\n"
      "2050,,syscalls:sys_enter_write,1000,100.00,,\n"
      "<not counted>,,syscalls:sys_enter_read,0,100.00,,\n"
      "0,,syscalls:sys_enter_poll,1000,100.00,,\n";
  auto c = parse_perf_stat_csv(text);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->total, 2134u);
  ASSERT_EQ(c->by_name.size(), 1u);
  EXPECT_EQ(c->by_name[0].first, "write");
  EXPECT_FALSE(parse_perf_stat_csv("# started\n\n"));
  EXPECT_FALSE(parse_perf_stat_csv("12x,,raw_syscalls:sys_enter,1,1,,\n"));
}

TEST(Tracer, MissingToolIsAClearError) {
  // A PATH without the tool: the exec fails and the error names the tool.
  const char* old = std::getenv("PATH");
  const std::string saved = old ? old : "";
  ::setenv("PATH", "/nonexistent-iobench-dir", 1);
  auto t = Tracer::attach(TracerTool::kStrace, getpid(), "/tmp/iobench-tracer-test");
  ::setenv("PATH", saved.c_str(), 1);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().message, "--syscalls strace: strace not found on PATH");
  EXPECT_EQ(name_of(TracerTool::kPerf), "perf");
}

}  // namespace
}  // namespace iobench
