#include "proto/messages.h"

#include <fmt/format.h>

#include <cctype>
#include <optional>

#include "proto/codec.h"
#include "proto/fields.h"
#include "util/escape.h"

namespace iobench::proto {
namespace {

using Pairs = std::vector<std::pair<std::string, uint64_t>>;

// Writes each field of a message by its type, in its field list's order.
struct Encoder {
  Writer& w;
  void operator()(const Field&, const bool& v) { w.boolean(v); }
  void operator()(const Field&, const uint32_t& v) { w.u32(v); }
  void operator()(const Field&, const uint64_t& v) { w.u64(v); }
  void operator()(const Field&, const int64_t& v) { w.i64(v); }
  void operator()(const Field&, const double& v) { w.f64(v); }
  void operator()(const Field&, const std::string& v) { w.str(v); }
  template <NamedEnum E>
  void operator()(const Field&, const E& v) {
    w.str(std::string(name_of(v)));
  }
  // (name, count) lists: a u16 count, at most kMaxListEntries.
  void operator()(const Field&, const Pairs& v) {
    const size_t n = std::min(v.size(), kMaxListEntries);
    w.u16(static_cast<uint16_t>(n));
    for (size_t i = 0; i < n; ++i) {
      w.str(v[i].first);
      w.u64(v[i].second);
    }
  }
  // Timelines: a u32 count, at most kMaxTimelineEntries.
  template <Described T>
  void operator()(const Field&, const std::vector<T>& v) {
    const size_t n = std::min(v.size(), kMaxTimelineEntries);
    w.u32(static_cast<uint32_t>(n));
    for (size_t i = 0; i < n; ++i) describe(v[i], *this);
  }
  template <Described T>
  void operator()(const Field&, const T& v) {
    describe(v, *this);
  }
};

// Escapes every string of a message in place, walking its field list (escape_printable).
struct Escaper {
  template <typename T>
  void operator()(const Field&, T&) {}  // numbers and enums (a name from a fixed table)
  void operator()(const Field&, std::string& v) { v = escape_for_log(v); }
  void operator()(const Field&, Pairs& v) {
    for (auto& pair : v) pair.first = escape_for_log(pair.first);
  }
  template <Described T>
  void operator()(const Field&, std::vector<T>& v) {
    for (T& one : v) describe(one, *this);
  }
  template <Described T>
  void operator()(const Field&, T& v) {
    describe(v, *this);
  }
};

Type type_of(const Message& m) {
  return std::visit(
      [](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Hello>) return Type::kHello;
        if constexpr (std::is_same_v<T, Ack>) return Type::kAck;
        if constexpr (std::is_same_v<T, SideResult>) return Type::kResult;
        if constexpr (std::is_same_v<T, GroupResult>) return Type::kGroup;
        if constexpr (std::is_same_v<T, Progress>) return Type::kProgress;
        if constexpr (std::is_same_v<T, Challenge>) return Type::kChallenge;
        if constexpr (std::is_same_v<T, Auth>) return Type::kAuth;
        return Type::kError;
      },
      m);
}

// Reads fields in order and keeps the first error; the reader never overruns, so later reads
// after an error are harmless.
class Fields {
 public:
  explicit Fields(std::span<const std::byte> body) : r_(body) {}
  template <typename T, typename F>
  void get(F&& read, T& out) {
    auto v = read(r_);
    if (!v) {
      if (!err_) err_ = v.error();
      return;
    }
    out = static_cast<T>(*v);
  }
  void u32(uint32_t& out) {
    get([](Reader& r) { return r.u32(); }, out);
  }
  void u64(uint64_t& out) {
    get([](Reader& r) { return r.u64(); }, out);
  }
  void i64(int64_t& out) {
    get([](Reader& r) { return r.i64(); }, out);
  }
  void f64(double& out) {
    get([](Reader& r) { return r.f64(); }, out);
  }
  void boolean(bool& out) {
    get([](Reader& r) { return r.boolean(); }, out);
  }
  void str(std::string& out) {
    get([](Reader& r) { return r.str(kMaxStringBytes); }, out);
  }
  // The field-list walk: each field read by its type (see Encoder).
  void operator()(const Field&, bool& v) { boolean(v); }
  void operator()(const Field&, uint32_t& v) { u32(v); }
  void operator()(const Field&, uint64_t& v) { u64(v); }
  void operator()(const Field&, int64_t& v) { i64(v); }
  void operator()(const Field&, double& v) { f64(v); }
  void operator()(const Field&, std::string& v) { str(v); }
  // An enum travels as its name; a name not in its table is refused with the choices.
  template <NamedEnum E>
  void operator()(const Field& f, E& v) {
    std::string text;
    str(text);
    if (err_) return;
    if (auto e = parse_name<E>(text))
      v = *e;
    else
      err_ = Error{fmt::format("{} {} outside {}", f.name, text, names_text<E>())};
  }
  void operator()(const Field&, Pairs& v) { pairs(v); }
  template <Described T>
  void operator()(const Field&, std::vector<T>& v) {
    list(v, kMaxTimelineEntries, [](Fields& f, T& one) { describe(one, f); });
  }
  template <Described T>
  void operator()(const Field&, T& v) {
    describe(v, *this);
  }
  // A count bounded before anything is reserved, then (string, u64) pairs.
  void pairs(std::vector<std::pair<std::string, uint64_t>>& out) {
    uint16_t n = 0;
    get([](Reader& r) { return r.u16(); }, n);
    if (err_) return;
    if (n > kMaxListEntries) {
      err_ = Error{fmt::format("list of {} entries exceeds limit {}", n, kMaxListEntries)};
      return;
    }
    out.resize(n);
    for (auto& [name, value] : out) {
      str(name);
      u64(value);
    }
  }
  // A u32 count bounded by `limit` before anything is reserved, then `read_one` per entry.
  template <typename T, typename F>
  void list(std::vector<T>& out, size_t limit, F&& read_one) {
    uint32_t n = 0;
    u32(n);
    if (err_) return;
    if (n > limit) {
      err_ = Error{fmt::format("list of {} entries exceeds limit {}", n, limit)};
      return;
    }
    out.resize(n);
    for (T& v : out) {
      read_one(*this, v);
      if (err_) return;
    }
  }
  template <typename T>
  Result<T> finish(T value) {
    if (!err_) {
      if (auto s = r_.done(); !s) err_ = s.error();
    }
    if (err_) return std::unexpected(*err_);
    return value;
  }

 private:
  Reader r_;
  std::optional<Error> err_;
};

// Reads a message of type T through its field list; the whole body must be consumed.
template <typename T>
Result<Message> decode_as(std::span<const std::byte> body) {
  Fields f(body);
  T m;
  describe(m, f);
  return f.finish<Message>(std::move(m));
}

std::string printable(std::span<const std::byte> b) {
  std::string s;
  for (std::byte c : b) {
    auto ch = static_cast<unsigned char>(c);
    s += std::isprint(ch) ? static_cast<char>(ch) : '.';
  }
  return s;
}

}  // namespace

std::vector<std::byte> encode(const Message& m) {
  Writer w;
  for (std::byte b : kMagic) w.u8(static_cast<uint8_t>(b));
  w.u16(kVersion);
  w.u16(static_cast<uint16_t>(type_of(m)));
  w.u32(0);  // patched below
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, GroupResult>) {
          // Changes past the list's bound travel as a count, not silently lost.
          GroupResult g = v;
          if (g.changes.size() > kMaxTimelineEntries) {
            g.changes_dropped += g.changes.size() - kMaxTimelineEntries;
            g.changes.resize(kMaxTimelineEntries);
          }
          describe(g, Encoder{w});
        } else {
          describe(v, Encoder{w});
        }
      },
      m);
  auto& out = w.bytes();
  const auto body = static_cast<uint32_t>(out.size() - kHeaderBytes);
  for (int i = 0; i < 4; ++i) out[8 + i] = static_cast<std::byte>((body >> (8 * i)) & 0xff);
  return std::move(out);
}

Result<FrameHeader> decode_header(std::span<const std::byte> header) {
  if (header.size() < kHeaderBytes) return fail("truncated frame header");
  if (!std::equal(kMagic.begin(), kMagic.end(), header.begin()))
    return fail(fmt::format("{} (first bytes '{}')", kNotIobenchPeer,
                            printable(header.first(kHeaderBytes))),
                ErrorKind::kNotPeer);
  Reader r(header.subspan(4, kHeaderBytes - 4));
  FrameHeader h;
  h.version = *r.u16();
  const uint16_t type = *r.u16();
  h.body_bytes = *r.u32();
  if (h.version != kVersion)
    return fail(fmt::format("protocol version {} not supported (this side speaks {})", h.version,
                            kVersion));
  if (type < 1 || type > kLastType) return fail(fmt::format("unknown message type {}", type));
  h.type = static_cast<Type>(type);
  const uint32_t limit = h.type == Type::kGroup ? kMaxGroupBodyBytes : kMaxBodyBytes;
  if (h.body_bytes > limit)
    return fail(fmt::format("message length {} exceeds limit {}", h.body_bytes, limit));
  return h;
}

Result<Message> decode_body(const FrameHeader& h, std::span<const std::byte> body) {
  if (body.size() != h.body_bytes)
    return fail(fmt::format("body is {} bytes, header said {}", body.size(), h.body_bytes));
  switch (h.type) {
    case Type::kHello:
      return decode_as<Hello>(body);
    case Type::kResult:
      return decode_as<SideResult>(body);
    case Type::kGroup:
      return decode_as<GroupResult>(body);
    case Type::kAck:
      return decode_as<Ack>(body);
    case Type::kError:
      return decode_as<ErrorMsg>(body);
    case Type::kProgress:
      return decode_as<Progress>(body);
    case Type::kChallenge:
      return decode_as<Challenge>(body);
    case Type::kAuth:
      return decode_as<Auth>(body);
  }
  return fail("unknown message type");
}

void escape_printable(Message& m) {
  std::visit(
      [](auto& v) {
        using T = std::decay_t<decltype(v)>;
        // The HELLO and AUTH are re-encoded for the token's proof, the CHALLENGE's nonce signed
        // as sent: a byte changed would be a proof refused, never a line forged.
        if constexpr (!std::is_same_v<T, Hello> && !std::is_same_v<T, Auth> &&
                      !std::is_same_v<T, Challenge>) {
          Escaper e;
          describe(v, e);
        }
      },
      m);
}

const char* type_name(Type t) {
  switch (t) {
    case Type::kHello:
      return "HELLO";
    case Type::kAck:
      return "ACK";
    case Type::kResult:
      return "RESULT";
    case Type::kError:
      return "ERROR";
    case Type::kGroup:
      return "GROUP";
    case Type::kProgress:
      return "PROGRESS";
    case Type::kChallenge:
      return "CHALLENGE";
    case Type::kAuth:
      return "AUTH";
  }
  return "?";
}

const char* type_name(const Message& m) { return type_name(type_of(m)); }

}  // namespace iobench::proto
