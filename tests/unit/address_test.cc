#include "net/address.h"

#include <gtest/gtest.h>

namespace iobench {
namespace {

TEST(HostPort, Forms) {
  auto a = parse_host_port("127.0.0.1:5210", "--connect", 1, false);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 5210);
  a = parse_host_port("[::1]:80", "--connect", 1, false);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->str(), "[::1]:80");
  a = parse_host_port("example.com", "--connect", 7, false);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->port, 7);
  a = parse_host_port("::1", "--listen", 7, false);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "::1");
  EXPECT_TRUE(parse_host_port("127.0.0.1:0", "--listen", 7, true));
}

TEST(HostPort, Rejects) {
  for (const char* bad :
       {"", ":80", "h:", "h:99999", "h:-1", "h:8x", "[::1", "[::1]x", "h/x:1", "h:0"}) {
    auto a = parse_host_port(bad, "--connect", 1, false);
    ASSERT_FALSE(a) << bad;
    EXPECT_NE(a.error().message.find(std::string("'") + bad + "'"), std::string::npos);
  }
}

TEST(NetworkBlock, CountsAddressesByTheirBlock) {
  EXPECT_EQ(network_block("203.0.113.77:5210", 24, 64), "203.0.113.0/24");
  EXPECT_EQ(network_block("203.0.113.77:5210", 32, 64), "203.0.113.77/32");
  EXPECT_EQ(network_block("203.0.113.77:1", 20, 64), "203.0.112.0/20");
  EXPECT_EQ(network_block("[2001:db8:1:2:3:4:5:6]:5210", 24, 64), "2001:db8:1:2::/64");
  EXPECT_EQ(network_block("[2001:db8:1:2:3:4:5:6]:5210", 24, 128), "2001:db8:1:2:3:4:5:6/128");
  EXPECT_EQ(network_block("[2001:db8:1:2ff:3:4:5:6]:5210", 24, 56), "2001:db8:1:200::/56");
  // An IPv4 client on a dual-stack socket is counted as IPv4.
  EXPECT_EQ(network_block("[::ffff:198.51.100.9]:80", 24, 64), "198.51.100.0/24");
  // Two addresses of one /64 are one source; of two /64s, two.
  EXPECT_EQ(network_block("[2001:db8::1]:1", 24, 64), network_block("[2001:db8::ffff:2]:9", 24, 64));
  EXPECT_NE(network_block("[2001:db8::1]:1", 24, 64), network_block("[2001:db8:0:1::1]:1", 24, 64));
  EXPECT_EQ(network_block("?", 24, 64), "?");  // unparsable: its own block
}

}  // namespace
}  // namespace iobench
