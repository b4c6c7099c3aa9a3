// The server's accept loops: every client on its own thread (at most --max-conns sessions at
// once), one loop per port; `iobench server`'s start-up and its orderly stop on a signal.
#include <fmt/format.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>

#include "net/address.h"
#include "net/interrupt.h"
#include "net/local_peer.h"
#include "net/socket.h"
#include "net/systemd_sockets.h"
#include "probe/syscall_counter.h"
#include "server/server.h"
#include "server/server_state.h"
#include "tls/tls.h"

namespace iobench {

namespace {

// Out of descriptors or kernel memory: accept fails at once until a session ends and frees
// one, so retrying at once spins a CPU. Back off, doubling to a second, and log once per spell.
bool out_of_resources(int e) { return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM; }

class AcceptBackoff {
 public:
  // Waits after a failed accept (only when it ran out of resources); logs the spell's start.
  void after_failure(const Error& e, const ServerConfig& cfg) {
    if (!out_of_resources(e.sys_errno)) {
      log_line(cfg, "-", "accept failed: " + e.message);
      return;
    }
    if (pause_ms_ == 0)
      log_line(cfg, "-", fmt::format("accept failed: {}; backing off until one is free",
                                     e.message));
    pause_ms_ = pause_ms_ == 0 ? kFirstMs : std::min(2 * pause_ms_, kMaxMs);
    ++failures_;
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms_));
  }
  void after_success(const ServerConfig& cfg) {
    if (pause_ms_ != 0)
      log_line(cfg, "-", fmt::format("accepting again after {} failed accepts", failures_));
    pause_ms_ = 0;
    failures_ = 0;
  }

 private:
  static constexpr int kFirstMs = 10, kMaxMs = 1000;
  int pause_ms_ = 0;
  uint64_t failures_ = 0;
};

// What the pre-auth gate counts connections by: a local peer's UID (one user on this host is
// one source however many loopback addresses it opens from), else the peer's network block
// (--source-block-v4/-v6), so a flood rotating addresses within one block is one source.
std::string source_of(int fd, const std::string& peer, const ServerOptions& o) {
  return client_key(fd, peer, static_cast<int>(o.source_block_v4),
                    static_cast<int>(o.source_block_v6));
}

// One session's handler, and the one place its failures end: an exception (an allocation or a
// thread the system refused, whatever threw) ends this session — its socket closed as the stack
// unwinds — and is counted and logged in one line; the server serves the next client.
void handle_contained(Fd fd, PreAuthGate::Ticket ticket, const std::string& peer,
                      const std::string& client, const ServerConfig& cfg,
                      ServerState& state) noexcept {
  std::string why;
  try {
    handle_client(std::move(fd), std::move(ticket), peer, client, cfg, state);
    return;
  } catch (const std::exception& e) {
    why = e.what();
  } catch (...) {
    why = "an exception of unknown type";
  }
  const uint64_t n = ++state.failed_handlers;
  try {
    log_line_always(peer, fmt::format("failed: the session's handler ended on {} (session "
                                      "closed; {} handler(s) failed since start)",
                                      why, n));
  } catch (...) {  // a log line that cannot be formatted (out of memory) is lost, not fatal
  }
}

// One port's accept loop: a thread per client (or each in turn on this one: `serial`), until a
// signal shuts the listener down.
void accept_loop(int listen_fd, const ServerConfig& cfg, const std::shared_ptr<ServerState>& state) {
  const uint32_t max_threads = 2 * cfg.options.max_conns;
  interrupt::Registration listener(listen_fd);  // a signal ends accept()
  AcceptBackoff backoff;
  while (!interrupt::received()) {
    std::string peer;
    auto fd = accept_client(listen_fd, peer);
    if (!fd) {
      if (interrupt::received()) break;
      backoff.after_failure(fd.error(), cfg);
      continue;
    }
    backoff.after_success(cfg);
    // Up to --max-conns sessions run; as many more get a handler that refuses them with a
    // reason after their HELLO. When every handler is taken, one unauthenticated connection of
    // the busiest source is cut to make room (the gate's rule: docs/hardening.md), while the cut
    // ones' threads end (bounded: twice the handlers). Past that, while a flood's cut threads
    // are still ending (slow on a loaded host), a newcomer from a source holding nothing here
    // gets a handler up to three times the handlers (the gate then cuts the busiest source's,
    // as ever); otherwise the new one is closed at once.
    const std::string source = source_of(fd->get(), peer, cfg.options);
    const uint32_t busy = state->sessions.load();
    const bool room =
        busy < max_threads ||
        (busy < 2 * max_threads && state->preauth && state->preauth->make_room(source)) ||
        (busy < 3 * max_threads && state->preauth && !state->preauth->holds(source));
    if (!room) {
      if (state->preauth) state->preauth->count(PreAuthEvent::kClosedBusy);
      if (!state->preauth || state->preauth->may_log(PreAuthEvent::kClosedBusy))
        log_line(cfg, peer,
                 fmt::format("closed: {} handlers busy (--max-conns {})", state->sessions.load(),
                             cfg.options.max_conns));
      log_preauth_summary(cfg, *state);
      continue;
    }
    ++state->sessions;
    // The pre-auth clock starts at accept; at the gate's cap room is made first.
    PreAuthGate::Ticket ticket = state->preauth ? state->preauth->admit(fd->get(), source)
                                                : PreAuthGate::Ticket{};
    auto session = [fd = std::move(*fd), ticket = std::move(ticket), peer, source, &cfg,
                    state]() mutable {  // state: a shared_ptr copy
      handle_contained(std::move(fd), std::move(ticket), peer, source, cfg, *state);
      if (interrupt::received()) ++state->ended_stopping;
      --state->sessions;
    };
    if (cfg.serial) {
      session();
      continue;
    }
    // A thread the system will not start (its thread or memory limit: std::system_error, or
    // bad_alloc) refuses this client alone: the session is destroyed, closing its socket.
    try {
      std::thread(std::move(session)).detach();
    } catch (const std::exception& e) {
      --state->sessions;
      // Counted and summarised as every other refusal: a flood under RLIMIT_NPROC wrote
      // 81,434 of these lines (8.9 MB) in 10 s.
      if (state->preauth) state->preauth->count(PreAuthEvent::kNoThread);
      if (!state->preauth || state->preauth->may_log(PreAuthEvent::kNoThread))
        log_line(cfg, peer, fmt::format("refused: no thread for its handler ({})", e.what()));
      log_preauth_summary(cfg, *state);
    }
  }
}

// --memory-budget, or a quarter of the host's memory: what the sessions may make it hold.
uint64_t memory_budget(const ServerOptions& o) {
  if (o.memory_budget != 0) return o.memory_budget;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 4
                               : kGiB;
}

}  // namespace

int serve(const std::vector<ListeningPort>& ports) {
  const ServerConfig& first = ports.front().cfg;
  // Blocks of 256 KiB and more (payload chunks, frames, large buffers) straight from mmap and
  // back to the kernel when freed. glibc's threshold otherwise rises to the largest block freed
  // (up to 32 MiB), and the session threads' arenas then keep megabytes freed but resident that
  // no budget counts: RSS 7 -> 101 MiB under --memory-budget 64M in the 20 s server fuzz, 29
  // MiB with this. Not for loopback's private server (serial: one client, its own), whose
  // buffers are part of what a run measures and stay as they were.
  if (!first.serial) (void)mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  // Opened here, on the main thread, so the counters follow every session thread (inherit).
  if (first.kernel_counters) (void)process_syscall_counter();
  // Shared by the ports' loops and the (detached) session threads: the last one out frees it.
  const ServerOptions& o = first.options;
  auto state = std::make_shared<ServerState>(
      PayloadCache::Limits{o.max_builds, o.max_build_time_s, 0});
  state->memory.set_limit(memory_budget(first.options));
  // Unauthenticated connections may take every handler (2 x --max-conns), one of the busiest
  // source's cut when a new one finds none free (accept_loop).
  if (!first.serial)
    state->preauth = std::make_unique<PreAuthGate>(2 * first.options.max_conns,
                                                   first.options.handshake_timeout_s);
  std::vector<std::thread> others;
  for (size_t i = 1; i < ports.size(); ++i)
    others.emplace_back([&ports, i, &state] { accept_loop(ports[i].fd, ports[i].cfg, state); });
  accept_loop(ports.front().fd, first, state);
  for (std::thread& t : others) t.join();
  // Stopping: every session's socket was shut down by the handler, so each ends (and logs) at
  // once; wait for them, bounded, so their lines and sockets are gone before the process.
  const int sig = interrupt::received();
  for (int i = 0; i < 1000 && state->sessions.load() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  // In flight at the signal: those that ended since and those still ending. Counted after the
  // wait: a session the signal aborts can end before this thread leaves its accept loop.
  const uint32_t ending = state->sessions.load();
  const uint32_t in_flight = state->ended_stopping.load() + ending;
  log_line(first, "-",
           fmt::format("stopping on {}: {} session(s) were in flight, {} still ending",
                       interrupt::name(sig), in_flight, ending));
  // Under --quiet too, as the gate's summaries: what the server refused before anyone spoke.
  if (state->preauth && state->preauth->any())
    log_line_always("-", "pre-auth since start: " + state->preauth->totals());
  if (const uint64_t failed = state->failed_handlers.load())
    log_line_always("-", fmt::format("{} session handler(s) ended on an exception since start",
                                     failed));
  return 0;
}

int serve(int listen_fd, const ServerConfig& cfg) { return serve({ListeningPort{listen_fd, cfg}}); }

namespace {

// A listening socket on an address given as `option` (or handed over by systemd), with the
// address it got.
struct Bound {
  Fd fd;
  std::string where;  // HOST:PORT
  bool loopback = false;
};

// The exit status is 2 for a bad address, 1 when it cannot be bound; the error is printed.
std::expected<Bound, int> bind_port(const std::string& text, const char* option,
                                    uint16_t default_port) {
  auto where = parse_host_port(text, option, default_port, true);
  if (!where) {
    print_error(where.error().message);
    return std::unexpected(2);
  }
  auto fd = listen_on(*where);
  if (!fd) {
    print_error(fd.error().message);
    return std::unexpected(1);
  }
  where->port = local_port(fd->get());
  const bool loopback = is_loopback_socket(fd->get());
  return Bound{std::move(*fd), where->str(), loopback};
}

struct Ports {
  Bound main;
  std::optional<Bound> tls;  // --tls-listen's, apart from --listen's
};

// The ports to serve: systemd's sockets in the order its .socket unit lists them stand for
// --listen and then --tls-listen; what they leave is bound here.
std::expected<Ports, int> open_ports(const ServerOptions& o) {
  auto inherited = sockets_from_systemd(2);
  if (!inherited) {
    print_error(inherited.error().message);
    return std::unexpected(2);
  }
  std::vector<Bound> from_systemd;
  for (InheritedSocket& s : *inherited) {
    const bool loopback = is_loopback_socket(s.fd.get());
    from_systemd.push_back({std::move(s.fd), s.where, loopback});
  }
  if (from_systemd.size() == 2 && o.tls.cert_file.empty()) {
    print_error(fmt::format(
        "systemd passed a second socket ({}), the TLS port: it needs --tls-cert and --tls-key",
        from_systemd[1].where));
    return std::unexpected(2);
  }
  std::optional<Bound> tls_port;
  if (from_systemd.size() == 2) {
    tls_port.emplace(std::move(from_systemd[1]));
  } else if (!o.tls_listen.empty()) {
    auto b = bind_port(o.tls_listen, "--tls-listen", kDefaultPort + 1);
    if (!b) return std::unexpected(b.error());
    tls_port.emplace(std::move(*b));
  }
  if (!from_systemd.empty()) return Ports{std::move(from_systemd[0]), std::move(tls_port)};
  auto main_port = bind_port(o.listen, "--listen", kDefaultPort);
  if (!main_port) return std::unexpected(main_port.error());
  return Ports{std::move(*main_port), std::move(tls_port)};
}

// --stdin-lease: the server lives while its controller keeps writing to its stdin. A sweep's
// ssh that dies with a silent link delivers no EOF (sshd notices hours later, if ever); the
// silence is noticed here, and the server stops as on SIGTERM (sessions aborted, logged).
void hold_stdin_lease(double lease_s) {
  std::thread([lease_s] {
    char buf[256];
    for (;;) {
      pollfd p{0, POLLIN, 0};
      const int rc = ::poll(&p, 1, static_cast<int>(lease_s * 1000));
      if (rc < 0 && errno == EINTR) continue;
      std::string why = "stdin read failed";
      if (rc == 0) {
        why = fmt::format("no word on stdin for {} s", lease_s);
      } else if (rc > 0) {
        const ssize_t n = ::read(0, buf, sizeof buf);
        if (n > 0 || (n < 0 && errno == EINTR)) continue;
        if (n == 0) why = "stdin closed";
      }
      log_line_always("-", fmt::format("stopping: {} (--stdin-lease {} s)", why, lease_s));
      ::kill(::getpid(), SIGTERM);
      return;
    }
  }).detach();
}

void warn_if_clear(const ServerOptions& o, const Bound& port) {
  if (port.loopback) return;
  fmt::print(stderr, "iobench: warning: listening on {} without TLS: {}\n", port.where,
             o.auth_token.empty() ? "no authentication, anyone who can connect can use it"
                                  : "the payload travels in clear (the token is proven, never "
                                    "sent)");
}

}  // namespace

int run_server_command(const ServerOptions& o) {
  interrupt::install({SIGINT, SIGTERM});
  set_process_counter_kind(o.kernel_counter);
  auto opened = open_ports(o);
  if (!opened) return opened.error();
  const Bound& main_port = opened->main;
  const std::optional<Bound>& tls_port = opened->tls;
  std::shared_ptr<const tls::Context> tls_ctx;
  if (!o.tls.cert_file.empty()) {
    auto ctx = tls::Context::server(o.tls, nullptr);
    if (!ctx) {
      print_error(ctx.error().message);
      return 1;
    }
    tls_ctx = std::make_shared<const tls::Context>(std::move(*ctx));
  }
  // With --tls-listen, --listen is the TCP port and the TLS one is apart; without, the one port
  // speaks TLS when there is a certificate.
  const bool main_tls = tls_ctx && !tls_port;
  if (!main_tls) warn_if_clear(o, main_port);
  const std::string tls_text = tls_ctx ? "tls, ktls " + tls_ctx->ktls_status() : "";
  fmt::print("iobench server {} listening on {} ({}){}{}\n", IOBENCH_VERSION,
             main_port.where, main_tls ? tls_text : "tcp",
             tls_port ? fmt::format(" and {} ({})", tls_port->where, tls_text) : "",
             o.auth_token.empty() ? "" : "; clients must present the auth token");
  std::fflush(stdout);
  if (o.stdin_lease_s > 0) hold_stdin_lease(o.stdin_lease_s);
  std::vector<ListeningPort> ports;
  ports.push_back({main_port.fd.get(), ServerConfig{o, std::nullopt, !o.quiet,
                                                     main_tls ? tls_ctx : nullptr,
                                                     tls_port ? tls_port->where : ""}});
  if (tls_port)
    ports.push_back({tls_port->fd.get(), ServerConfig{o, std::nullopt, !o.quiet, tls_ctx, ""}});
  return serve(ports);
}

}  // namespace iobench
