#include "proto/messages.h"

#include <fmt/format.h>

#include <cctype>
#include <optional>

#include "proto/codec.h"

namespace iobench::proto {
namespace {

void encode_body(Writer& w, const Hello& h) {
  w.boolean(h.client_sends);
  w.u64(h.bytes);
  w.u64(h.send_buf_bytes);
  w.u64(h.recv_buf_bytes);
  w.u64(h.sndbuf_bytes);
  w.u64(h.rcvbuf_bytes);
  w.boolean(h.nodelay);
  w.boolean(h.decompress);
  w.u64(h.seed);
  w.i64(h.zstd_level);
  w.str(h.proto);
  w.str(h.engine);
  w.f64(h.timeout_s);
  w.str(h.tls_io);
  w.boolean(h.tls_read_ahead);
  w.u64(h.tls_max_fragment);
  w.boolean(h.kernel_syscalls);
  w.boolean(h.edge);
  w.u32(h.reads_per_event);
  w.u32(h.queue_depth);
  w.u32(h.conns);
  w.u32(h.conn_index);
  w.u64(h.group_id);
  w.u64(h.payload_bytes);
  w.boolean(h.adaptive);
  for (uint64_t v : {h.budget, h.buf_min, h.buf_max}) w.u64(v);
  w.str(h.auth_token);
  w.boolean(h.zerocopy);
  w.boolean(h.sqpoll);
  w.boolean(h.fixed_buffers);
  w.str(h.uring_recv);
}

void encode_body(Writer& w, const Ack& a) { w.str(a.server_version); }

void encode_pairs(Writer& w, const std::vector<std::pair<std::string, uint64_t>>& v) {
  const size_t n = std::min(v.size(), kMaxListEntries);
  w.u16(static_cast<uint16_t>(n));
  for (size_t i = 0; i < n; ++i) {
    w.str(v[i].first);
    w.u64(v[i].second);
  }
}

void encode_body(Writer& w, const SideResult& r) {
  w.boolean(r.is_sender);
  for (uint64_t v : {r.bytes_expected, r.bytes, r.buf_bytes}) w.u64(v);
  for (int64_t v : {r.wall_ns, r.cpu_ns, r.user_us, r.sys_us, r.vol_ctxsw, r.invol_ctxsw}) w.i64(v);
  for (uint64_t v : {r.io_calls, r.short_writes, r.xxh3, r.decoded_bytes}) w.u64(v);
  w.boolean(r.decoded);
  for (int64_t v : {r.sndbuf_bytes, r.rcvbuf_bytes, r.mtu_bytes}) w.i64(v);
  w.boolean(r.nodelay);
  w.str(r.engine);
  w.str(r.error);
  for (uint64_t v : {r.sys_reads, r.sys_writes, r.records_in, r.records_out}) w.u64(v);
  for (const auto* v : {&r.tls_version, &r.tls_cipher, &r.tls_group, &r.tls_io, &r.ktls}) w.str(*v);
  w.i64(r.tls_handshake_ns);
  w.boolean(r.tls_read_ahead);
  w.u64(r.tls_max_fragment);
  w.boolean(r.tls_verified);
  w.str(r.syscalls_source);
  w.str(r.syscalls_note);
  w.u64(r.kernel_syscalls_total);
  encode_pairs(w, r.kernel_syscalls);
  w.u64(r.engine_waits);
  w.u64(r.engine_would_block);
  w.u64(r.buf_resizes);
  w.str(r.cpu_scope);
  w.boolean(r.zerocopy);
  for (uint64_t v : {r.zc_sends, r.zc_notifications, r.zc_copied}) w.u64(v);
  w.u64(r.uring_sqes);
  w.u64(r.uring_cqes);
  w.str(r.engine_path);
}

void encode_body(Writer& w, const GroupResult& g) {
  w.boolean(g.is_sender);
  w.u32(g.conns);
  w.u32(g.conns_failed);
  for (int64_t v : {g.wall_ns, g.cpu_ns, g.user_us, g.sys_us}) w.i64(v);
  w.str(g.syscalls_source);
  w.str(g.syscalls_note);
  w.u64(g.kernel_syscalls_total);
  encode_pairs(w, g.kernel_syscalls);
  w.str(g.policy);
  w.u32(g.peak_live);
  w.u64(g.peak_buffer_bytes);
  w.u64(g.peak_rss_bytes);
  const size_t nt = std::min(g.timeline.size(), kMaxTimelineEntries);
  w.u32(static_cast<uint32_t>(nt));
  for (size_t i = 0; i < nt; ++i) {
    w.i64(g.timeline[i].t_ns);
    w.u32(g.timeline[i].live);
    w.u64(g.timeline[i].size);
  }
  const size_t nc = std::min(g.changes.size(), kMaxTimelineEntries);
  w.u32(static_cast<uint32_t>(nc));
  for (size_t i = 0; i < nc; ++i) {
    const BufChange& c = g.changes[i];
    w.i64(c.t_ns);
    w.u32(c.conn);
    w.u64(c.from);
    w.u64(c.to);
    w.u32(c.live);
    w.u64(c.target);
  }
  w.u64(g.changes_dropped + (g.changes.size() - nc));
  w.str(g.error);
}

void encode_body(Writer& w, const ErrorMsg& e) { w.str(e.message); }

void encode_body(Writer& w, const Progress& p) {
  w.u64(p.done_bytes);
  w.u64(p.total_bytes);
  w.i64(p.elapsed_ns);
}

Type type_of(const Message& m) {
  return std::visit(
      [](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Hello>) return Type::kHello;
        if constexpr (std::is_same_v<T, Ack>) return Type::kAck;
        if constexpr (std::is_same_v<T, SideResult>) return Type::kResult;
        if constexpr (std::is_same_v<T, GroupResult>) return Type::kGroup;
        if constexpr (std::is_same_v<T, Progress>) return Type::kProgress;
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

Result<Message> decode_hello(std::span<const std::byte> body) {
  Fields f(body);
  Hello h;
  f.boolean(h.client_sends);
  f.u64(h.bytes);
  f.u64(h.send_buf_bytes);
  f.u64(h.recv_buf_bytes);
  f.u64(h.sndbuf_bytes);
  f.u64(h.rcvbuf_bytes);
  f.boolean(h.nodelay);
  f.boolean(h.decompress);
  f.u64(h.seed);
  f.i64(h.zstd_level);
  f.str(h.proto);
  f.str(h.engine);
  f.f64(h.timeout_s);
  f.str(h.tls_io);
  f.boolean(h.tls_read_ahead);
  f.u64(h.tls_max_fragment);
  f.boolean(h.kernel_syscalls);
  f.boolean(h.edge);
  f.u32(h.reads_per_event);
  f.u32(h.queue_depth);
  f.u32(h.conns);
  f.u32(h.conn_index);
  f.u64(h.group_id);
  f.u64(h.payload_bytes);
  f.boolean(h.adaptive);
  for (uint64_t* v : {&h.budget, &h.buf_min, &h.buf_max}) f.u64(*v);
  f.str(h.auth_token);
  f.boolean(h.zerocopy);
  f.boolean(h.sqpoll);
  f.boolean(h.fixed_buffers);
  f.str(h.uring_recv);
  return f.finish<Message>(h);
}

Result<Message> decode_result(std::span<const std::byte> body) {
  Fields f(body);
  SideResult r;
  f.boolean(r.is_sender);
  for (uint64_t* v : {&r.bytes_expected, &r.bytes, &r.buf_bytes}) f.u64(*v);
  for (int64_t* v : {&r.wall_ns, &r.cpu_ns, &r.user_us, &r.sys_us, &r.vol_ctxsw, &r.invol_ctxsw})
    f.i64(*v);
  for (uint64_t* v : {&r.io_calls, &r.short_writes, &r.xxh3, &r.decoded_bytes}) f.u64(*v);
  f.boolean(r.decoded);
  for (int64_t* v : {&r.sndbuf_bytes, &r.rcvbuf_bytes, &r.mtu_bytes}) f.i64(*v);
  f.boolean(r.nodelay);
  f.str(r.engine);
  f.str(r.error);
  for (uint64_t* v : {&r.sys_reads, &r.sys_writes, &r.records_in, &r.records_out}) f.u64(*v);
  for (std::string* v : {&r.tls_version, &r.tls_cipher, &r.tls_group, &r.tls_io, &r.ktls})
    f.str(*v);
  f.i64(r.tls_handshake_ns);
  f.boolean(r.tls_read_ahead);
  f.u64(r.tls_max_fragment);
  f.boolean(r.tls_verified);
  f.str(r.syscalls_source);
  f.str(r.syscalls_note);
  f.u64(r.kernel_syscalls_total);
  f.pairs(r.kernel_syscalls);
  f.u64(r.engine_waits);
  f.u64(r.engine_would_block);
  f.u64(r.buf_resizes);
  f.str(r.cpu_scope);
  f.boolean(r.zerocopy);
  for (uint64_t* v : {&r.zc_sends, &r.zc_notifications, &r.zc_copied}) f.u64(*v);
  f.u64(r.uring_sqes);
  f.u64(r.uring_cqes);
  f.str(r.engine_path);
  return f.finish<Message>(r);
}

Result<Message> decode_group(std::span<const std::byte> body) {
  Fields f(body);
  GroupResult g;
  f.boolean(g.is_sender);
  f.u32(g.conns);
  f.u32(g.conns_failed);
  for (int64_t* v : {&g.wall_ns, &g.cpu_ns, &g.user_us, &g.sys_us}) f.i64(*v);
  f.str(g.syscalls_source);
  f.str(g.syscalls_note);
  f.u64(g.kernel_syscalls_total);
  f.pairs(g.kernel_syscalls);
  f.str(g.policy);
  f.u32(g.peak_live);
  f.u64(g.peak_buffer_bytes);
  f.u64(g.peak_rss_bytes);
  f.list(g.timeline, kMaxTimelineEntries, [](Fields& r, LivePoint& p) {
    r.i64(p.t_ns);
    r.u32(p.live);
    r.u64(p.size);
  });
  f.list(g.changes, kMaxTimelineEntries, [](Fields& r, BufChange& c) {
    r.i64(c.t_ns);
    r.u32(c.conn);
    r.u64(c.from);
    r.u64(c.to);
    r.u32(c.live);
    r.u64(c.target);
  });
  f.u64(g.changes_dropped);
  f.str(g.error);
  return f.finish<Message>(g);
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
  std::visit([&](const auto& v) { encode_body(w, v); }, m);
  auto& out = w.bytes();
  const auto body = static_cast<uint32_t>(out.size() - kHeaderBytes);
  for (int i = 0; i < 4; ++i) out[8 + i] = static_cast<std::byte>((body >> (8 * i)) & 0xff);
  return std::move(out);
}

Result<FrameHeader> decode_header(std::span<const std::byte> header) {
  if (header.size() < kHeaderBytes) return fail("truncated frame header");
  if (!std::equal(kMagic.begin(), kMagic.end(), header.begin()))
    return fail(fmt::format("not an iobench peer (first bytes '{}')",
                            printable(header.first(kHeaderBytes))));
  Reader r(header.subspan(4, kHeaderBytes - 4));
  FrameHeader h;
  h.version = *r.u16();
  const uint16_t type = *r.u16();
  h.body_bytes = *r.u32();
  if (h.version != kVersion)
    return fail(fmt::format("protocol version {} not supported (this side speaks {})", h.version,
                            kVersion));
  if (type < 1 || type > 6) return fail(fmt::format("unknown message type {}", type));
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
      return decode_hello(body);
    case Type::kResult:
      return decode_result(body);
    case Type::kGroup:
      return decode_group(body);
    case Type::kAck: {
      Fields f(body);
      Ack a;
      f.str(a.server_version);
      return f.finish<Message>(a);
    }
    case Type::kError: {
      Fields f(body);
      ErrorMsg e;
      f.str(e.message);
      return f.finish<Message>(e);
    }
    case Type::kProgress: {
      Fields f(body);
      Progress p;
      f.u64(p.done_bytes);
      f.u64(p.total_bytes);
      f.i64(p.elapsed_ns);
      return f.finish<Message>(p);
    }
  }
  return fail("unknown message type");
}

const char* type_name(const Message& m) {
  switch (type_of(m)) {
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
  }
  return "?";
}

}  // namespace iobench::proto
