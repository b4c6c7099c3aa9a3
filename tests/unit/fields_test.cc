// The field lists (util/fields.h, proto/fields.h): every field of every message survives the
// codec, the layout is tied to the protocol version, and bounds give one-line errors.
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "engine/tuning.h"
#include "proto/fields.h"

namespace iobench::proto {
namespace {

using Pairs = std::vector<std::pair<std::string, uint64_t>>;

// Sets every field (nested blocks and list entries too) to a value that differs from its
// default and from every other field's, walking the field list.
struct Fill {
  uint64_t next = 1;
  void operator()(const Field&, bool& v) { v = !v; }
  void operator()(const Field&, std::string& v) { v = fmt::format("s{}", next++); }
  void operator()(const Field&, double& v) { v = static_cast<double>(next++) + 0.5; }
  void operator()(const Field&, Pairs& v) {
    const uint64_t n = next++;
    v = {{fmt::format("p{}", n), n}};
  }
  template <typename T>
    requires std::is_integral_v<T>
  void operator()(const Field&, T& v) {
    v = static_cast<T>(next++);
  }
  template <NamedEnum E>
  void operator()(const Field&, E& v) {
    v = Names<E>::table[(static_cast<size_t>(v) + 1) % Names<E>::table.size()].first;
  }
  template <Described T>
  void operator()(const Field&, std::vector<T>& v) {
    v.resize(2);
    for (T& one : v) describe(one, *this);
  }
  template <Described T>
  void operator()(const Field&, T& v) {
    describe(v, *this);
  }
};

// Lists every field's value as text, so two messages compare field by field.
struct Dump {
  std::vector<std::string> out;
  std::string prefix;
  template <typename V>
  void operator()(const Field& f, const V& v) {
    const std::string name = prefix + std::string(f.name);
    if constexpr (Described<V>) {
      Dump inner{{}, name + "."};
      describe(v, inner);
      out.insert(out.end(), inner.out.begin(), inner.out.end());
    } else if constexpr (std::is_same_v<V, Pairs>) {
      for (const auto& [k, n] : v) out.push_back(fmt::format("{}={}:{}", name, k, n));
    } else if constexpr (requires { v.size(); v[0]; } && !std::is_same_v<V, std::string>) {
      for (size_t i = 0; i < v.size(); ++i) {
        Dump inner{{}, fmt::format("{}[{}].", name, i)};
        describe(v[i], inner);
        out.insert(out.end(), inner.out.begin(), inner.out.end());
      }
    } else if constexpr (NamedEnum<V>) {
      out.push_back(fmt::format("{}={}", name, name_of(v)));
    } else {
      out.push_back(fmt::format("{}={}", name, v));
    }
  }
};

template <typename M>
void expect_every_field_round_trips() {
  M m;
  describe(m, Fill{});
  const std::vector<std::byte> frame = encode(m);
  auto h = decode_header(std::span(frame).first(kHeaderBytes));
  ASSERT_TRUE(h) << h.error().message;
  auto back = decode_body(*h, std::span(frame).subspan(kHeaderBytes));
  ASSERT_TRUE(back) << back.error().message;
  Dump sent, got;
  describe(m, sent);
  describe(std::get<M>(*back), got);
  EXPECT_EQ(sent.out, got.out);
  EXPECT_NE(sent.out, Dump{}.out);
}

TEST(Fields, EveryFieldOfEveryMessageRoundTrips) {
  expect_every_field_round_trips<Hello>();
  expect_every_field_round_trips<Ack>();
  expect_every_field_round_trips<SideResult>();
  expect_every_field_round_trips<ErrorMsg>();
  expect_every_field_round_trips<GroupResult>();
  expect_every_field_round_trips<Progress>();
}

// A run's totals over its connections add exactly the fields marked summed, each a u64 count.
// Two readings of a block of counters differ field by field, nested blocks included: a field
// added to the block is subtracted with no line of its own.
TEST(Fields, MinusSubtractsEveryWholeNumberFieldOfABlock) {
  SideResult later;
  describe(later, Fill{});
  SideResult earlier;
  earlier.io.calls = 5;
  earlier.io.uring.cqes = 7;
  earlier.segments.retransmitted = 2;
  earlier.probe.cpu_ns = 9;
  const SideResult d = fields_minus(later, earlier);
  EXPECT_EQ(d.io.calls, later.io.calls - 5);
  EXPECT_EQ(d.io.uring.cqes, later.io.uring.cqes - 7);
  EXPECT_EQ(d.segments.retransmitted, later.segments.retransmitted - 2);
  EXPECT_EQ(d.probe.cpu_ns, later.probe.cpu_ns - 9);
  EXPECT_EQ(d.engine, later.engine);  // not a number: kept as the later reading has it
  EXPECT_EQ(fields_minus(TcpSegments{10, 20, 3}, TcpSegments{4, 5, 1}).retransmitted, 2u);
}

TEST(Fields, SummedFieldsAreCountsAndAddUp) {
  SideResult one;
  describe(one, Fill{});
  SideResult total;
  add_summed(total, one);
  add_summed(total, one);
  std::vector<std::string> summed;
  auto walk = [&](const auto& block, std::string_view prefix, auto& self) -> void {
    describe(block, [&](const Field& f, const auto& v) {
      using V = std::decay_t<decltype(v)>;
      const std::string name = fmt::format("{}{}", prefix, f.name);
      if constexpr (Described<V>) self(v, name + ".", self);
      if (!f.summed) return;
      summed.push_back(name);
      if constexpr (!std::is_same_v<V, uint64_t>)
        ADD_FAILURE() << name << " is marked summed but is not a u64 count";
    });
  };
  walk(total, "", walk);
  EXPECT_EQ(summed.size(), 20u) << fmt::format("{}", fmt::join(summed, ","));
  EXPECT_EQ(total.io.bytes, 2 * one.io.bytes);
  EXPECT_EQ(total.io.uring.cqes, 2 * one.io.uring.cqes);
  EXPECT_EQ(total.segments.out, 2 * one.segments.out);
  EXPECT_EQ(total.stream.records_in, 2 * one.stream.records_in);
  EXPECT_EQ(total.xxh3, 0u);  // a checksum is not a count
  zero_summed(total);
  EXPECT_EQ(total.io.bytes, 0u);
  EXPECT_EQ(total.io.zc.copied, 0u);
}

TEST(Fields, TheLayoutIsTiedToTheProtocolVersion) {
  const auto& last = kLayoutOfVersion.back();
  EXPECT_EQ(last.first, kVersion) << "kVersion has no recorded layout in kLayoutOfVersion";
  EXPECT_EQ(last.second, layout_fingerprint()) << fmt::format(
      "the control protocol's layout changed: bump kVersion to {} and append {{{}, 0x{:x}}} to "
      "kLayoutOfVersion (proto/messages.h). Layout now:\n{}",
      kVersion + 1, kVersion + 1, layout_fingerprint(), layout_text());
  for (size_t i = 1; i < kLayoutOfVersion.size(); ++i) {
    EXPECT_LT(kLayoutOfVersion[i - 1].first, kLayoutOfVersion[i].first);
    EXPECT_NE(kLayoutOfVersion[i - 1].second, kLayoutOfVersion[i].second);
  }
}

TEST(Fields, LayoutNamesEveryFieldInWireOrder) {
  const std::string text = layout_text();
  EXPECT_NE(text.find("HELLO=client_sends:bool;bytes:u64;"), std::string::npos) << text;
  EXPECT_NE(text.find("tuning:{edge:bool;reads_per_event:u32;queue_depth:u32;"), std::string::npos);
  EXPECT_NE(text.find("timeline:list{t_ns:i64;live:u32;size:u64;};"), std::string::npos);
  const std::string json = layout_json();
  EXPECT_NE(json.find("\"tuning.queue_depth\""), std::string::npos);
}

TEST(Fields, BoundsNameTheFlagOrTheField) {
  EngineTuning t;
  EXPECT_TRUE(check_fields(t, true));
  t.queue_depth = 0;
  EXPECT_EQ(check_fields(t, true).error().message, "invalid --qd '0': expected 1..4096");
  EXPECT_EQ(check_fields(t, false).error().message, "queue_depth 0 outside 1..4096");
  t.queue_depth = 8;
  // A named value is refused where it enters, with the same kind of message.
  EXPECT_EQ(parse_option<UringRecv>("--uring-recv", "many").error().message,
            "invalid --uring-recv 'many': expected auto, multishot or batch");
  Hello h;
  h.send_buf_bytes = h.recv_buf_bytes = 16384;
  h.zstd_level = 3;
  EXPECT_TRUE(check_fields(h, false));
  // The command line's bounds, shared through one constant: the server checks them too.
  h.zstd_level = 20;
  EXPECT_EQ(check_fields(h, false).error().message, "zstd_level 20 outside 1..19");
  h.zstd_level = 3;
  h.budget = 32;  // 0 (not adaptive) is unset; a budget below one buffer is not
  EXPECT_EQ(check_fields(h, false).error().message, "budget 32 outside 64..1073741824");
  h.budget = 0;
  h.tuning.queue_depth = 5000;
  EXPECT_EQ(check_fields(h, false).error().message, "queue_depth 5000 outside 1..4096");
  h.tuning.queue_depth = 8;
  h.cpu = -2;
  EXPECT_EQ(check_fields(h, false).error().message,
            fmt::format("cpu -2 outside -1..{}", CPU_SETSIZE - 1));
}

TEST(Fields, RealNumbersHaveBoundsAndAnOpenEnd) {
  const Field timeout{.name = "timeout_s", .flag = "--timeout", .real_min = 0, .real_max = 3600,
                      .above_min = true};
  EXPECT_TRUE(check_field(timeout, 3600.0, true));
  EXPECT_EQ(check_field(timeout, 0.0, true).error().message,
            "invalid --timeout '0': expected (0, 3600]");
  EXPECT_FALSE(check_field(timeout, std::nan(""), true));
  const Field spread{.name = "bytes_spread", .real_min = 0, .real_max = 0.9};
  EXPECT_TRUE(check_field(spread, 0.0, false));
  EXPECT_EQ(check_field(spread, 0.95, false).error().message, "bytes_spread 0.95 outside 0..0.9");
  // "Not set" is not checked: a rate of 0 is no rate, an empty pattern no pattern.
  const Field rate{.name = "rate", .min = 1024, .zero_is_unset = true};
  EXPECT_TRUE(check_field(rate, uint64_t{0}, false));
  EXPECT_FALSE(check_field(rate, uint64_t{1}, false));
}

}  // namespace
}  // namespace iobench::proto
