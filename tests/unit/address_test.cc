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

}  // namespace
}  // namespace iobench
