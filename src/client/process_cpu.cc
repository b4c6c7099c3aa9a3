// Whole-process CPU beside the data phases: what running the tool cost outside its measurements.
#include <fmt/format.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>

#include "client/client_internal.h"
#include "probe/probe.h"

namespace iobench {
namespace {

ProcessCpu& entry(std::vector<ProcessCpu>& ps, ProcessKind host) {
  auto it = std::find_if(ps.begin(), ps.end(), [&](const auto& p) { return p.host == host; });
  if (it != ps.end()) return *it;
  ps.push_back(ProcessCpu{host});
  return ps.back();
}

void set_times(ProcessCpu& p, const ProcessTimes& t) {
  p.user_us = t.user_us;
  p.sys_us = t.sys_us;
  p.cpu_ns = t.cpu_ns();
}

}  // namespace

void tally_data_phases(Report& report, const RunRecord& run, bool measured) {
  const bool client_sends = !report.options.reverse;
  const proto::SideResult& client = client_sends ? run.sender : run.receiver;
  const proto::SideResult& server = client_sends ? run.receiver : run.sender;
  for (auto [host, side] :
       {std::pair{ProcessKind::kClient, &client}, {ProcessKind::kServer, &server}}) {
    ProcessCpu& p = entry(report.processes, host);
    (measured ? p.measured_ns : p.other_runs_ns) += side->probe.cpu_ns;
    if (!run.reported(side->is_sender)) p.phase_unreported = true;
  }
}

std::optional<ProcessTimes> reap_server(pid_t child, double timeout_s) {
  kill(child, SIGTERM);
  // Bounded: the server ends its sessions and unregisters its counters in well under a second;
  // one that does not is killed, so the client never hangs on it.
  const int64_t deadline = monotonic_ns() + static_cast<int64_t>(timeout_s * 1e9);
  int status = 0;
  rusage ru{};
  for (;;) {
    const pid_t got = wait4(child, &status, WNOHANG, &ru);
    if (got == child) break;
    if (got < 0 && errno != EINTR) return std::nullopt;
    if (monotonic_ns() > deadline) {
      kill(child, SIGKILL);
      if (wait4(child, &status, 0, &ru) != child) return std::nullopt;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return process_times_of(ru);
}

void finish_process_cpu(Report& report, int64_t payload_ns,
                        const std::optional<ProcessTimes>& server) {
  ProcessCpu& client = entry(report.processes, ProcessKind::kClient);
  set_times(client, process_times());
  client.payload_ns = payload_ns;
  if (server) {
    set_times(entry(report.processes, ProcessKind::kServer), *server);
  } else {
    // Two hosts: the server is a long-lived process elsewhere; its whole CPU is not this run's.
    std::erase_if(report.processes,
                  [](const auto& p) { return p.host == ProcessKind::kServer; });
  }
  // The strace/perf tools this process started and reaped, beyond the loopback server.
  const ProcessTimes children = process_times(true);
  const ProcessTimes tools{children.user_us - (server ? server->user_us : 0),
                           children.sys_us - (server ? server->sys_us : 0)};
  if (tools.cpu_ns() > 0) set_times(entry(report.processes, ProcessKind::kTracers), tools);
}

}  // namespace iobench
