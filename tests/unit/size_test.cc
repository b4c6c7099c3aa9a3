#include "util/size.h"

#include <gtest/gtest.h>

#include "cli/options.h"

namespace iobench {
namespace {

TEST(ParseSize, AcceptsPlainAndBinaryUnits) {
  struct Case {
    const char* text;
    uint64_t want;
  };
  for (auto c : {Case{"512", 512},
                 {"1k", 1024},
                 {"16K", 16384},
                 {"64KiB", 65536},
                 {"1m", 1 << 20},
                 {"100M", 100u << 20},
                 {"104857600", 104857600},
                 {"100MiB", 100u << 20},
                 {"1GiB", 1u << 30},
                 {"2g", 2ull << 30},
                 {"64B", 64},
                 {"1.5G", 1536ull << 20},
                 {"1.5k", 1536},
                 {"0.5M", 512u << 10}}) {
    auto v = parse_size(c.text, "--buf", 1, 4 * kGiB);
    ASSERT_TRUE(v) << c.text << ": " << v.error().message;
    EXPECT_EQ(*v, c.want) << c.text;
  }
}

TEST(ParseSize, RejectsMalformedWithTheValueInTheMessage) {
  for (const char* bad : {"16q", "0", "-1", "1e9", "17m", "", "k", "1.3k", "1.", "1.k", " 1k", "1k ",
                          "99999999999999999999", "18446744073709551615k"}) {
    auto v = parse_size(bad, "--buf", kMinBuf, kMaxBuf);
    ASSERT_FALSE(v) << bad;
    EXPECT_NE(v.error().message.find(std::string("'") + bad + "'"), std::string::npos)
        << v.error().message;
    EXPECT_NE(v.error().message.find("--buf"), std::string::npos);
  }
}

TEST(ParseSize, RangeBoundsAreInclusive) {
  EXPECT_TRUE(parse_size("64", "--buf", kMinBuf, kMaxBuf));
  EXPECT_FALSE(parse_size("63", "--buf", kMinBuf, kMaxBuf));
  EXPECT_TRUE(parse_size("16m", "--buf", kMinBuf, kMaxBuf));
  EXPECT_FALSE(parse_size("16385k", "--buf", kMinBuf, kMaxBuf));
}

TEST(ParseSizeList, KeepsOrderAndRejectsAnyBadItem) {
  auto v = parse_size_list("1k,4k,8k,16k,64k", "--buf", kMinBuf, kMaxBuf);
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, (std::vector<uint64_t>{1024, 4096, 8192, 16384, 65536}));
  EXPECT_FALSE(parse_size_list("1k,,4k", "--buf", kMinBuf, kMaxBuf));
  EXPECT_FALSE(parse_size_list("1k,4q", "--buf", kMinBuf, kMaxBuf));
  EXPECT_FALSE(parse_size_list("1k,", "--buf", kMinBuf, kMaxBuf));
}

TEST(FormatSize, ShortestExactSpelling) {
  EXPECT_EQ(format_size(1024), "1K");
  EXPECT_EQ(format_size(65536), "64K");
  EXPECT_EQ(format_size(1 << 20), "1M");
  EXPECT_EQ(format_size(1500), "1500");
  EXPECT_EQ(format_size(3ull << 30), "3G");
}

std::vector<const char*> argv_of(std::initializer_list<const char*> args) {
  std::vector<const char*> v{"iobench"};
  v.insert(v.end(), args);
  return v;
}

TEST(CommandLine, BufListsPairUp) {
  auto a = argv_of({"--buf", "1k,4k", "--recv-buf", "16k"});
  auto cmd = parse_command_line(static_cast<int>(a.size()), a.data());
  ASSERT_TRUE(cmd) << cmd.error().message;
  const auto& o = std::get<ClientOptions>(*cmd);
  ASSERT_EQ(o.bufs.size(), 2u);
  EXPECT_EQ(o.bufs[0].send_bytes, 1024u);
  EXPECT_EQ(o.bufs[1].send_bytes, 4096u);
  EXPECT_EQ(o.bufs[1].recv_bytes, 16384u);
  EXPECT_EQ(o.payload.bytes, 100 * kMiB);
  EXPECT_TRUE(o.connect.empty());
}

TEST(CommandLine, DefaultsTo16KAnd100MiB) {
  auto a = argv_of({});
  auto cmd = parse_command_line(static_cast<int>(a.size()), a.data());
  ASSERT_TRUE(cmd);
  const auto& o = std::get<ClientOptions>(*cmd);
  ASSERT_EQ(o.bufs.size(), 1u);
  EXPECT_EQ(o.bufs[0].send_bytes, 16 * kKiB);
  EXPECT_EQ(o.payload.bytes, 100 * kMiB);
  EXPECT_TRUE(o.socket.nodelay);
}

TEST(CommandLine, Subcommands) {
  auto s = argv_of({"server", "--listen", "0.0.0.0:6000", "--handshake-timeout", "2"});
  auto cmd = parse_command_line(static_cast<int>(s.size()), s.data());
  ASSERT_TRUE(cmd);
  EXPECT_EQ(std::get<ServerOptions>(*cmd).handshake_timeout_s, 2);
  auto c = argv_of({"client", "--connect", "h:1", "-R", "--bytes", "1M"});
  cmd = parse_command_line(static_cast<int>(c.size()), c.data());
  ASSERT_TRUE(cmd);
  EXPECT_TRUE(std::get<ClientOptions>(*cmd).reverse);
  EXPECT_EQ(std::get<ClientOptions>(*cmd).payload.bytes, kMiB);
}

TEST(CommandLine, ErrorsNameTheBadValue) {
  struct Case {
    std::vector<const char*> args;
    const char* needle;
  };
  for (const auto& c : std::vector<Case>{{{"--bogus"}, "--bogus"},
                                         {{"--buf", "16q"}, "16q"},
                                         {{"--send-buf", "17m"}, "17m"},
                                         {{"--bytes", "1e9"}, "1e9"},
                                         {{"--repeat", "0"}, "'0'"},
                                         {{"--proto", "udp"}, "udp"},
                                         {{"--engine", "aio"}, "aio"},
                                         {{"--sndbuf", "2g"}, "2g"},
                                         {{"server", "--idle-timeout", "-1"}, "-1"},
                                         {{"--buf", "1k", "server"}, "--buf"}}) {
    auto a = argv_of({});
    a.insert(a.end(), c.args.begin(), c.args.end());
    auto cmd = parse_command_line(static_cast<int>(a.size()), a.data());
    ASSERT_FALSE(cmd) << c.needle;
    EXPECT_NE(cmd.error().message.find(c.needle), std::string::npos) << cmd.error().message;
    EXPECT_EQ(cmd.error().message.find('\n'), std::string::npos) << "one line";
  }
}

}  // namespace
}  // namespace iobench
