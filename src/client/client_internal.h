// Pieces of the client shared with loopback mode (not part of the public run API).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "engine/engine.h"
#include "net/address.h"
#include "net/interrupt.h"
#include "net/socket.h"
#include "net/stream.h"
#include "payload/payload.h"
#include "probe/probe.h"
#include "report/output.h"
#include "client/client_plan.h"
#include "report/report.h"
#include "session/plan.h"
#include "tls/tls.h"

namespace iobench {

// A connected, greeted session: the server has ACKed the HELLO. The stream uses the descriptor;
// `side` is the connection's plan, prepared (prepare_side) with the payload it streams.
struct ClientSession {
  Fd fd;
  std::optional<interrupt::Registration> on_signal;  // Ctrl-C shuts the socket down
  std::unique_ptr<Stream> stream;
  SidePlan side;
};

// Connects `conn` to its server (reach.servers[conn.server]), shakes hands, prepares this side
// (prepare_side) with the payload it streams and sends the HELLO with `group_id` (0: a lone
// connection); returns once the server has ACKed it.
Result<ClientSession> open_session(const ClientPlan& plan, const ClientReach& reach,
                                   const ConnPlan& conn, uint64_t group_id,
                                   const tls::Context* tls_ctx, Engine& engine);

// One group run (--conns, --buf adaptive, --fanout): every connection on its own thread, each
// verified on its own. A record comes back whenever the run started; record.group->error says
// what failed.
Result<RunRecord> run_group(const ClientPlan& plan, const ClientReach& reach, const SizePlan& size,
                            const RunConns& run, const tls::Context* tls_ctx);

// Runs every size's steps where `reach` says. On the first failure, `error` is set and the
// report holds the runs completed so far.
Result<Report> run_all(const ClientPlan& plan, const ClientReach& reach, Report report,
                       std::string& error);
// Prints the report (if any) and the error (if any); returns the exit code.
int finish_client(const ReportPlan& plan, ReportFiles& files, Result<Report> report,
                  const std::string& error);

// Loopback mode (client/loopback.cc): a private server forked on 127.0.0.1 with an ephemeral
// port, so the two sides' CPU figures never mix; the client runs in this process.
struct LocalServer {
  HostPort addr;
  pid_t pid = 0;
  std::optional<tls::Identity> identity;  // TLS: made in memory, the only one the client trusts
};
// Forks the private server; `payload` is dropped in the child.
Result<LocalServer> start_local_server(const LoopbackPlan& plan, std::optional<Payload>& payload);

// TLS runs: times the cipher on this host for the report's "tls cost" (before the process CPU is
// taken, so its ~40 ms land in the client's `rest`).
void time_tls_crypto(Report& report);

// Whole-process CPU (client/process_cpu.cc). Adds one run's data-phase CPU to each process's tally.
void tally_data_phases(Report& report, const RunRecord& run, bool measured);
// Stops the loopback server (SIGTERM, then SIGKILL after `timeout_s`) and reaps it: its CPU.
std::optional<ProcessTimes> reap_server(pid_t child, double timeout_s);
// Sets each process's whole CPU: this one so far, the reaped server (absent in two-host mode:
// a long-lived process elsewhere) and the reaped strace/perf tools.
void finish_process_cpu(Report& report, int64_t payload_ns,
                        const std::optional<ProcessTimes>& server);

}  // namespace iobench
