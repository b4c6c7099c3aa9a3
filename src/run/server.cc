// The server: every client on its own thread (at most --max-conns sessions at once), each
// time-boxed, each logged in one line; no client can take it down. The connections of one
// --conns run form a group that measures the server side as a whole.
#include <fmt/format.h>
#include <signal.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "cli/size.h"
#include "engine/engine.h"
#include "net/interrupt.h"
#include "net/socket.h"
#include "payload/payload.h"
#include "proto/fields.h"
#include "probe/placement.h"
#include "probe/probe.h"
#include "probe/syscall_counter.h"
#include "run/group.h"
#include "run/run.h"
#include "run/session.h"
#include "tls/tls.h"

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

// Keeps the last payload in memory so repeated runs of one size do not reload it. Shared by the
// session threads: a payload in use stays alive while a newer one replaces it. A session that
// builds a payload, or waits for another session's build, reports progress to its client about
// twice a second (so the client's no-progress timeout never fires while the server works).
class PayloadCache {
 public:
  using Report = std::function<bool(const proto::Progress&)>;  // false: stop (client gone)

  Result<std::shared_ptr<const Payload>> get(const PayloadSpec& spec, const Report& report) {
    // A plain mutex, polled: GCC 12's TSan does not intercept timed_mutex's clocked lock and
    // reports every unlock of one as an unlock of an unlocked mutex.
    std::unique_lock lock(mu_, std::defer_lock);
    auto next_report = std::chrono::steady_clock::now() + kReportEvery;
    while (!lock.try_lock()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (std::chrono::steady_clock::now() < next_report) continue;
      next_report += kReportEvery;
      if (!report({done_.load(), total_.load(), monotonic_ns() - start_ns_.load()}))
        return fail("the client went away while the payload was built");
    }
    if (payload_ && spec.bytes == spec_.bytes && spec.seed == spec_.seed &&
        spec.zstd_level == spec_.zstd_level && spec.file == spec_.file)
      return payload_;
    payload_.reset();
    const int64_t start = monotonic_ns();
    start_ns_ = start;
    int64_t last = start;
    BuildOptions build;
    build.progress = [&](uint64_t done, uint64_t total) {
      done_ = done;
      total_ = total;
      const int64_t now = monotonic_ns();
      if (done < total && now - last < kReportEvery.count() * 1'000'000) return true;
      last = now;
      return report({done, total, now - start});
    };
    auto p = load_payload(spec, build);
    done_ = total_ = 0;
    if (!p) return std::unexpected(p.error());
    payload_ = std::make_shared<const Payload>(std::move(*p));
    spec_ = spec;
    return payload_;
  }

 private:
  static constexpr std::chrono::milliseconds kReportEvery{500};
  std::mutex mu_;
  std::shared_ptr<const Payload> payload_;
  PayloadSpec spec_;
  std::atomic<uint64_t> done_{0}, total_{0};  // the build in progress, for waiting sessions
  std::atomic<int64_t> start_ns_{0};
};

// The groups of --conns runs in progress, by the id the client drew for the run.
class GroupTable {
 public:
  // The group for this HELLO, created by its first connection; a HELLO that disagrees with the
  // group's first about the run's shape is refused.
  Result<std::shared_ptr<GroupSide>> get(const proto::Hello& h, uint64_t fixed_buf,
                                         bool server_sends, double idle_s) {
    std::lock_guard lock(mu_);
    // Finished groups, and groups whose client went away (threads still in one hold it).
    std::erase_if(groups_, [idle_s](const auto& g) {
      return g.second.side->done() || g.second.side->idle_for(2 * idle_s);
    });
    auto it = groups_.find(h.group_id);
    if (it == groups_.end()) {
      auto side = std::make_shared<GroupSide>(
          make_policy(h.adaptive, {h.budget, h.buf_min, h.buf_max}, fixed_buf), server_sends,
          h.kernel_syscalls, h.conns);
      groups_.emplace(h.group_id, Entry{h, side});
      return side;
    }
    const proto::Hello& first = it->second.hello;
    if (first.conns != h.conns || first.adaptive != h.adaptive || first.budget != h.budget ||
        first.buf_min != h.buf_min || first.buf_max != h.buf_max ||
        first.client_sends != h.client_sends)
      return fail(fmt::format("HELLO of connection {} does not match its group {:016x}",
                              h.conn_index, h.group_id));
    return it->second.side;
  }

 private:
  struct Entry {
    proto::Hello hello;
    std::shared_ptr<GroupSide> side;
  };
  std::mutex mu_;
  std::map<uint64_t, Entry> groups_;
};

struct ServerState {
  PayloadCache payloads;
  GroupTable groups;
  std::atomic<uint32_t> sessions{0};  // handler threads alive
};

// Every size the client asks for is checked against the server's own limits.
Status validate_hello(const proto::Hello& h, const ServerOptions& o) {
  if (h.proto != "tcp" && h.proto != "tls")
    return fail(fmt::format("unsupported proto '{}'", h.proto));
  if (h.proto == "tls" && h.engine == "uring" && h.tls_io != "bio")
    return fail("engine uring over TLS needs the TLS I/O model bio");
  if (h.tuning.fixed_buffers && h.proto != "tcp") return fail("fixed buffers need proto tcp");
  if (auto st = check_fields(h, false); !st) return st;  // bounds in the field list
  if (auto st = check_cpu_usable(static_cast<int>(h.cpu), "server"); !st)
    return fail("--cpus: " + st.error().message);
  if (h.proto == "tls") {
    if (h.tls_io != "socket" && h.tls_io != "bio")
      return fail(fmt::format("unknown TLS I/O model '{}'", h.tls_io));
    if (h.tls_max_fragment < 512 || h.tls_max_fragment > 16384)
      return fail(fmt::format("TLS max fragment {} outside 512..16384", h.tls_max_fragment));
  }
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
  if (h.conns < 1 || h.conns > o.max_conns)
    return fail(fmt::format("{} connections asked for, this server's --max-conns is {}", h.conns,
                            o.max_conns));
  if (h.conn_index >= h.conns)
    return fail(fmt::format("connection index {} of {} connections", h.conn_index, h.conns));
  if (h.payload_bytes != 0 && (h.payload_bytes < h.bytes || h.payload_bytes > o.max_bytes))
    return fail(fmt::format("payload of {} bytes cannot hold {} bytes (limit {})", h.payload_bytes,
                            h.bytes, o.max_bytes));
  if (h.adaptive) {
    for (uint64_t b : {h.buf_min, h.buf_max}) {
      if (b < kMinBuf || b > kMaxBuf)
        return fail(fmt::format("buffer size {} outside {}..{}", b, kMinBuf, kMaxBuf));
    }
    if (h.budget > kGiB) return fail(fmt::format("budget {} above 1 GiB", h.budget));
    if (auto st = validate_limits({h.budget, h.buf_min, h.buf_max}, h.conns); !st) return st;
  }
  return {};
}

void log_line(const ServerConfig& cfg, const std::string& peer, const std::string& text) {
  if (!cfg.log) return;
  fmt::print("[{}] {} {}\n", timestamp(), peer, text);
  std::fflush(stdout);
}

// Looks at the first byte without consuming it: 0x16 opens a TLS ClientHello, 'I' our HELLO.
Result<bool> first_byte_is_tls(int fd, double timeout_s) {
  unsigned char b = 0;
  ssize_t n;
  do {
    n = ::recv(fd, &b, 1, MSG_PEEK);
  } while (n < 0 && errno == EINTR);
  if (n == 0) return fail("peer closed before saying hello");
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return fail(fmt::format("no hello within {} s", timeout_s));
    return fail(std::strerror(errno));
  }
  return b == 0x16;
}

// Sets up the transport the client chose, or explains why not (logged, and sent when possible).
Result<std::unique_ptr<Stream>> open_stream(int fd, const ServerConfig& cfg) {
  auto is_tls = first_byte_is_tls(fd, cfg.options.handshake_timeout_s);
  if (!is_tls) return std::unexpected(is_tls.error());
  if (*is_tls && !cfg.tls)
    return fail(
        "TLS ClientHello, but this server has no certificate (start it with "
        "--tls-cert/--tls-key)");
  if (!*is_tls) return std::unique_ptr<Stream>(std::make_unique<FdStream>(fd));
  auto t = tls::TlsStream::accept(*cfg.tls, fd);
  if (!t) return fail("TLS handshake failed: " + t.error().message);
  return std::unique_ptr<Stream>(std::move(*t));
}

void handle_client(Fd fd, const std::string& peer, const ServerConfig& cfg, ServerState& state) {
  const ServerOptions& o = cfg.options;
  interrupt::Registration on_signal(fd.get());  // SIGTERM aborts the session at once
  // Aborted: close with a reset, so a peer blocked in write() (our receive window full) learns
  // at once instead of at its own timeout.
  struct ResetIfStopping {
    int fd;
    ~ResetIfStopping() {
      if (!interrupt::received()) return;
      linger l{1, 0};
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
  } reset_if_stopping{fd.get()};
  // The TLS handshake and the whole HELLO must arrive within --handshake-timeout.
  const int64_t hello_deadline = monotonic_ns() + static_cast<int64_t>(o.handshake_timeout_s * 1e9);
  if (auto st = set_io_timeout(fd.get(), o.handshake_timeout_s); !st) {
    log_line(cfg, peer, "failed: " + st.error().message);
    return;
  }
  auto opened = open_stream(fd.get(), cfg);
  if (!opened) {
    log_line(cfg, peer, "rejected: " + opened.error().message);
    return;
  }
  Stream& stream = **opened;
  auto reject = [&](const std::string& why) {
    log_line(cfg, peer, "rejected: " + why);
    (void)send_message(stream, proto::ErrorMsg{why});
    stream.close();
  };
  auto m = recv_message(stream, hello_deadline);
  if (!m) {
    const bool timed_out = m.error().message.starts_with("timed out");
    reject(timed_out ? fmt::format("no hello within {} s", o.handshake_timeout_s)
                     : m.error().message);
    return;
  }
  auto* hello = std::get_if<proto::Hello>(&*m);
  if (!hello) return reject(fmt::format("expected HELLO, got {}", proto::type_name(*m)));
  // Before anything else about the request is looked at or answered in detail.
  if (!o.auth_token.empty() && !tls::constant_time_equal(hello->auth_token, o.auth_token))
    return reject(hello->auth_token.empty() ? "this server requires --auth-token"
                                            : "wrong --auth-token");
  if (cfg.tls && stream.kind() != "tls")
    return reject("this server requires TLS (use --proto tls)");
  if (hello->proto != stream.kind())
    return reject(
        fmt::format("HELLO asks for proto '{}' on a {} connection", hello->proto, stream.kind()));
  if (auto st = validate_hello(*hello, o); !st) return reject(st.error().message);
  if (state.sessions.load() > o.max_conns)
    return reject(fmt::format("server busy: {} sessions at once (--max-conns {})",
                              state.sessions.load() - 1, o.max_conns));
  if (hello->tuning.zerocopy && hello->proto != "tcp") return reject("zerocopy needs proto tcp");
  const bool server_sends = !hello->client_sends;
  const EngineOptions eo = side_engine_options(hello->tuning, server_sends, o.idle_timeout_s);
  auto engine = make_engine(hello->engine, eo);
  if (!engine) return reject(engine.error().message);
  if (auto st = apply_socket_options(fd.get(),
                                     {hello->sndbuf_bytes, hello->rcvbuf_bytes, hello->nodelay});
      !st)
    return reject(st.error().message);

  DataPhase d;
  d.is_sender = server_sends;
  d.bytes = hello->bytes;
  d.buf_bytes = server_sends ? hello->send_buf_bytes : hello->recv_buf_bytes;
  d.decompress = hello->decompress;
  d.kernel_syscalls = hello->kernel_syscalls;
  d.cpu = static_cast<int>(hello->cpu);
  const bool grouped = hello->conns > 1 || hello->adaptive;
  std::shared_ptr<GroupSide> group;
  if (grouped) {
    auto g = state.groups.get(*hello, d.buf_bytes, server_sends, o.idle_timeout_s);
    if (!g) return reject(g.error().message);
    group = std::move(*g);
    d.kernel_syscalls = false;  // the group counts the whole run
    d.thread_cpu = true;
  }
  if (auto* t = dynamic_cast<tls::TlsStream*>(&stream)) {
    if (auto st = t->configure(hello->tls_io, hello->tls_read_ahead, hello->tls_max_fragment,
                               d.buf_bytes);
        !st)
      return reject(st.error().message);
  }
  std::shared_ptr<const Payload> payload;
  if (server_sends) {
    PayloadSpec spec = cfg.local_payload.value_or(PayloadSpec{});
    if (!cfg.local_payload) {
      spec.seed = hello->seed;
      spec.cache_dir = o.cache_dir;
      spec.cache_max = o.cache_max;
    }
    spec.bytes = hello->payload_bytes ? hello->payload_bytes : hello->bytes;
    spec.zstd_level = static_cast<int>(hello->zstd_level);
    auto p = state.payloads.get(spec, [&](const proto::Progress& progress) {
      return !interrupt::received() && send_message(stream, progress).has_value();
    });
    if (!p) return reject(p.error().message);
    payload = std::move(*p);
    d.payload = payload->bytes().first(hello->bytes);
    d.payload_xxh3 = prefix_xxh3(*payload, hello->bytes);
    d.payload_decoded_bytes = payload->decoded_bytes;
    // Before the ACK: the client's receive clock starts once it has the ACK.
    if (auto st = (*engine)->prepare_send(d.payload); !st) return reject(st.error().message);
  }
  // The kernel counters see every thread of this process. A counting session (one connection)
  // lets the threads of sessions that just ended finish first — the previous session's thread
  // may still be reading its client's last message, logging and closing — so their syscalls do
  // not land in this window. Bounded: a truly concurrent client is not waited for (it shows in
  // the counts, as any other thread of the process would). Before the ACK, so outside the clocks.
  if (d.kernel_syscalls)
    for (int i = 0; i < 1000 && state.sessions.load() > 1; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (auto st = send_message(stream, proto::Ack{IOBENCH_VERSION}); !st) {
    log_line(cfg, peer, "failed: " + st.error().message);
    return;
  }
  if (auto st = set_io_timeout(fd.get(), o.idle_timeout_s); !st) {
    log_line(cfg, peer, "failed: " + st.error().message);
    return;
  }
  std::unique_ptr<LiveRegistry::Member> member;
  if (group) {
    member = group->join(hello->conn_index);
    d.follow = member.get();
    d.data_done = [&member] { member.reset(); };
  }
  SessionOutcome out = run_data_phase(stream, **engine, d, describe_transport(stream));
  if (group) {
    // Every connection of the run gets the server side's figures once the last one has ended.
    group->end(out.error.empty());
    if (out.error.empty()) (void)send_message(stream, group->wait(o.idle_timeout_s));
  }
  stream.close();
  const std::string what = fmt::format("{} {} buf {} over {}", server_sends ? "sent" : "received",
                                       format_bytes_human(out.mine.bytes), format_size(d.buf_bytes),
                                       out.mine.tls_version.empty() ? "tcp" : out.mine.tls_version);
  if (!out.error.empty()) {
    if (const int sig = interrupt::received())
      log_line(cfg, peer,
               fmt::format("aborted: server stopping on {}: {} ({})", interrupt::name(sig),
                           out.error, what));
    else
      log_line(cfg, peer, fmt::format("failed: {} ({})", out.error, what));
    return;
  }
  if (!out.peer) {
    log_line(cfg, peer, fmt::format("failed: no result from the client ({})", what));
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

int serve(int listen_fd, const ServerConfig& cfg) {
  // Opened here, on the main thread, so the counters follow every session thread (inherit).
  if (cfg.kernel_counters) (void)process_syscall_counter();
  // Shared with the (detached) session threads: the last one out frees it.
  auto state = std::make_shared<ServerState>();
  const uint32_t max_threads = 2 * cfg.options.max_conns;
  interrupt::Registration listener(listen_fd);  // a signal ends accept()
  while (!interrupt::received()) {
    std::string peer;
    auto fd = accept_client(listen_fd, peer);
    if (!fd) {
      if (interrupt::received()) break;
      log_line(cfg, "-", "accept failed: " + fd.error().message);
      continue;
    }
    // Up to --max-conns sessions run; as many more get a handler that refuses them with a
    // reason after their HELLO; beyond that, the connection is closed at once.
    if (state->sessions.load() >= max_threads) {
      log_line(cfg, peer,
               fmt::format("closed: {} handlers busy (--max-conns {})", state->sessions.load(),
                           cfg.options.max_conns));
      continue;
    }
    ++state->sessions;
    std::thread([fd = std::move(*fd), peer, &cfg, state]() mutable {  // state: a shared_ptr copy
      handle_client(std::move(fd), peer, cfg, *state);
      --state->sessions;
    })
        .detach();
  }
  // Stopping: every session's socket was shut down by the handler, so each ends (and logs) at
  // once; wait for them, bounded, so their lines and sockets are gone before the process.
  const int sig = interrupt::received();
  const uint32_t in_flight = state->sessions.load();
  for (int i = 0; i < 1000 && state->sessions.load() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  log_line(cfg, "-",
           fmt::format("stopping on {}: {} session(s) were in flight, {} still ending",
                       interrupt::name(sig), in_flight, state->sessions.load()));
  return 0;
}

int run_server_command(const ServerOptions& o) {
  interrupt::install({SIGINT, SIGTERM});
  set_process_counter_kind(counter_kind_from(o.kernel_counter).value_or(CounterKind::kAuto));
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
  std::shared_ptr<const tls::Context> tls_ctx;
  if (!o.tls.cert_file.empty()) {
    auto ctx = tls::Context::server(o.tls, nullptr);
    if (!ctx) {
      fmt::print(stderr, "iobench: error: {}\n", ctx.error().message);
      return 1;
    }
    tls_ctx = std::make_shared<const tls::Context>(std::move(*ctx));
  }
  HostPort bound = *where;
  bound.port = local_port(listener->get());
  if (!is_loopback_host(where->host) && !tls_ctx)
    fmt::print(stderr, "iobench: warning: listening on {} without TLS: {}\n", bound.str(),
               o.auth_token.empty() ? "no authentication, anyone who can connect can use it"
                                    : "the token and the payload travel in clear");
  fmt::print("iobench server {} listening on {} ({}{})\n", IOBENCH_VERSION, bound.str(),
             tls_ctx ? "tls" : "tcp", tls_ctx ? ", ktls " + tls_ctx->ktls_status() : "");
  std::fflush(stdout);
  return serve(listener->get(), ServerConfig{o, std::nullopt, !o.quiet, tls_ctx});
}

}  // namespace iobench
