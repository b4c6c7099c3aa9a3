#include <gtest/gtest.h>
#include <sys/resource.h>

#include <thread>
#include <tuple>

#include "adaptive/chunk_rule.h"
#include "adaptive/policy.h"
#include "adaptive/registry.h"
#include "cli/options.h"
#include "engine/io_buffer.h"
#include "probe/probe.h"
#include "proto/messages.h"

namespace iobench {
namespace {

constexpr uint64_t K = 1024;

TEST(BudgetPolicy, BudgetOverLiveRoundedDownToAPowerOfTwoAndClamped) {
  const BudgetPolicy p({256 * K, 4 * K, 64 * K});
  struct Case {
    uint32_t live;
    uint64_t want;
  };
  for (const Case& c : std::vector<Case>{{0, 64 * K},  // treated as one
                                         {1, 64 * K},  // 256K clamped to the max
                                         {4, 64 * K},  // exactly 64K
                                         {5, 32 * K},  // 51.2K rounds down
                                         {8, 32 * K},
                                         {9, 16 * K},  // 28.4K
                                         {16, 16 * K},
                                         {17, 8 * K},  // 15.06K
                                         {64, 4 * K},
                                         {100, 4 * K},  // 2.56K clamped to the min
                                         {100000, 4 * K}})
    EXPECT_EQ(p.size_for(c.live), c.want) << "live " << c.live;
}

TEST(BudgetPolicy, NonPowerOfTwoLimits) {
  const BudgetPolicy p({100 * K, 3 * K, 48 * K});
  EXPECT_EQ(p.size_for(1), 48 * K);  // 64K clamped to 48K
  EXPECT_EQ(p.size_for(3), 32 * K);  // 33.3K
  EXPECT_EQ(p.size_for(20), 4 * K);  // 5K
  EXPECT_EQ(p.size_for(40), 3 * K);  // 2.5K -> 2K, clamped up
  EXPECT_EQ(p.describe(), "adaptive: budget 100K, 3K..48K");
}

TEST(ChunkRule, DoublesWithEachDoublingOfTheReplicasUpToTheMax) {
  struct Case {
    unsigned live;
    size_t want;
  };
  for (const Case& c : std::vector<Case>{{0, 16 * K},  // none live: the one-replica chunk
                                         {1, 16 * K},
                                         {2, 32 * K},
                                         {3, 64 * K},  // 3-4 replicas: four times
                                         {4, 64 * K},
                                         {16, 64 * K},
                                         {100000, 64 * K}})
    EXPECT_EQ(replication_chunk_size(c.live, 0, 16 * K, 64 * K), c.want) << "live " << c.live;
  // A larger maximum keeps doubling; a maximum that is not min x a power of two caps it.
  EXPECT_EQ(replication_chunk_size(8, 0, 16 * K, 1024 * K), 128 * K);
  EXPECT_EQ(replication_chunk_size(8, 0, 16 * K, 48 * K), 48 * K);
  // A minimum above the maximum wins (the caller's limits are checked elsewhere).
  EXPECT_EQ(replication_chunk_size(1, 0, 64 * K, 16 * K), 64 * K);
}

TEST(ChunkRule, GrowsAtOnceAndHoldsAsReplicasLeave) {
  EXPECT_EQ(replication_chunk_size(16, 16 * K, 16 * K, 256 * K), 256 * K);  // grows at once
  // 16 replicas finishing one by one: the chunk holds.
  size_t chunk = 256 * K;
  for (unsigned live = 15; live >= 1; --live)
    chunk = replication_chunk_size(live, chunk, 16 * K, 256 * K);
  EXPECT_EQ(chunk, 256 * K);
  // A new sync starts from no chunk; a chunk above the maximum is not held.
  EXPECT_EQ(replication_chunk_size(1, 0, 16 * K, 256 * K), 16 * K);
  EXPECT_EQ(replication_chunk_size(1, 512 * K, 16 * K, 256 * K), 16 * K);
}

TEST(WriterPolicy, FollowsTheRuleWithinTheMaxAndTheBudget) {
  const WriterPolicy p({256 * K, 16 * K, 64 * K});
  EXPECT_EQ(p.size_for(1), 16 * K);
  EXPECT_EQ(p.size_for(2), 32 * K);
  EXPECT_EQ(p.size_for(64), 64 * K);  // the chunk is one buffer: no budget / N
  EXPECT_EQ(p.next_size(1, 64 * K), 64 * K);  // holds as replicas leave
  EXPECT_EQ(p.budget(), 0u);  // the registry does not share a budget among the replicas
  EXPECT_EQ(p.describe(), "adaptive writer: 16K..64K, doubling with the live replicas");
  const WriterPolicy small({32 * K, 16 * K, 64 * K});  // the one chunk must fit the budget
  EXPECT_EQ(small.size_for(8), 32 * K);
}

TEST(MakePolicy, TheShapeChoosesTheRule) {
  const PolicyLimits l{256 * K, 16 * K, 64 * K};
  EXPECT_EQ(make_policy(true, true, l, 0)->size_for(16), 64 * K);   // one writer: grows
  EXPECT_EQ(make_policy(true, false, l, 0)->size_for(16), 16 * K);  // independent: budget / N
  EXPECT_EQ(make_policy(false, true, l, 4 * K)->size_for(16), 4 * K);
}

TEST(FixedPolicy, IgnoresTheLiveCount) {
  const FixedPolicy p(16 * K);
  for (uint32_t live : {1u, 2u, 64u}) EXPECT_EQ(p.size_for(live), 16 * K);
  EXPECT_EQ(p.describe(), "fixed 16K");
}

TEST(PolicyLimits, ErrorsNameTheNumbers) {
  EXPECT_TRUE(validate_limits({256 * K, 4 * K, 64 * K}, 64));
  auto e = validate_limits({256 * K, 4 * K, 64 * K}, 65);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("--budget 256K"), std::string::npos) << e.error().message;
  EXPECT_NE(e.error().message.find("--conns 65"), std::string::npos) << e.error().message;
  e = validate_limits({1024 * K, 64 * K, 4 * K}, 1);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("--buf-min 64K is larger than --buf-max 4K"), std::string::npos)
      << e.error().message;
}

// The registry's target is adopted by a followed IoBuffer at its next size() call.
TEST(LiveRegistry, FollowersAdoptAtTheirNextCall) {
  const BudgetPolicy p({64 * K, 4 * K, 64 * K});
  LiveRegistry reg(p, monotonic_ns());
  auto a = reg.join(0);
  IoBuffer ba(16 * K, true);
  ba.follow(a.get());
  EXPECT_EQ(ba.size(), 64 * K);
  EXPECT_EQ(ba.span().size(), 64 * K);

  auto b = reg.join(1);  // live 2: 32K each, but a still holds 64K of the 64K budget
  IoBuffer bb(16 * K, false);
  bb.follow(b.get());
  EXPECT_EQ(bb.size(), 4 * K);          // the floor, until a shrinks
  EXPECT_EQ(bb.size(), 4 * K);          // asking again changes nothing while nothing is freed
  EXPECT_EQ(ba.span().size(), 32 * K);  // a adopts the new target at its next call
  EXPECT_EQ(ba.resizes(), 1u);
  EXPECT_EQ(bb.size(), 32 * K);  // now b grows into what a freed
  EXPECT_EQ(bb.resizes(), 1u);

  b.reset();  // live 1 again
  EXPECT_EQ(ba.size(), 64 * K);
  a.reset();

  const RegistrySnapshot s = reg.snapshot();
  EXPECT_EQ(s.peak_live, 2u);
  // a at 64K + b's 4K floor before a shrank: past the budget by one floor at most.
  EXPECT_EQ(s.peak_buffer_bytes, 68 * K);
  ASSERT_EQ(s.timeline.size(), 4u);
  const std::vector<std::pair<uint32_t, uint64_t>> want = {
      {1, 64 * K}, {2, 32 * K}, {1, 64 * K}, {0, 0}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(s.timeline[i].live, want[i].first) << i;
    EXPECT_EQ(s.timeline[i].size, want[i].second) << i;
  }
  // Every change names the live count and the policy's target for it; only b's first was cut.
  ASSERT_EQ(s.changes.size(), 5u);  // a opens, b opens (floor), a shrinks, b grows, a grows
  for (const SizeChange& c : s.changes) {
    EXPECT_EQ(c.target, p.size_for(c.live));
    EXPECT_LE(c.to, c.target);
  }
  EXPECT_EQ(s.changes[1].to, 4 * K);
  EXPECT_EQ(s.changes[2].from, 64 * K);
  EXPECT_EQ(s.changes[2].to, 32 * K);
  EXPECT_EQ(s.changes[3].to, 32 * K);
}

TEST(LiveRegistry, FixedSizesAreNeverCut) {
  const FixedPolicy p(64 * K);
  LiveRegistry reg(p, monotonic_ns());
  std::vector<std::unique_ptr<LiveRegistry::Member>> members;
  std::vector<std::unique_ptr<IoBuffer>> bufs;
  for (uint32_t i = 0; i < 8; ++i) {
    members.push_back(reg.join(i));
    bufs.push_back(std::make_unique<IoBuffer>(64 * K, false));
    bufs.back()->follow(members.back().get());
    EXPECT_EQ(bufs.back()->size(), 64 * K);
  }
  EXPECT_EQ(reg.snapshot().peak_buffer_bytes, 8 * 64 * K);
}

TEST(LiveRegistry, ConcurrentJoinsKeepCountsConsistent) {
  const BudgetPolicy p({1024 * K, 4 * K, 64 * K});
  LiveRegistry reg(p, monotonic_ns());
  std::vector<std::thread> threads;
  for (uint32_t i = 0; i < 32; ++i) {
    threads.emplace_back([&reg, &p, i] {
      auto m = reg.join(i);
      IoBuffer b(4 * K, true);
      b.follow(m.get());
      for (int n = 0; n < 200; ++n) ASSERT_GE(b.span().size(), 4 * K);  // never below the floor
    });
  }
  for (auto& t : threads) t.join();
  const RegistrySnapshot s = reg.snapshot();
  EXPECT_EQ(s.timeline.back().live, 0u);
  EXPECT_LE(s.peak_live, 32u);
  for (const SizeChange& c : s.changes) {
    EXPECT_EQ(c.target, p.size_for(c.live));
    EXPECT_LE(c.to, c.target);
  }
  // Within the budget but for one floor per connection joining at the same moment.
  EXPECT_LE(s.peak_buffer_bytes, 1024 * K + 32 * 4 * K);
}

TEST(ProtoGroup, RoundTripAndBounds) {
  proto::GroupResult g;
  g.is_sender = false;
  g.conns = 4;
  g.conns_failed = 1;
  g.probe.cpu_ns = 123;
  g.policy = "adaptive: budget 256K, 4K..64K";
  g.syscalls.by_name = {{"read", 10}};
  g.timeline = {{1, 1, 65536}, {2, 2, 32768}, {3, 0, 0}};
  g.changes = {{1, 0, 0, 65536, 1, 65536}, {5, 0, 65536, 32768, 2, 32768}};
  g.peak_buffer_bytes = 98304;
  g.error = "x";
  auto frame = proto::encode(g);
  auto h = proto::decode_header(std::span(frame).first(proto::kHeaderBytes));
  ASSERT_TRUE(h) << h.error().message;
  auto m = proto::decode_body(*h, std::span(frame).subspan(proto::kHeaderBytes));
  ASSERT_TRUE(m) << m.error().message;
  const auto& r = std::get<proto::GroupResult>(*m);
  EXPECT_EQ(r.conns, 4u);
  EXPECT_EQ(r.conns_failed, 1u);
  EXPECT_EQ(r.policy, g.policy);
  ASSERT_EQ(r.timeline.size(), 3u);
  EXPECT_EQ(r.timeline[1].size, 32768u);
  ASSERT_EQ(r.changes.size(), 2u);
  EXPECT_EQ(r.changes[1].from, 65536u);
  EXPECT_EQ(r.peak_buffer_bytes, 98304u);

  // A list longer than the limit is cut when written, counted as dropped.
  g.changes.assign(proto::kMaxTimelineEntries + 5, {1, 0, 0, 4096, 1, 4096});
  frame = proto::encode(g);
  h = proto::decode_header(std::span(frame).first(proto::kHeaderBytes));
  ASSERT_TRUE(h) << h.error().message;
  m = proto::decode_body(*h, std::span(frame).subspan(proto::kHeaderBytes));
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(std::get<proto::GroupResult>(*m).changes_dropped, 5u);

  // A count above the limit is refused before anything is reserved.
  proto::GroupResult empty;
  frame = proto::encode(empty);
  // timeline count sits after the fixed fields: patch it through a re-encode with a forged count.
  std::vector<std::byte> body(frame.begin() + proto::kHeaderBytes, frame.end());
  const size_t count_at = body.size() - 4 - 4 - 8 - 2;  // timeline u32, changes u32, dropped, error
  body[count_at + 3] = std::byte{0x7f};
  h = proto::decode_header(std::span(frame).first(proto::kHeaderBytes));
  m = proto::decode_body(*h, body);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("exceeds limit"), std::string::npos) << m.error().message;
}

std::vector<const char*> args(std::initializer_list<const char*> a) {
  std::vector<const char*> v{"iobench"};
  v.insert(v.end(), a);
  return v;
}

TEST(CommandLineConns, AdaptiveAndConnsOptions) {
  auto a = args({"--buf", "4k,adaptive,64k", "--conns", "8", "--budget", "128k", "--stagger",
                 "50ms", "--bytes-spread", "0.5"});
  auto cmd = parse_command_line(static_cast<int>(a.size()), a.data());
  ASSERT_TRUE(cmd) << cmd.error().message;
  const auto& o = std::get<ClientOptions>(*cmd);
  ASSERT_EQ(o.bufs.size(), 3u);
  EXPECT_FALSE(o.bufs[0].adaptive);
  EXPECT_TRUE(o.bufs[1].adaptive);
  EXPECT_EQ(o.bufs[1].send_bytes, 64 * K);  // starts from --buf-max
  EXPECT_EQ(o.bufs[2].send_bytes, 64 * K);
  EXPECT_EQ(o.conns, 8u);
  EXPECT_EQ(o.budget, 128 * K);
  EXPECT_DOUBLE_EQ(o.stagger_s, 0.05);
  EXPECT_TRUE(o.group());
}

TEST(CommandLineConns, AFanoutWriterStartsFromTheOneReplicaChunk) {
  for (const auto& [extra, min, conns] :
       std::vector<std::tuple<std::vector<const char*>, uint64_t, const char*>>{
           {{}, 64 * K, "16"},                          // --fanout, TCP: --buf-max from N = 1
           {{"--proto", "tls"}, 16 * K, "16"},          // TLS: one record
           {{"--buf-max", "32k"}, 32 * K, "16"},
           {{"--buf-min", "8k"}, 8 * K, "16"},          // unless given
           {{"--proto", "tls", "--budget", "16k"}, 16 * K, "16"}}) {  // one chunk, not N
    auto a = args({"--fanout", "connset", "--buf", "adaptive", "--conns", conns});
    a.insert(a.end(), extra.begin(), extra.end());
    auto cmd = parse_command_line(static_cast<int>(a.size()), a.data());
    ASSERT_TRUE(cmd) << cmd.error().message;
    EXPECT_EQ(std::get<ClientOptions>(*cmd).buf_min, min);
  }
  auto a = args({"--buf", "adaptive", "--conns", "16"});  // independent connections: 4K
  auto cmd = parse_command_line(static_cast<int>(a.size()), a.data());
  ASSERT_TRUE(cmd) << cmd.error().message;
  EXPECT_EQ(std::get<ClientOptions>(*cmd).buf_min, 4 * K);
  EXPECT_EQ(std::get<ClientOptions>(*cmd).buf_max, 64 * K);
  // TLS, independent connections or a fan-out writer: at most one record, unless --buf-max says
  // otherwise (a writer's 32K chunk at N=2 cost more than 16K's with more memory).
  for (const char* shape : {"", "connset"}) {
    for (const auto& [extra, max] : std::vector<std::pair<std::vector<const char*>, uint64_t>>{
             {{}, 16 * K}, {{"--buf-max", "64k"}, 64 * K}, {{"--buf-min", "32k"}, 32 * K}}) {
      a = args({"--buf", "adaptive", "--conns", "4", "--proto", "tls"});
      if (*shape) a.insert(a.end(), {"--fanout", shape});
      a.insert(a.end(), extra.begin(), extra.end());
      cmd = parse_command_line(static_cast<int>(a.size()), a.data());
      ASSERT_TRUE(cmd) << cmd.error().message;
      EXPECT_EQ(std::get<ClientOptions>(*cmd).buf_max, max) << shape;
      EXPECT_EQ(std::get<ClientOptions>(*cmd).bufs[0].send_bytes, max) << shape;
    }
  }
}

TEST(CommandLineConns, ErrorsNameTheBadValue) {
  struct Case {
    std::vector<const char*> args;
    const char* needle;
  };
  for (const auto& c : std::vector<Case>{
           {{"--conns", "0"}, "'0'"},
           {{"--conns", "5000"}, "'5000'"},
           {{"--stagger", "5parsecs"}, "5parsecs"},
           {{"--bytes-spread", "0.95"}, "0.95"},
           {{"--bytes-spread", "0.5", "--decompress"}, "--decompress"},
           {{"--budget", "64k"}, "--budget needs --buf adaptive"},
           {{"--buf", "adaptive", "--buf-min", "64k", "--buf-max", "4k"}, "--buf-min 64K"},
           {{"--buf", "adaptive", "--conns", "100", "--budget", "64k"}, "--conns 100"},
           {{"--buf", "adaptive", "--send-buf", "4k"}, "--send-buf"},
           {{"--buf", "adaptiv"}, "adaptiv"},
           {{"server", "--max-conns", "0"}, "'0'"}}) {
    auto a = args({});
    a.insert(a.end(), c.args.begin(), c.args.end());
    auto cmd = parse_command_line(static_cast<int>(a.size()), a.data());
    ASSERT_FALSE(cmd) << c.needle;
    EXPECT_NE(cmd.error().message.find(c.needle), std::string::npos) << cmd.error().message;
    EXPECT_EQ(cmd.error().message.find('\n'), std::string::npos) << "one line";
  }
}

TEST(CommandLineConns, ConnsAboveTheDescriptorLimitIsAnError) {
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = 100;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  auto a = args({"--conns", "200"});
  auto cmd = parse_command_line(static_cast<int>(a.size()), a.data());
  setrlimit(RLIMIT_NOFILE, &old);
  ASSERT_FALSE(cmd);
  EXPECT_NE(cmd.error().message.find("RLIMIT_NOFILE 100"), std::string::npos)
      << cmd.error().message;
}

}  // namespace
}  // namespace iobench
