// Loopback mode: a private server in a forked process (so the two sides' CPU figures never mix)
// on 127.0.0.1 with an ephemeral port, and the client in this process.
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "client/client_internal.h"
#include "net/socket.h"
#include "probe/probe.h"
#include "server/server.h"
#include "tls/tls.h"

namespace iobench {

namespace {

// The forked server process: serves on `listener` until the client stops it; never returns.
[[noreturn]] void serve_as_child(int listener, const LoopbackPlan& plan, const HostPort& addr,
                                 const std::optional<tls::Identity>& identity, pid_t parent) {
  // The server must not outlive the client, whatever happens to it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  ServerConfig cfg = plan.config;
  cfg.options.listen = addr.str();
  // Server log lines go to stderr in loopback, so stdout stays the client's report.
  if (cfg.log) dup2(STDERR_FILENO, STDOUT_FILENO);
  if (plan.tls && identity) {
    auto ctx = tls::Context::server(*plan.tls, &*identity);
    if (!ctx) {
      print_error("loopback server: " + ctx.error().message);
      _exit(1);
    }
    cfg.tls = std::make_shared<const tls::Context>(std::move(*ctx));
  }
  _exit(serve(listener, cfg));
}

}  // namespace

Result<LocalServer> start_local_server(const LoopbackPlan& plan, std::optional<Payload>& payload) {
  LocalServer local;
  // TLS on loopback needs no files: a key and certificate made in memory, which the forked
  // server presents and the client pins.
  if (plan.tls) {
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
    serve_as_child(listener->get(), plan, local.addr, local.identity, parent);
  }
  return local;
}

}  // namespace iobench
