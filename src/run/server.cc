// The server: one client at a time, each time-boxed, each logged in one line; no client can
// take it down.
#include <fmt/format.h>

#include <chrono>
#include <ctime>

#include "cli/size.h"
#include "engine/engine.h"
#include "net/socket.h"
#include "payload/payload.h"
#include "run/run.h"
#include "run/session.h"

namespace iobench {
namespace {

std::string timestamp() {
  const auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

// Keeps the last payload in memory so repeated runs of one size do not reload it.
class PayloadCache {
 public:
  Result<const Payload*> get(const PayloadSpec& spec) {
    if (payload_ && spec.bytes == spec_.bytes && spec.seed == spec_.seed &&
        spec.zstd_level == spec_.zstd_level && spec.file == spec_.file)
      return &*payload_;
    payload_.reset();
    auto p = load_payload(spec);
    if (!p) return std::unexpected(p.error());
    payload_ = std::move(*p);
    spec_ = spec;
    return &*payload_;
  }

 private:
  std::optional<Payload> payload_;
  PayloadSpec spec_;
};

// Every size the client asks for is checked against the server's own limits.
Status validate_hello(const proto::Hello& h, const ServerOptions& o) {
  if (h.proto != "tcp") return fail(fmt::format("unsupported proto '{}'", h.proto));
  if (h.bytes < kMinBytes || h.bytes > o.max_bytes)
    return fail(fmt::format("bytes {} outside this server's range {}..{}", h.bytes, kMinBytes,
                            o.max_bytes));
  for (uint64_t b : {h.send_buf_bytes, h.recv_buf_bytes}) {
    if (b < kMinBuf || b > kMaxBuf)
      return fail(fmt::format("buffer size {} outside {}..{}", b, kMinBuf, kMaxBuf));
  }
  for (uint64_t b : {h.sndbuf_bytes, h.rcvbuf_bytes}) {
    if (b > kGiB) return fail(fmt::format("socket buffer {} above 1 GiB", b));
  }
  if (h.zstd_level < 1 || h.zstd_level > 19)
    return fail(fmt::format("zstd level {} outside 1..19", h.zstd_level));
  return {};
}

void log_line(const ServerConfig& cfg, const std::string& peer, const std::string& text) {
  if (!cfg.log) return;
  fmt::print("[{}] {} {}\n", timestamp(), peer, text);
  std::fflush(stdout);
}

void handle_client(Fd fd, const std::string& peer, const ServerConfig& cfg, PayloadCache& cache) {
  const ServerOptions& o = cfg.options;
  FdStream stream(fd.get());
  auto reject = [&](const std::string& why) {
    log_line(cfg, peer, "rejected: " + why);
    (void)send_message(stream, proto::ErrorMsg{why});
  };
  if (auto st = set_io_timeout(fd.get(), o.handshake_timeout_s); !st) {
    log_line(cfg, peer, "failed: " + st.error().message);
    return;
  }
  auto m = recv_message(stream);
  if (!m) {
    const bool timed_out = m.error().message.starts_with("timed out");
    reject(timed_out ? fmt::format("no hello within {} s", o.handshake_timeout_s)
                     : m.error().message);
    return;
  }
  auto* hello = std::get_if<proto::Hello>(&*m);
  if (!hello) return reject(fmt::format("expected HELLO, got {}", proto::type_name(*m)));
  if (auto st = validate_hello(*hello, o); !st) return reject(st.error().message);
  auto engine = make_engine(hello->engine);
  if (!engine) return reject(engine.error().message);
  if (auto st = apply_socket_options(fd.get(),
                                     {hello->sndbuf_bytes, hello->rcvbuf_bytes, hello->nodelay});
      !st)
    return reject(st.error().message);

  const bool server_sends = !hello->client_sends;
  DataPhase d;
  d.is_sender = server_sends;
  d.bytes = hello->bytes;
  d.buf_bytes = server_sends ? hello->send_buf_bytes : hello->recv_buf_bytes;
  d.decompress = hello->decompress;
  if (server_sends) {
    PayloadSpec spec = cfg.local_payload.value_or(PayloadSpec{});
    if (!cfg.local_payload) {
      spec.seed = hello->seed;
      spec.cache_dir = o.cache_dir;
    }
    spec.bytes = hello->bytes;
    spec.zstd_level = static_cast<int>(hello->zstd_level);
    auto p = cache.get(spec);
    if (!p) return reject(p.error().message);
    d.payload = (*p)->bytes();
    d.payload_xxh3 = (*p)->xxh3;
    d.payload_decoded_bytes = (*p)->decoded_bytes;
  }
  if (auto st = send_message(stream, proto::Ack{IOBENCH_VERSION}); !st) {
    log_line(cfg, peer, "failed: " + st.error().message);
    return;
  }
  if (auto st = set_io_timeout(fd.get(), o.idle_timeout_s); !st) {
    log_line(cfg, peer, "failed: " + st.error().message);
    return;
  }
  SessionOutcome out = run_data_phase(stream, **engine, d, query_socket_info(fd.get()));
  const std::string what =
      fmt::format("{} {} buf {}", server_sends ? "sent" : "received",
                  format_bytes_human(out.mine.bytes), format_size(d.buf_bytes));
  if (!out.error.empty()) {
    log_line(cfg, peer, fmt::format("failed: {} ({})", out.error, what));
    return;
  }
  const auto& sender = server_sends ? out.mine : *out.peer;
  const auto& receiver = server_sends ? *out.peer : out.mine;
  if (auto st = verify_outcome(sender, receiver); !st) {
    log_line(cfg, peer, fmt::format("failed: {} ({})", st.error().message, what));
    return;
  }
  const double secs = static_cast<double>(out.mine.wall_ns) / 1e9;
  log_line(cfg, peer,
           fmt::format("ok: {} in {:.4f} s ({:.2f} Gbit/s), cpu {:.3f} s, {} calls, xxh3 ok", what,
                       secs, secs > 0 ? static_cast<double>(out.mine.bytes) * 8 / secs / 1e9 : 0.0,
                       static_cast<double>(out.mine.cpu_ns) / 1e9, out.mine.io_calls));
}

}  // namespace

[[noreturn]] void serve(int listen_fd, const ServerConfig& cfg) {
  PayloadCache cache;
  while (true) {
    std::string peer;
    auto fd = accept_client(listen_fd, peer);
    if (!fd) {
      log_line(cfg, "-", "accept failed: " + fd.error().message);
      continue;
    }
    handle_client(std::move(*fd), peer, cfg, cache);
  }
}

int run_server_command(const ServerOptions& o) {
  auto where = parse_host_port(o.listen, "--listen", kDefaultPort, true);
  if (!where) {
    fmt::print(stderr, "iobench: error: {}\n", where.error().message);
    return 2;
  }
  auto listener = listen_on(*where);
  if (!listener) {
    fmt::print(stderr, "iobench: error: {}\n", listener.error().message);
    return 1;
  }
  HostPort bound = *where;
  bound.port = local_port(listener->get());
  if (!is_loopback_host(where->host))
    fmt::print(stderr, "iobench: warning: listening on {} without authentication\n", bound.str());
  fmt::print("iobench server {} listening on {}\n", IOBENCH_VERSION, bound.str());
  std::fflush(stdout);
  serve(listener->get(), ServerConfig{o, std::nullopt, !o.quiet});
}

}  // namespace iobench
