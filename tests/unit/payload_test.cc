#include "payload/payload.h"

#include <gtest/gtest.h>
#include <zstd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "payload/cache.h"
#include "payload/frames.h"
#include "payload/resp_generator.h"
#include "payload/verifier.h"
#include "payload/window.h"
#include "payload/window_cache.h"
#include "payload/xxh3_fast.h"

namespace iobench {
namespace {

PayloadSpec spec_of(uint64_t bytes, uint64_t seed = 1) {
  PayloadSpec s;
  s.bytes = bytes;
  s.seed = seed;
  return s;
}

std::string decode_all(const Payload& p) {
  std::string out(p.decoded_bytes, '\0');
  size_t n = ZSTD_decompress(out.data(), out.size(), p.bytes().data(), p.bytes().size());
  EXPECT_FALSE(ZSTD_isError(n)) << ZSTD_getErrorName(n);
  out.resize(ZSTD_isError(n) ? 0 : n);
  return out;
}

// Parses RESP arrays of bulk strings; returns command name counts, or fails the test.
std::map<std::string, int> parse_commands(const std::string& s) {
  std::map<std::string, int> names;
  size_t pos = 0;
  auto read_line = [&]() {
    size_t end = s.find("\r\n", pos);
    EXPECT_NE(end, std::string::npos);
    std::string line = s.substr(pos, end - pos);
    pos = end + 2;
    return line;
  };
  while (pos < s.size()) {
    std::string hdr = read_line();
    if (hdr.empty() || hdr[0] != '*') {
      ADD_FAILURE() << "expected array at " << pos;
      return names;
    }
    const int n = std::stoi(hdr.substr(1));
    for (int i = 0; i < n; ++i) {
      std::string len = read_line();
      if (len.empty() || len[0] != '$') {
        ADD_FAILURE() << "expected bulk at " << pos;
        return names;
      }
      const size_t l = std::stoul(len.substr(1));
      std::string arg = s.substr(pos, l);
      EXPECT_EQ(s.substr(pos + l, 2), "\r\n");
      pos += l + 2;
      if (i == 0) ++names[arg];
    }
  }
  return names;
}

// Cache files being written count against --cache-max beside each other (issue #88: eight
// builds' temporary files stood 7.9 GiB on disk against 6 GiB).
TEST(CacheWrite, WritesInFlightStayInsideTheBound) {
  const uint64_t before = CacheWrite::in_flight();
  {
    const CacheWrite a = CacheWrite::reserve(4, 6);
    ASSERT_TRUE(a);
    EXPECT_EQ(CacheWrite::in_flight(), before + 4);
    EXPECT_FALSE(CacheWrite::reserve(4, 6));  // 8 in flight against 6: not written
    const CacheWrite b = CacheWrite::reserve(2, 6);
    EXPECT_TRUE(b);
    EXPECT_FALSE(CacheWrite::reserve(1, 6));
  }
  EXPECT_EQ(CacheWrite::in_flight(), before);  // given back as each write ends
  EXPECT_TRUE(CacheWrite::reserve(6, 6));
  EXPECT_FALSE(CacheWrite::reserve(7, 6));
}

TEST(Payload, ExactSizeForAnyByteCount) {
  for (uint64_t bytes : {64ull, 65ull, 100ull, 1000ull, 4096ull, 65537ull, (1ull << 20) + 7}) {
    auto p = build_payload(spec_of(bytes));
    ASSERT_TRUE(p) << p.error().message;
    EXPECT_EQ(p->bytes().size(), bytes);
    EXPECT_EQ(decode_all(*p).size(), p->decoded_bytes);
  }
}

TEST(Payload, DeterministicPerSeed) {
  auto a = build_payload(spec_of(300000, 7));
  auto b = build_payload(spec_of(300000, 7));
  auto c = build_payload(spec_of(300000, 8));
  ASSERT_TRUE(a && b && c);
  EXPECT_TRUE(std::ranges::equal(a->bytes(), b->bytes()));
  EXPECT_EQ(a->xxh3, b->xxh3);
  EXPECT_NE(a->xxh3, c->xxh3);
  EXPECT_EQ(a->xxh3, checksum(a->bytes()));
}

TEST(Payload, DecodesToWholeReplicationCommands) {
  auto p = build_payload(spec_of(4 << 20));
  ASSERT_TRUE(p);
  const std::string raw = decode_all(*p);
  EXPECT_GT(raw.size(), p->bytes().size()) << "zstd should compress the stream";
  auto names = parse_commands(raw);
  const std::set<std::string> allowed{"SELECT", "SET", "HSET",      "RPUSH", "ZADD",
                                      "INCRBY", "DEL", "PEXPIREAT", "MULTI", "EXEC"};
  for (const auto& [name, count] : names) EXPECT_TRUE(allowed.count(name)) << name;
  for (const auto& name : allowed) EXPECT_GT(names[name], 0) << name << " never generated";
  EXPECT_EQ(names["MULTI"], names["EXEC"]);
}

TEST(Payload, PaddingIsASkippableFrame) {
  auto p = build_payload(spec_of(5000));
  ASSERT_TRUE(p);
  // Walk frames: the last one must be skippable (magic 0x184D2A5?) and end exactly at the size.
  size_t pos = 0, last = 0;
  while (pos < p->bytes().size()) {
    last = pos;
    size_t n = ZSTD_findFrameCompressedSize(p->bytes().data() + pos, p->bytes().size() - pos);
    ASSERT_FALSE(ZSTD_isError(n));
    pos += n;
  }
  EXPECT_EQ(pos, p->bytes().size());
  EXPECT_EQ(static_cast<uint8_t>(p->bytes()[last + 3]), 0x18);
  EXPECT_EQ(static_cast<uint8_t>(p->bytes()[last + 2]), 0x4D);
}

TEST(Payload, FileSourceCyclesTheFile) {
  const auto dir = std::filesystem::temp_directory_path() / "iobench-payload-test";
  std::filesystem::create_directories(dir);
  const auto file = dir / "dump.bin";
  {
    std::ofstream out(file, std::ios::binary);
    out << "REDIS0011 some rdb-like content " << std::string(1000, 'x');
  }
  // 20000 compressed bytes take ~20 MB of the file's cycles: its repeats compress ~1000:1
  // (200000 took 43 s under ThreadSanitizer).
  PayloadSpec s = spec_of(20000);
  s.file = file.string();
  s.cache_dir = (dir / "cache").string();
  auto p = load_payload(s);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->bytes().size(), 20000u);
  EXPECT_GT(p->decoded_bytes, 100u * 1033u) << "the file's 1033 bytes, cycled";
  EXPECT_FALSE(p->from_cache);
  EXPECT_NE(decode_all(*p).find("REDIS0011"), std::string::npos);
  auto again = load_payload(s);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->from_cache);
  EXPECT_EQ(again->xxh3, p->xxh3);
  std::filesystem::remove_all(dir);
}

TEST(Payload, CacheRebuildsAWrongSizedFile) {
  const auto dir = std::filesystem::temp_directory_path() / "iobench-cache-test";
  std::filesystem::remove_all(dir);
  PayloadSpec s = spec_of(100000);
  s.cache_dir = dir.string();
  auto path = payload_cache_path(s);
  ASSERT_TRUE(path);
  std::filesystem::create_directories(dir);
  { std::ofstream(*path) << "truncated"; }
  auto p = load_payload(s);
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->from_cache);
  EXPECT_EQ(std::filesystem::file_size(*path), 100000u);
  auto q = load_payload(s);
  ASSERT_TRUE(q);
  EXPECT_TRUE(q->from_cache);
  EXPECT_TRUE(std::ranges::equal(q->bytes(), p->bytes()));
  std::filesystem::remove_all(dir);
}

TEST(Payload, MissingFileIsAClearError) {
  PayloadSpec s = spec_of(1000);
  s.file = "/nonexistent/dump.rdb";
  auto p = load_payload(s);
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("/nonexistent/dump.rdb"), std::string::npos);
}

TEST(Verifier, ChecksumAndDecodeInArbitraryChunks) {
  auto p = build_payload(spec_of(1 << 20));
  ASSERT_TRUE(p);
  for (size_t chunk : {1ul, 7ul, 1024ul, 65536ul}) {
    Verifier v(true);
    for (size_t off = 0; off < p->bytes().size(); off += chunk) {
      auto st = v.consume(p->bytes().subspan(off, std::min(chunk, p->bytes().size() - off)));
      ASSERT_TRUE(st) << st.error().message;
      if (chunk == 1 && off > 100000) break;  // byte-at-a-time is slow; a prefix suffices
    }
    if (chunk == 1) continue;
    EXPECT_TRUE(v.finish());
    EXPECT_EQ(v.xxh3(), p->xxh3);
    EXPECT_EQ(v.decoded_bytes(), p->decoded_bytes);
  }
}

TEST(Verifier, CorruptStreamIsAnError) {
  auto p = build_payload(spec_of(1 << 16));
  ASSERT_TRUE(p);
  std::vector<std::byte> bad(p->bytes().begin(), p->bytes().end());
  bad[0] = std::byte{0};  // breaks the frame magic
  Verifier v(true);
  EXPECT_FALSE(v.consume(bad));
}

TEST(Verifier, TruncatedFrameIsAnError) {
  auto p = build_payload(spec_of(1 << 16));
  ASSERT_TRUE(p);
  Verifier v(true);
  ASSERT_TRUE(v.consume(p->bytes().first(1000)));
  EXPECT_FALSE(v.finish());
}

TEST(Payload, SameBytesForAnyThreadCount) {
  // Several full 1 MiB chunks plus a tail, so batches, their order and the tail all count.
  const PayloadSpec spec = spec_of((3 << 20) + 12345, 5);
  BuildOptions one;
  one.threads = 1;
  auto a = build_payload(spec, one);
  ASSERT_TRUE(a) << a.error().message;
  for (unsigned threads : {2u, 3u, 8u}) {
    BuildOptions many;
    many.threads = threads;
    auto b = build_payload(spec, many);
    ASSERT_TRUE(b) << b.error().message;
    EXPECT_TRUE(std::ranges::equal(a->bytes(), b->bytes())) << threads << " threads";
  }
}

TEST(Payload, ProgressRisesToTheSizeAndFalseStops) {
  const PayloadSpec spec = spec_of(3 << 20, 2);
  std::vector<uint64_t> seen;
  BuildOptions watch;
  watch.progress = [&](uint64_t done, uint64_t total) {
    EXPECT_EQ(total, spec.bytes);
    seen.push_back(done);
    return true;
  };
  ASSERT_TRUE(build_payload(spec, watch));
  ASSERT_FALSE(seen.empty());
  EXPECT_TRUE(std::ranges::is_sorted(seen));
  EXPECT_EQ(seen.back(), spec.bytes);

  BuildOptions stop;
  stop.progress = [](uint64_t, uint64_t) { return false; };
  auto stopped = build_payload(spec, stop);
  ASSERT_FALSE(stopped);
  EXPECT_NE(stopped.error().message.find("interrupted"), std::string::npos);
}

TEST(Payload, ABuildsCountedWorkingMemoryCoversItsCompressionContext) {
  // The context a thread's chunks really grow (a generated chunk is 1 MiB and the end of a
  // command, which puts zstd's tables at a 2 MiB window's size) fits what is counted for it.
  std::string raw;
  GeneratedSource(9).chunk(0, 0, kRawChunk, raw);
  ASSERT_GT(raw.size(), kRawChunk);
  std::vector<char> frame(ZSTD_compressBound(raw.size()));
  for (int level : {1, 3, 9, 12, 19}) {
    ZSTD_CCtx* c = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
    ASSERT_FALSE(ZSTD_isError(ZSTD_compress2(c, frame.data(), frame.size(), raw.data(), raw.size())));
    const uint64_t used = ZSTD_sizeof_CCtx(c) + raw.capacity() + 4 * frame.size();
    ZSTD_freeCCtx(c);
    EXPECT_LE(used, build_working_bytes(level, 1)) << "level " << level;
    EXPECT_EQ(build_working_bytes(level, 3), 3 * build_working_bytes(level, 1));
  }
  EXPECT_GT(build_working_bytes(19, 1), 30u << 20);  // level 19: a 35 MiB context
}

TEST(Payload, InterruptedLoadLeavesNoCacheFile) {
  const auto dir = std::filesystem::temp_directory_path() / "iobench-interrupt-test";
  std::filesystem::remove_all(dir);
  PayloadSpec s = spec_of(2 << 20, 3);
  s.cache_dir = dir.string();
  BuildOptions stop;
  stop.progress = [](uint64_t, uint64_t) { return false; };
  EXPECT_FALSE(load_payload(s, stop));
  EXPECT_FALSE(payload_cached(s));
  EXPECT_TRUE(!std::filesystem::exists(dir) || std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
}

TEST(RespGenerator, AppendsWholeCommands) {
  RespGenerator g(3);
  std::string out;
  g.append(out, 10000);
  EXPECT_GE(out.size(), 10000u);
  EXPECT_GT(g.commands(), 0u);
  EXPECT_EQ(out.substr(out.size() - 2), "\r\n");
  parse_commands(out);
}

TEST(RepeatedWindow, TheSpanIsTheWindowOverAndOverAndItsHashIsTheStreams) {
  std::vector<std::byte> window(8192);
  for (size_t i = 0; i < window.size(); ++i) window[i] = static_cast<std::byte>(i * 7 + 3);
  const uint64_t total = 20000;  // two windows and part of a third
  auto w = RepeatedWindow::map(window, total);
  ASSERT_TRUE(w) << w.error().message;
  const auto b = w->bytes();
  ASSERT_EQ(b.size(), total);
  std::vector<std::byte> expected;
  while (expected.size() < total) expected.insert(expected.end(), window.begin(), window.end());
  expected.resize(total);
  EXPECT_TRUE(std::equal(b.begin(), b.end(), expected.begin()));
  // The digest is the one a receiver checking window by window reaches over the whole stream.
  Verifier v(false, window.size());
  for (size_t at = 0; at < expected.size(); at += 3000)
    ASSERT_TRUE(v.consume(std::span(expected).subspan(at, std::min<size_t>(3000, total - at))));
  EXPECT_EQ(w->xxh3(), v.xxh3());
  EXPECT_EQ(w->xxh3(), window_digest(window, total));
  // Whole pages only.
  EXPECT_FALSE(RepeatedWindow::map(std::span(window).first(5000), total));
}

TEST(RepeatedWindow, ALongStreamIsSentInPassesOverASpanOfWholeWindows) {
  std::vector<std::byte> window(kMinWindow, std::byte{7});
  const uint64_t total = 10 * kWindowSpan + 12345;
  auto w = RepeatedWindow::map(window, total);
  ASSERT_TRUE(w) << w.error().message;
  EXPECT_EQ(w->bytes().size(), kWindowSpan);  // not the stream's length
  EXPECT_EQ(w->bytes().size() % window.size(), 0u);
  // A window that does not divide the span: whole windows, at least the span (the largest
  // buffer is never cut by it).
  std::vector<std::byte> odd(3 * 4096 * 7, std::byte{9});
  auto o = RepeatedWindow::map(odd, total);
  ASSERT_TRUE(o) << o.error().message;
  EXPECT_GE(o->bytes().size(), kWindowSpan);
  EXPECT_EQ(o->bytes().size() % odd.size(), 0u);
  EXPECT_EQ(w->xxh3(), window_digest(window, total));
}

TEST(RepeatedWindow, WritesOfOneSizeGetTheShortestSpanOfWholeWindowsAndWholeWrites) {
  std::vector<std::byte> window(kMinWindow, std::byte{5});  // 64 KiB
  const uint64_t total = 10 * kWindowSpan;
  const auto span_for = [&](uint64_t pass_unit) {
    auto w = RepeatedWindow::map(window, total, pass_unit);
    EXPECT_TRUE(w) << w.error().message;
    return w ? w->bytes().size() : 0;
  };
  EXPECT_EQ(span_for(16384), window.size());  // writes that divide the window: the window
  EXPECT_EQ(span_for(65536), window.size());
  EXPECT_EQ(span_for(49152), 3 * window.size());  // 48K: lcm(64K, 48K) = 192K
  EXPECT_EQ(span_for(1 << 20), uint64_t{1} << 20);  // a write longer than the window
  EXPECT_EQ(span_for(1000), 8192000u);  // lcm(65536, 1000): whole writes, under kWindowSpan
  // No unit (writes vary, or the engine pays for a pass): the long span, as before.
  EXPECT_EQ(span_for(0), kWindowSpan);
  // A unit whose span of whole writes would exceed kWindowSpan: the long span, whole windows.
  std::vector<std::byte> big(kMinWindow * 4, std::byte{5});  // 256K: lcm with 1000 is 31.25 MiB
  auto b = RepeatedWindow::map(big, total, 1000);
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(b->bytes().size(), kWindowSpan);
  // Never longer than the stream.
  auto s = RepeatedWindow::map(window, 24096, 49152);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->bytes().size(), 24096u);
}

TEST(Verifier, WindowByWindowChecksEveryByteWhateverTheReadSizes) {
  std::vector<std::byte> window(4096);
  for (size_t i = 0; i < window.size(); ++i) window[i] = static_cast<std::byte>(i * 13 + 1);
  std::vector<std::byte> stream;
  for (int i = 0; i < 5; ++i) stream.insert(stream.end(), window.begin(), window.end());
  stream.resize(stream.size() - 100);
  const uint64_t want = window_digest(window, stream.size());
  for (size_t read : {1u, 999u, 4096u, 5000u, 65536u}) {
    Verifier v(false, window.size());
    for (size_t at = 0; at < stream.size(); at += read)
      ASSERT_TRUE(v.consume(std::span(stream).subspan(at, std::min(read, stream.size() - at))));
    EXPECT_EQ(v.xxh3(), want) << read;
  }
  // One byte changed anywhere, or one missing, is another digest.
  for (size_t at : {size_t{0}, size_t{4095}, size_t{4096}, stream.size() - 1}) {
    auto bad = stream;
    bad[at] ^= std::byte{1};
    Verifier v(false, window.size());
    ASSERT_TRUE(v.consume(bad));
    EXPECT_NE(v.xxh3(), want) << at;
  }
  Verifier shorter(false, window.size());
  ASSERT_TRUE(shorter.consume(std::span(stream).first(stream.size() - 1)));
  EXPECT_NE(shorter.xxh3(), want);
  // Without a window the digest is the stream's XXH3, as ever.
  Verifier whole(false);
  ASSERT_TRUE(whole.consume(stream));
  EXPECT_EQ(whole.xxh3(), xxh3_oneshot(stream.data(), stream.size()));
}


TEST(WindowCache, OneWindowIsOneMappingCountedOnceAndGivenBackWithItsLastUser) {
  std::vector<std::byte> window(kMinWindow, std::byte{3});
  MemoryBudget budget(64 << 20);
  WindowCache cache(&budget, false);
  auto a = cache.get(window, 16384);
  auto b = cache.get(window, 16384);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->get(), b->get());  // one mapping for two streams of any length
  EXPECT_EQ(budget.held(), RepeatedWindow::span_bytes(window.size(), 16384));
  // Each stream's digest is its own length's.
  for (uint64_t total : {uint64_t{100000}, uint64_t{5} << 20})
    EXPECT_EQ((*a)->digest(total), window_digest(window, total));
  EXPECT_EQ((*a)->bytes_for(100000).size(), window.size());
  a->reset();
  EXPECT_GT(budget.held(), 0u);
  b->reset();
  EXPECT_EQ(budget.held(), 0u);  // unmapped with its last user
  EXPECT_EQ(cache.mapped(), 0u);
  // A span that does not fit the budget is refused before it is mapped.
  MemoryBudget tiny(4096);
  WindowCache tight(&tiny, false);
  auto refused = tight.get(window, 16384);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("source window's span needs"), std::string::npos);
}

}  // namespace
}  // namespace iobench
