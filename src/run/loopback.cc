// Loopback mode: a private server in a forked process (so the two sides' CPU figures never mix)
// on 127.0.0.1 with an ephemeral port, and the client in this process.
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>

#include "net/socket.h"
#include "probe/probe.h"
#include "run/client_internal.h"
#include "run/progress.h"
#include "run/run.h"
#include "tls/tls.h"

namespace iobench {

int run_loopback(const ClientOptions& o, ReportFiles& files) {
  const int64_t payload_start = probe_now().cpu_ns;
  auto payload = sender_payload(o);
  if (o.reverse && payload) {
    // The server process sends: make sure the cache holds the payload before it is asked for.
    if (auto p = load_payload_shown(o.payload, o.quiet); !p) payload = std::unexpected(p.error());
  }
  if (!payload) {
    fmt::print(stderr, "iobench: error: {}\n", payload.error().message);
    return interrupt::received() ? 128 + interrupt::received() : 1;
  }
  const int64_t payload_ns = probe_now().cpu_ns - payload_start;
  // TLS on loopback needs no files: a key and certificate made in memory, which the forked
  // server presents and the client pins.
  std::optional<tls::Identity> identity;
  if (o.proto == Proto::kTls) {
    auto id = tls::make_ephemeral_identity();
    if (!id) {
      fmt::print(stderr, "iobench: error: {}\n", id.error().message);
      return 1;
    }
    identity = std::move(*id);
  }
  const HostPort any{"127.0.0.1", 0};
  auto listener = listen_on(any);
  if (!listener) {
    fmt::print(stderr, "iobench: error: {}\n", listener.error().message);
    return 1;
  }
  const HostPort server{"127.0.0.1", local_port(listener->get())};

  ServerConfig cfg;
  cfg.options.listen = server.str();
  cfg.options.idle_timeout_s = o.timeout_s;
  cfg.local_payload = o.payload;
  cfg.log = o.verbose;
  cfg.options.max_conns = std::max(cfg.options.max_conns, o.conns);
  cfg.kernel_counters = o.syscalls != SyscallsMode::kOff;

  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) {
    fmt::print(stderr, "iobench: error: fork: {}\n", std::strerror(errno));
    return 1;
  }
  if (child == 0) {
    // The server must not outlive the client, whatever happens to it.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    payload->reset();  // the parent's copy is not the server's business
    if (cfg.log) {
      // Server log lines go to stderr in loopback, so stdout stays the client's report.
      dup2(STDERR_FILENO, STDOUT_FILENO);
    }
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
    _exit(serve(listener->get(), cfg));
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
  auto done = run_all(o, server, mine ? &*mine : nullptr, identity ? &*identity : nullptr, child,
                      std::move(report), error);
  // Reaped before the report: the server's whole CPU is part of the run's cost, and anything
  // measuring this process from outside (GNU time, a parent's RUSAGE_CHILDREN) then sees it.
  const auto server_times = reap_server(child, 5.0);
  if (done) time_tls_crypto(*done);
  if (done) finish_process_cpu(*done, payload_ns, server_times);
  return finish_client(o, files, std::move(done), error);
}

}  // namespace iobench
