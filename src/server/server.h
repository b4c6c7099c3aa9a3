// The server: its configuration per listening port, the accept loops and `iobench server`.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/server_options.h"

namespace iobench {
namespace tls {
class Context;
}

struct ServerConfig {
  ServerOptions options;
  // Loopback only: the forked server sends this spec's payload (it may name a local file),
  // whatever the client's HELLO says about seed and level.
  std::optional<PayloadSpec> local_payload;
  bool log = true;
  // Set: the server speaks TLS only (a plain HELLO is refused); unset: TCP only.
  std::shared_ptr<const tls::Context> tls;
  // A TCP-only port whose server serves TLS on another (--tls-listen): that address, named to
  // a client that sends a ClientHello here.
  std::string tls_elsewhere;
  // Open the kernel syscall counters at start, on the main thread, so they follow every session
  // thread. Off when no client will ask (loopback with --syscalls off): registered tracepoints
  // slow every syscall on the host a little, even while the counters are disabled.
  bool kernel_counters = true;
  // Serve one client at a time on the accepting thread (loopback with one connection), so the
  // process stays single-threaded: a thread that shares its file table pays for every read and
  // write (the kernel takes and drops a reference on the socket's file instead of borrowing it),
  // measured ~3% of a one-CPU 4K loopback run's CPU.
  bool serial = false;
};

// A listening socket and how its clients are served.
struct ListeningPort {
  int fd = -1;
  ServerConfig cfg;
};

// Serves clients, each on its own thread (one at a time on the accepting thread: `serial`), on
// every port (one accept loop each, one set of sessions, payloads and groups) until
// SIGINT/SIGTERM (interrupt::install); then aborts the sessions in flight, waits for them
// (bounded) and returns the exit status.
int serve(const std::vector<ListeningPort>& ports);
int serve(int listen_fd, const ServerConfig& cfg);

int run_server_command(const ServerOptions& o);

}  // namespace iobench
