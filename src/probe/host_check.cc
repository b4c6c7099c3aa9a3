#include "probe/host_check.h"

#include <fmt/format.h>
#include <linux/io_uring.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "probe/syscall_counter.h"

namespace iobench {
namespace {

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string which(const std::string& tool) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = dir;
    candidate += '/';
    candidate += tool;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

HostCheck hardware_counters() {
  perf_event_attr a{};
  a.size = sizeof a;
  a.type = PERF_TYPE_HARDWARE;
  a.config = PERF_COUNT_HW_CPU_CYCLES;
  a.disabled = true;
  const int fd = static_cast<int>(syscall(SYS_perf_event_open, &a, 0, -1, -1, 0));
  if (fd < 0) return {"hardware counters", false, fmt::format("cycles: {}", std::strerror(errno))};
  ::close(fd);
  return {"hardware counters", true, "cycles counter opens"};
}

HostCheck io_uring() {
  const std::string disabled = first_line("/proc/sys/kernel/io_uring_disabled");
  io_uring_params p{};
  const int fd = static_cast<int>(syscall(SYS_io_uring_setup, 4, &p));
  if (fd < 0)
    return {"io_uring", false,
            fmt::format("io_uring_setup: {}{}", std::strerror(errno),
                        disabled.empty() ? "" : " (kernel.io_uring_disabled=" + disabled + ")")};
  ::close(fd);
  return {"io_uring", true,
          fmt::format("io_uring_setup works, features 0x{:x}{}", p.features,
                      disabled.empty() ? "" : ", kernel.io_uring_disabled=" + disabled)};
}

HostCheck default_route_mtu() {
  std::ifstream in("/proc/net/route");
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string iface, dest;
    f >> iface >> dest;
    if (dest == "00000000") {
      const std::string mtu = first_line("/sys/class/net/" + iface + "/mtu");
      return {"route MTU", true,
              fmt::format("default route via {}: MTU {}; lo: MTU {}", iface, mtu,
                          first_line("/sys/class/net/lo/mtu"))};
    }
  }
  return {"route MTU", false,
          fmt::format("no default route; lo: MTU {}", first_line("/sys/class/net/lo/mtu"))};
}

}  // namespace

std::vector<HostCheck> check_host() {
  std::vector<HostCheck> out;
  utsname u{};
  uname(&u);
  out.push_back({"kernel", true, fmt::format("{} {} {}", u.sysname, u.release, u.machine)});
  out.push_back({"cpus", true, fmt::format("{} online", sysconf(_SC_NPROCESSORS_ONLN))});
  const std::string paranoid = first_line("/proc/sys/kernel/perf_event_paranoid");
  out.push_back({"perf_event_paranoid", true, paranoid.empty() ? "unknown" : paranoid});
  {
    // Both backends, each on its own: doctor says what this host offers, not what auto picks.
    const std::string tracefs = find_tracefs();
    SyscallCounter bpf(CounterKind::kBpf);
    out.push_back({"bpf syscall counter", bpf.available(),
                   bpf.available()
                       ? "eBPF on the raw sys_enter tracepoint (--syscalls auto uses it)"
                       : bpf.reason()});
    SyscallCounter perf(CounterKind::kTracepoints);
    out.push_back({"perf tracepoints", perf.available(),
                   perf.available() ? fmt::format("syscall tracepoints counted from {}", tracefs)
                                    : perf.reason()});
    SyscallCounter task_io(CounterKind::kTaskIo);
    out.push_back({"task I/O accounting", task_io.available(),
                   task_io.available()
                       ? "read/write-family syscall counts, free (--syscalls taskio)"
                       : task_io.reason()});
  }
  out.push_back(hardware_counters());
  out.push_back(io_uring());
  for (const char* tool : {"strace", "perf"}) {
    const std::string path = which(tool);
    out.push_back({tool, !path.empty(), path.empty() ? "not on PATH" : path});
  }
  out.push_back(default_route_mtu());
  const std::string governor = first_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
  out.push_back({"cpu governor", !governor.empty(), governor.empty() ? "no cpufreq" : governor});
  out.push_back({"clocksource", true,
                 first_line("/sys/devices/system/clocksource/clocksource0/current_clocksource")});
  out.push_back(
      {"transparent hugepages", true, first_line("/sys/kernel/mm/transparent_hugepage/enabled")});
  return out;
}

}  // namespace iobench
