// Loopback mode: a private server in a forked process (so the two sides' CPU figures never mix)
// on 127.0.0.1 with an ephemeral port, and the client in this process.
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>

#include "client/client_internal.h"
#include "net/socket.h"
#include "probe/probe.h"
#include "server/server.h"
#include "session/progress.h"
#include "tls/tls.h"

namespace iobench {

namespace {

ServerConfig loopback_config(const ClientOptions& o, const HostPort& server) {
  ServerConfig cfg;
  cfg.options.listen = server.str();
  // --fanout: a writer blocked on one replica starves the others; they wait twice its send
  // timeout (as a replica's repl-timeout outlasts one stalled write), so the writer's timeout
  // decides which replica is dropped.
  cfg.options.idle_timeout_s = o.fanout == FanoutShape::kOff ? o.timeout_s : 2 * o.timeout_s;
  cfg.local_payload = o.payload;
  cfg.log = o.verbose;
  cfg.options.max_conns = std::max(cfg.options.max_conns, o.conns);
  // One connection at a time (each run, the counting run): served on the server's one thread.
  cfg.serial = o.conns == 1;
  cfg.kernel_counters = o.syscalls != SyscallsMode::kOff;
  return cfg;
}

// The forked server process: serves on `listener` until the client stops it; never returns.
[[noreturn]] void serve_as_child(int listener, ServerConfig cfg, const ClientOptions& o,
                                 const std::optional<tls::Identity>& identity, pid_t parent) {
  // The server must not outlive the client, whatever happens to it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  // Server log lines go to stderr in loopback, so stdout stays the client's report.
  if (cfg.log) dup2(STDERR_FILENO, STDOUT_FILENO);
  if (identity) {
    tls::TlsOptions server_tls;
    server_tls.ktls = o.tls.ktls == tls::Ktls::kOff ? tls::Ktls::kOff : tls::Ktls::kAuto;
    server_tls.io = tls::io_model_for(o.tls, o.server_engine() == EngineKind::kUring);
    auto ctx = tls::Context::server(server_tls, &*identity);
    if (!ctx) {
      fmt::print(stderr, "iobench: error: loopback server: {}\n", ctx.error().message);
      _exit(1);
    }
    cfg.tls = std::make_shared<const tls::Context>(std::move(*ctx));
  }
  _exit(serve(listener, cfg));
}

}  // namespace

Result<std::optional<Payload>> loopback_payload(const ClientOptions& o) {
  auto payload = sender_payload(o);
  if (o.reverse && payload)
    if (auto p = load_payload_shown(sender_payload_spec(o), o.quiet); !p)
      return std::unexpected(p.error());
  return payload;
}

Result<LocalServer> start_local_server(const ClientOptions& o, std::optional<Payload>& payload) {
  LocalServer local;
  // TLS on loopback needs no files: a key and certificate made in memory, which the forked
  // server presents and the client pins.
  if (o.proto == Proto::kTls) {
    auto id = tls::make_ephemeral_identity();
    if (!id) return std::unexpected(id.error());
    local.identity = std::move(*id);
  }
  auto listener = listen_on(HostPort{"127.0.0.1", 0});
  if (!listener) return std::unexpected(listener.error());
  local.addr = HostPort{"127.0.0.1", local_port(listener->get())};
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = getpid();
  local.pid = fork();
  if (local.pid < 0) return fail(fmt::format("fork: {}", std::strerror(errno)));
  if (local.pid == 0) {
    payload.reset();  // the parent's copy is not the server's business
    serve_as_child(listener->get(), loopback_config(o, local.addr), o, local.identity, parent);
  }
  return local;
}

}  // namespace iobench
