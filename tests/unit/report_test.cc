#include "report/report.h"

#include <gtest/gtest.h>

#include <sstream>

namespace iobench {
namespace {

proto::SideResult side(bool sender, uint64_t bytes, int64_t wall_ns, int64_t cpu_ns,
                       uint64_t calls) {
  proto::SideResult r;
  r.is_sender = sender;
  r.io.bytes = r.bytes_expected = bytes;
  r.probe.wall_ns = wall_ns;
  r.probe.cpu_ns = cpu_ns;
  r.probe.user_us = cpu_ns / 4000;
  r.probe.sys_us = cpu_ns / 1000 - r.probe.user_us;
  r.io.calls = calls;
  r.engine = "blocking";
  return r;
}

Report sample_report() {
  Report rep;
  rep.context = collect_context();
  rep.options.bufs = {{1024, 1024}, {16384, 65536}};
  rep.options.repeat = 3;
  rep.mode = RunMode::kLoopback;
  rep.payload_source = "resp-v1 seed=1 level=3";
  for (const auto& b : rep.options.bufs) {
    SizeResults s{b, {}, std::nullopt, std::nullopt};
    for (int i = 0; i < 3; ++i) {
      RunRecord r;
      r.run = i;
      r.sender =
          side(true, kGiB, 1'000'000'000 + i * 100'000'000, 500'000'000, kGiB / b.send_bytes);
      r.receiver = side(false, kGiB, 1'000'000'000, 250'000'000 * (i + 1), 1000);
      s.runs.push_back(r);
    }
    rep.sizes.push_back(s);
  }
  return rep;
}

TEST(Report, DerivedFigures) {
  auto f = side_figures(side(true, kGiB, 2'000'000'000, 1'000'000'000, 1024));
  EXPECT_DOUBLE_EQ(f.wall_s, 2.0);
  EXPECT_NEAR(f.throughput_gbps, 8.0 * kGiB / 2e9, 1e-9);
  EXPECT_DOUBLE_EQ(f.throughput_mib_s, 512.0);
  EXPECT_DOUBLE_EQ(f.cpu_s, 1.0);
  EXPECT_DOUBLE_EQ(f.cpu_s_per_gib, 1.0);
  EXPECT_DOUBLE_EQ(f.bytes_per_call, static_cast<double>(kMiB));
  auto zero = side_figures(side(true, 0, 0, 0, 0));
  EXPECT_EQ(zero.throughput_gbps, 0);
  EXPECT_EQ(zero.bytes_per_call, 0);
}

// --repeat auto's stopping rule on runs whose CPU per GiB is known: identical runs are known
// exactly, but not before the fifth; runs spread +-20% are not known to 2%.
TEST(Report, RepeatAutoStopsWhenTheMedianIsKnownAndNotBeforeFiveRuns) {
  auto runs_of = [](std::vector<int64_t> cpu_ns) {
    std::vector<RunRecord> runs;
    for (int64_t c : cpu_ns) {
      RunRecord r;
      r.sender = side(true, kGiB, 1'000'000'000, c, 1000);
      r.receiver = side(false, kGiB, 1'000'000'000, c / 2, 1000);
      runs.push_back(r);
    }
    return runs;
  };
  const RepeatAuto four = repeat_auto_precision(runs_of({500'000'000, 500'000'000, 500'000'000,
                                                         500'000'000}),
                                                0.02);
  EXPECT_EQ(four.runs, 4);
  EXPECT_DOUBLE_EQ(four.sender_ci, 0);
  EXPECT_FALSE(four.reached);
  std::vector<RunRecord> five = runs_of(std::vector<int64_t>(5, 500'000'000));
  EXPECT_TRUE(repeat_auto_precision(five, 0.02).reached);
  // A partial run does not count.
  five.back().partial = true;
  EXPECT_FALSE(repeat_auto_precision(five, 0.02).reached);
  const RepeatAuto spread = repeat_auto_precision(
      runs_of({400'000'000, 600'000'000, 450'000'000, 550'000'000, 500'000'000, 420'000'000,
               580'000'000}),
      0.02);
  EXPECT_GT(spread.sender_ci, 0.02);
  EXPECT_FALSE(spread.reached);
  EXPECT_TRUE(repeat_auto_precision(runs_of({400'000'000, 600'000'000, 450'000'000, 550'000'000,
                                             500'000'000, 420'000'000, 580'000'000}),
                                    0.5)
                  .reached);
}

TEST(Report, MedianMinMax) {
  auto s = stat_of({3, 1, 2});
  EXPECT_EQ(s.median, 2);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 3);
  EXPECT_EQ(stat_of({4, 1, 2, 3}).median, 2.5);
  EXPECT_EQ(stat_of({}).median, 0);
}

TEST(Report, JsonHasSchemaContextRunsAndSummaries) {
  auto j = render_json(sample_report());
  EXPECT_EQ(j["schema_version"], kSchemaVersion);
  for (const char* k :
       {"kernel", "cpu_model", "cpus_online", "compiler", "git_commit", "libraries"})
    EXPECT_TRUE(j["context"].contains(k)) << k;
  EXPECT_TRUE(j["context"]["libraries"].contains("zstd"));
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][1]["label"], "16K/64K");
  EXPECT_EQ(j["results"][0]["runs"].size(), 3u);
  EXPECT_DOUBLE_EQ(j["results"][0]["summary"]["receiver"]["cpu_s"]["median"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["results"][0]["summary"]["receiver"]["cpu_s"]["max"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(j["results"][0]["summary"]["sender"]["wall_s"]["min"].get<double>(), 1.0);
  EXPECT_EQ(j["results"][0]["runs"][0]["sender"]["io_calls"], kMiB);
  EXPECT_EQ(j["sources"]["syscalls"]["source"], "counted");
  EXPECT_EQ(j["options"]["repeat"], 3);
}

TEST(Report, CsvHasOneRowPerSizeSideRun) {
  const std::string csv = render_csv(sample_report());
  std::istringstream in(csv);
  std::string header, line;
  std::getline(in, header);
  EXPECT_EQ(header.rfind("send_buf_bytes,recv_buf_bytes,run,side", 0), 0u);
  const auto columns = std::count(header.begin(), header.end(), ',');
  int rows = 0;
  while (std::getline(in, line)) {
    ++rows;
    EXPECT_EQ(std::count(line.begin(), line.end(), ','), columns) << line;
  }
  EXPECT_EQ(rows, 2 * 2 * 3);
}

TEST(Report, TableHasASenderAndReceiverRowPerSize) {
  const std::string t = render_table(sample_report());
  EXPECT_NE(t.find("cpu_s/GiB"), std::string::npos);
  EXPECT_NE(t.find("    1K sender"), std::string::npos);
  EXPECT_NE(t.find("    1K receiver"), std::string::npos);
  EXPECT_NE(t.find("   16K sender"), std::string::npos);
  EXPECT_NE(t.find("   64K receiver"), std::string::npos);
  EXPECT_NE(t.find("medians"), std::string::npos);
}

}  // namespace
}  // namespace iobench
