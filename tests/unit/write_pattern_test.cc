// --write-pattern: sizes in turn, tails drawn from their range, a watch report's sizes in
// proportion, reproducible from the seed; bad specs refused naming the bad part.
#include "engine/write_pattern.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace iobench {
namespace {

TEST(WritePattern, SizesInTurn) {
  auto p = WritePattern::parse("16k,1000", 1);
  ASSERT_TRUE(p) << p.error().message;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(p->next(), 16384u);
    EXPECT_EQ(p->next(), 1000u);
  }
  EXPECT_DOUBLE_EQ(p->mean(), (16384.0 + 1000.0) / 2);
}

TEST(WritePattern, ATailIsDrawnFromItsRangeAndTheSeedRepeatsIt) {
  auto a = WritePattern::parse("16384+tail:1-17", 7), b = WritePattern::parse("16384+tail:1-17", 7);
  ASSERT_TRUE(a && b);
  std::map<uint64_t, int> tails;
  for (int i = 0; i < 2000; ++i) {
    EXPECT_EQ(a->next(), 16384u);
    const uint64_t t = a->next();
    EXPECT_EQ(b->next(), 16384u);
    EXPECT_EQ(b->next(), t);
    ASSERT_TRUE(t >= 1 && t <= 17) << t;
    ++tails[t];
  }
  EXPECT_EQ(tails.size(), 17u);  // every size of the range came up
  EXPECT_DOUBLE_EQ(a->mean(), (16384.0 + 9.0) / 2);
}

TEST(WritePattern, AWatchReportsBusiestSocketWriterInProportion) {
  const auto path = std::filesystem::temp_directory_path() / "iobench-pattern-watch.json";
  std::ofstream(path) << R"({"watch": {"processes": [
    {"io": [{"fd_kind": "tcp", "family": "write", "bytes": 10, "sizes": [{"result": 5, "calls": 2}]}]},
    {"io": [{"fd_kind": "socket", "family": "write", "bytes": 98560,
             "sizes": [{"result": 16384, "calls": 3}, {"result": 16384, "calls": 3},
                       {"result": 64, "calls": 6}, {"result": -11, "calls": 9}]},
            {"fd_kind": "file", "family": "write", "bytes": 999999999,
             "sizes": [{"result": 4096, "calls": 100}]}]}]}})";
  std::string spec = "@";
  spec += path.string();  // (not "@" + string: GCC 12's -Wrestrict misfires on it at -O3)
  auto p = WritePattern::parse(spec, 3);
  ASSERT_TRUE(p) << p.error().message;
  std::map<uint64_t, int> seen;
  for (int i = 0; i < 12000; ++i) ++seen[p->next()];
  ASSERT_EQ(seen.size(), 2u);  // the file and the other process's writes are not the socket's
  EXPECT_NEAR(seen[16384], 6000, 300);
  EXPECT_NEAR(seen[64], 6000, 300);
  EXPECT_DOUBLE_EQ(p->mean(), (16384.0 + 64.0) / 2);
  std::filesystem::remove(path);
}

TEST(WritePattern, BadSpecsNameTheirFault) {
  for (const auto& [spec, says] : std::vector<std::pair<std::string, std::string>>{
           {"", "expected e.g. 16384+tail:1-17"},
           {"16k,abc", "'abc' is not a size"},
           {"16384+tail:9-2", "tail range 9-2 is reversed"},
           {"0", "'0' is not a size"},
           {"@/nonexistent/watch.json", "cannot read it"}}) {
    auto p = WritePattern::parse(spec, 1);
    ASSERT_FALSE(p) << spec;
    EXPECT_NE(p.error().message.find(says), std::string::npos) << p.error().message;
    EXPECT_NE(p.error().message.find("invalid --write-pattern"), std::string::npos);
  }
}

}  // namespace
}  // namespace iobench
