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

// The payload this process sends (none with --reverse: the server process sends, and finds it
// in the cache, built here first so it is not built inside the server's measured session).
Result<std::optional<Payload>> loopback_payload(const ClientOptions& o) {
  auto payload = sender_payload(o);
  if (o.reverse && payload)
    if (auto p = load_payload_shown(sender_payload_spec(o), o.quiet); !p)
      return std::unexpected(p.error());
  return payload;
}

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

int error_exit(const std::string& message) {
  fmt::print(stderr, "iobench: error: {}\n", message);
  return 1;
}

}  // namespace

int run_loopback(const ClientOptions& o, ReportFiles& files) {
  const int64_t payload_start = probe_now().cpu_ns;
  auto payload = loopback_payload(o);
  if (!payload) {
    error_exit(payload.error().message);
    return interrupt::received() ? 128 + interrupt::received() : 1;
  }
  const int64_t payload_ns = probe_now().cpu_ns - payload_start;
  // TLS on loopback needs no files: a key and certificate made in memory, which the forked
  // server presents and the client pins.
  std::optional<tls::Identity> identity;
  if (o.proto == Proto::kTls) {
    auto id = tls::make_ephemeral_identity();
    if (!id) return error_exit(id.error().message);
    identity = std::move(*id);
  }
  auto listener = listen_on(HostPort{"127.0.0.1", 0});
  if (!listener) return error_exit(listener.error().message);
  const HostPort server{"127.0.0.1", local_port(listener->get())};
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) return error_exit(fmt::format("fork: {}", std::strerror(errno)));
  if (child == 0) {
    payload->reset();  // the parent's copy is not the server's business
    serve_as_child(listener->get(), loopback_config(o, server), o, identity, parent);
  }
  listener->reset();

  Report report;
  report.context = collect_context();
  report.options = o;
  report.mode = RunMode::kLoopback;
  report.server = server.str();
  report.payload_source = describe_payload(o.payload);
  std::string error;
  const std::optional<Payload>& mine = *payload;
  auto done = run_all(plan_client(o, {server}), mine ? &*mine : nullptr,
                      identity ? &*identity : nullptr, child, std::move(report), error);
  // Reaped before the report: the server's whole CPU is part of the run's cost, and anything
  // measuring this process from outside (GNU time, a parent's RUSAGE_CHILDREN) then sees it.
  const auto server_times = reap_server(child, 5.0);
  if (done) time_tls_crypto(*done);
  if (done) finish_process_cpu(*done, payload_ns, server_times);
  return finish_client(o, files, std::move(done), error);
}

}  // namespace iobench
