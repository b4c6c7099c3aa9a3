// Orchestration: the server loop, the client's runs over sizes and repeats, loopback mode.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/options.h"

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
};

// A listening socket and how its clients are served.
struct ListeningPort {
  int fd = -1;
  ServerConfig cfg;
};

// Serves clients, each on its own thread, on every port (one accept loop each, one set of
// sessions, payloads and groups) until SIGINT/SIGTERM (interrupt::install); then aborts the
// sessions in flight, waits for them (bounded) and returns the exit status.
int serve(const std::vector<ListeningPort>& ports);
int serve(int listen_fd, const ServerConfig& cfg);

int run_server_command(const ServerOptions& o);
// With o.connect empty: loopback (forks a private server); otherwise two-host client.
int run_client_command(const ClientOptions& o);
int run_payload_command(const PayloadCommand& c);
// Counts the processes' syscalls and I/O sizes until the end condition; prints the report.
int run_watch_command(const WatchCommand& c);
// Prints one line per host check; exits 0 (a missing feature is information, not an error).
int run_doctor_command();

}  // namespace iobench
