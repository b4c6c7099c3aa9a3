#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "proto/codec.h"
#include "proto/messages.h"

namespace iobench::proto {
namespace {

Result<Message> roundtrip(const std::vector<std::byte>& frame) {
  auto h = decode_header(std::span(frame).first(kHeaderBytes));
  if (!h) return std::unexpected(h.error());
  return decode_body(*h, std::span(frame).subspan(kHeaderBytes));
}

TEST(Proto, HelloRoundTrip) {
  Hello h;
  h.client_sends = false;
  h.bytes = 123456789;
  h.send_buf_bytes = 1024;
  h.recv_buf_bytes = 65536;
  h.socket.sndbuf = 1 << 20;
  h.socket.nodelay = false;
  h.decompress = true;
  h.seed = 42;
  h.zstd_level = 9;
  h.proto = "tcp";
  h.engine = "blocking";
  h.timeout_s = 2.5;
  auto m = roundtrip(encode(h));
  ASSERT_TRUE(m) << m.error().message;
  const auto& g = std::get<Hello>(*m);
  EXPECT_EQ(g.client_sends, false);
  EXPECT_EQ(g.bytes, h.bytes);
  EXPECT_EQ(g.recv_buf_bytes, 65536u);
  EXPECT_EQ(g.socket.sndbuf, 1u << 20);
  EXPECT_EQ(g.socket.nodelay, false);
  EXPECT_EQ(g.decompress, true);
  EXPECT_EQ(g.seed, 42u);
  EXPECT_EQ(g.zstd_level, 9);
  EXPECT_EQ(g.engine, "blocking");
  EXPECT_EQ(g.timeout_s, 2.5);
}

TEST(Proto, ResultRoundTrip) {
  SideResult r;
  r.is_sender = false;
  r.io.bytes = r.bytes_expected = 100;
  r.probe.wall_ns = 5;
  r.probe.cpu_ns = -1;
  r.io.calls = 77;
  r.xxh3 = 0xdeadbeefcafef00d;
  r.decoded = true;
  r.decoded_bytes = 1000;
  r.socket.mtu_bytes = 9001;
  r.engine = "blocking";
  r.error = "boom";
  auto m = roundtrip(encode(r));
  ASSERT_TRUE(m) << m.error().message;
  const auto& g = std::get<SideResult>(*m);
  EXPECT_EQ(g.is_sender, false);
  EXPECT_EQ(g.probe.cpu_ns, -1);
  EXPECT_EQ(g.io.calls, 77u);
  EXPECT_EQ(g.xxh3, r.xxh3);
  EXPECT_EQ(g.socket.mtu_bytes, 9001);
  EXPECT_EQ(g.error, "boom");
  EXPECT_TRUE(g.decoded);
}

TEST(Proto, AckAndErrorRoundTrip) {
  auto a = roundtrip(encode(Ack{"0.1.0"}));
  ASSERT_TRUE(a);
  EXPECT_EQ(std::get<Ack>(*a).server_version, "0.1.0");
  auto e = roundtrip(encode(ErrorMsg{std::string(5000, 'e')}));
  ASSERT_TRUE(e);
  EXPECT_EQ(std::get<ErrorMsg>(*e).message.size(), kMaxStringBytes) << "long strings are cut";
}

TEST(Proto, ProgressRoundTrip) {
  auto m = roundtrip(encode(Progress{3 << 20, 1ull << 32, 1'500'000'000}));
  ASSERT_TRUE(m) << m.error().message;
  const auto& p = std::get<Progress>(*m);
  EXPECT_EQ(p.done_bytes, 3u << 20);
  EXPECT_EQ(p.total_bytes, 1ull << 32);
  EXPECT_EQ(p.elapsed_ns, 1'500'000'000);
  EXPECT_STREQ(type_name(*m), "PROGRESS");
}

std::vector<std::byte> bytes_of(std::string_view s) {
  std::vector<std::byte> v;
  for (char c : s) v.push_back(static_cast<std::byte>(c));
  return v;
}

TEST(Proto, HeaderRejectsStrangers) {
  auto http = decode_header(bytes_of("GET / HTTP/1.1\r\n"));
  ASSERT_FALSE(http);
  EXPECT_NE(http.error().message.find("not an iobench peer"), std::string::npos);
  EXPECT_NE(http.error().message.find("GET / HTTP"), std::string::npos);

  auto frame = encode(Ack{"x"});
  frame[4] = std::byte{99};  // version
  auto v = decode_header(std::span(frame).first(kHeaderBytes));
  ASSERT_FALSE(v);
  EXPECT_NE(v.error().message.find("version 99"), std::string::npos);
  EXPECT_NE(v.error().message.find(fmt::format("speaks {}", kVersion)), std::string::npos)
      << "the refusal names both versions";

  frame = encode(Ack{"x"});
  frame[6] = std::byte{77};  // type
  EXPECT_FALSE(decode_header(std::span(frame).first(kHeaderBytes)));

  frame = encode(Ack{"x"});
  frame[8] = frame[9] = frame[10] = frame[11] = std::byte{0xff};  // 4 GiB body
  auto huge = decode_header(std::span(frame).first(kHeaderBytes));
  ASSERT_FALSE(huge);
  EXPECT_NE(huge.error().message.find("exceeds limit"), std::string::npos);
  EXPECT_FALSE(decode_header(std::span(frame).first(5)));
}

TEST(Proto, BodyRejectsWrongLayouts) {
  auto frame = encode(Hello{});
  auto h = decode_header(std::span(frame).first(kHeaderBytes));
  ASSERT_TRUE(h);
  auto body = std::span(frame).subspan(kHeaderBytes);
  // Truncated.
  FrameHeader shorter = *h;
  shorter.body_bytes -= 3;
  EXPECT_FALSE(decode_body(shorter, body.first(shorter.body_bytes)));
  // Trailing bytes.
  std::vector<std::byte> longer(body.begin(), body.end());
  longer.push_back(std::byte{0});
  FrameHeader lh = *h;
  lh.body_bytes += 1;
  auto t = decode_body(lh, longer);
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("trailing"), std::string::npos);
  // A boolean that is neither 0 nor 1 (type confusion).
  std::vector<std::byte> badbool(body.begin(), body.end());
  badbool[0] = std::byte{7};
  EXPECT_FALSE(decode_body(*h, badbool));
  // Length mismatch between header and body.
  EXPECT_FALSE(decode_body(*h, body.first(2)));
}

TEST(Proto, StringLengthIsBoundedBeforeCopy) {
  Writer w;
  w.u16(60000);  // claims a 60000-byte string in a 2-byte body
  Reader r(w.bytes());
  auto s = r.str(kMaxStringBytes);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("exceeds limit"), std::string::npos);
}

TEST(Proto, RandomInputNeverCrashes) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::byte> buf(rng() % 200);
    for (auto& b : buf) b = static_cast<std::byte>(rng());
    if (buf.size() >= 4 && rng() % 2) std::copy(kMagic.begin(), kMagic.end(), buf.begin());
    if (buf.size() >= 6 && rng() % 2) buf[4] = std::byte{1}, buf[5] = std::byte{0};
    auto h = decode_header(buf);
    if (!h || buf.size() < kHeaderBytes) continue;
    auto body = std::span(buf).subspan(kHeaderBytes);
    FrameHeader fh = *h;
    fh.body_bytes = static_cast<uint32_t>(body.size());
    (void)decode_body(fh, body);
  }
}

}  // namespace
}  // namespace iobench::proto
