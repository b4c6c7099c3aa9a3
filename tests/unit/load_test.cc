#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>
#include <algorithm>
#include <bit>

#include "commands/resp.h"
#include "util/histogram.h"

namespace iobench {
namespace {

TEST(LogLinearHistogram, EveryValueLiesInItsBucketsRangeWithinTwoDigits) {
  for (uint64_t v : {1ull, 127ull, 128ull, 255ull, 256ull, 257ull, 1000ull, 65535ull, 1ull << 20,
                     123456789ull, 3'600'000'000'000ull}) {
    const uint32_t i = hdr::index_of(v);
    EXPECT_LE(hdr::lowest_at(i), v) << v;
    EXPECT_GE(hdr::highest_at(i), v) << v;
    // Two significant digits: a bucket is at most 1/128 of its values wide.
    EXPECT_LE(static_cast<double>(hdr::highest_at(i) - hdr::lowest_at(i) + 1),
              std::max(1.0, static_cast<double>(v) / 128.0)) << v;
    EXPECT_EQ(hdr::index_of(hdr::lowest_at(i)), i);
    EXPECT_EQ(hdr::index_of(hdr::highest_at(i)), i);
  }
  // Consecutive indexes tile the values with no gap.
  for (uint32_t i = 0; i < 5000; ++i) EXPECT_EQ(hdr::highest_at(i) + 1, hdr::lowest_at(i + 1));
}

TEST(LogLinearHistogram, QuantilesMatchTheSortedValuesWithinABucket) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> d(11, 1.2);  // ~60 µs median, a long tail, in ns
  std::vector<uint64_t> values;
  LogLinearHistogram h, a, b;
  for (int i = 0; i < 100000; ++i) {
    const auto v = static_cast<uint64_t>(d(rng)) + 1;
    values.push_back(v);
    h.record(v);
    (i % 2 ? a : b).record(v);
  }
  std::sort(values.begin(), values.end());
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    const uint64_t exact = values[static_cast<size_t>(std::ceil(q * static_cast<double>(values.size()))) - 1];
    const uint64_t got = h.at_quantile(q);
    EXPECT_EQ(hdr::index_of(got), hdr::index_of(exact)) << q;
  }
  EXPECT_EQ(h.max(), values.back());
  EXPECT_EQ(h.at_quantile(1), values.back());
  a.add(b);  // two halves merged: the same histogram
  EXPECT_EQ(a.buckets(), h.buckets());
  EXPECT_EQ(a.count(), h.count());
}

// The index `iobench watch --event-loop`'s kernel program computes without a count-leading-zeros
// instruction (bpf_loop_programs.cc): bucket = floor(log2(v | 255)) - 7, index = bucket x 128 +
// (v >> bucket). It must be HdrHistogram's, for the report to read the kernel's counts.
TEST(LogLinearHistogram, TheKernelsIndexFormulaIsHdrHistograms) {
  std::mt19937_64 rng(7);
  for (int k = 0; k < 100000; ++k) {
    const uint64_t v = (rng() >> (rng() % 64)) | 1;
    const uint64_t m = v | 255;
    const int log2 = 63 - std::countl_zero(m);
    const int bucket = log2 - 7;
    const uint64_t index = (static_cast<uint64_t>(bucket) << 7) + (v >> bucket);
    ASSERT_EQ(index, hdr::index_of(v)) << v;
  }
}

TEST(LogLinearHistogram, ReadBackFromBucketsWithItsExactMaximum) {
  LogLinearHistogram h;
  for (uint64_t v : {900ull, 2000ull, 2010ull, 8'000'000ull}) h.record(v);
  const auto back = LogLinearHistogram::from_buckets(h.buckets(), 8'000'000);
  EXPECT_EQ(back.count(), 4u);
  EXPECT_EQ(back.max(), 8'000'000u);
  EXPECT_EQ(back.at_quantile(0.5), h.at_quantile(0.5));
  EXPECT_EQ(back.at_quantile(1.0), 8'000'000u);
  EXPECT_LE(back.min(), 900u);
  EXPECT_EQ(LogLinearHistogram::from_buckets({}, 5).max(), 0u);
}

TEST(Resp, CommandsAreArraysOfBulkStrings) {
  std::string out;
  append_resp_command(out, {"SET", "key:1", "xyz"});
  EXPECT_EQ(out, "*3\r\n$3\r\nSET\r\n$5\r\nkey:1\r\n$3\r\nxyz\r\n");
}

TEST(Resp, RepliesAreFramedWholeOrNotAtAll) {
  EXPECT_EQ(frame_resp_reply("+OK\r\n").length, 5u);
  EXPECT_EQ(frame_resp_reply("+OK\r").length, 0u);
  EXPECT_EQ(frame_resp_reply("$-1\r\n+OK\r\n").length, 5u);
  EXPECT_EQ(frame_resp_reply("$3\r\nabc\r\n").length, 9u);
  EXPECT_EQ(frame_resp_reply("$3\r\nabc\r").length, 0u);
  EXPECT_EQ(frame_resp_reply("*2\r\n$1\r\na\r\n:5\r\n").length, 15u);
  EXPECT_EQ(frame_resp_reply("*2\r\n$1\r\na\r\n").length, 0u);
  const RespReply err = frame_resp_reply("-ERR unknown\r\n");
  EXPECT_EQ(err.length, 14u);
  EXPECT_TRUE(err.error);
  EXPECT_TRUE(frame_resp_reply("hello\r\n").malformed);
  EXPECT_TRUE(frame_resp_reply("$x\r\n").malformed);
  std::string deep;
  for (int i = 0; i < 40; ++i) deep += "*1\r\n";
  EXPECT_TRUE(frame_resp_reply(deep + ":1\r\n").malformed);  // nesting past 16: refused
}

TEST(Resp, ALengthPastTheBoundIsRefusedAtItsHeader) {
  EXPECT_EQ(frame_resp_reply("$9223372036854775000\r\n", 1 << 20).too_large,
            9223372036854775000ull);
  EXPECT_EQ(frame_resp_reply("$9223372036854775000\r\n", 1 << 20).length, 0u);
  EXPECT_EQ(frame_resp_reply("*2\r\n$2000\r\n", 1024).too_large, 2000u);  // nested too
  EXPECT_EQ(frame_resp_reply("$3\r\nabc\r\n", 3).too_large, 0u);
  EXPECT_EQ(frame_resp_reply("$3\r\nabc\r\n", 3).length, 9u);
}

}  // namespace
}  // namespace iobench
