// The report's whole-process CPU: each process's total beside what its data phases account for.
#include <fmt/format.h>

#include "report/report.h"

namespace iobench {
namespace {
double seconds(int64_t ns) { return static_cast<double>(ns) / 1e9; }
}  // namespace

std::string process_cpu_lines(const std::vector<ProcessCpu>& processes) {
  if (processes.empty()) return "";
  std::string out = "process CPU (whole processes, reaped; data phases = the table's runs):\n";
  double total = 0;
  for (const ProcessCpu& p : processes) {
    total += seconds(p.cpu_ns);
    out += fmt::format("  {:<8} {:.3f} s (user {:.3f}, sys {:.3f})", name_of(p.host),
                       seconds(p.cpu_ns),
                       static_cast<double>(p.user_us) / 1e6, static_cast<double>(p.sys_us) / 1e6);
    if (p.host == ProcessKind::kTracers) {
      out += ": strace/perf, all of it outside the data phases\n";
      continue;
    }
    out += fmt::format(": data phases {:.3f}{}, warm-up/counting runs {:.3f}, payload {:.3f}, rest "
                       "{:.3f} (start-up, handshakes, control messages, exit)\n",
                       seconds(p.measured_ns),
                       p.phase_unreported ? " (+ an interrupted one not reported, inside rest)" : "",
                       seconds(p.other_runs_ns), seconds(p.payload_ns), seconds(p.rest_ns()));
  }
  if (processes.size() > 1) out += fmt::format("  {:<8} {:.3f} s\n", "all", total);
  return out;
}

nlohmann::json process_cpu_json(const std::vector<ProcessCpu>& processes) {
  nlohmann::json out = nlohmann::json::object();
  for (const ProcessCpu& p : processes)
    out[std::string(name_of(p.host))] = {{"cpu_s", seconds(p.cpu_ns)},
                   {"cpu_user_s", static_cast<double>(p.user_us) / 1e6},
                   {"cpu_sys_s", static_cast<double>(p.sys_us) / 1e6},
                   {"data_phases_cpu_s", seconds(p.measured_ns)},
                   {"other_runs_cpu_s", seconds(p.other_runs_ns)},
                   {"payload_cpu_s", seconds(p.payload_ns)},
                   {"rest_cpu_s", seconds(p.rest_ns())}};
  return out;
}

}  // namespace iobench
