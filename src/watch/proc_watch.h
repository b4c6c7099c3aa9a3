// What /proc tells about another process, for `iobench watch`: its CPU (the kernel's tick
// counters and its exact CPU clock), its name and state, and what each descriptor is.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace iobench {

struct ProcStat {
  std::string comm;
  char state = '?';  // 'Z': exited, not yet reaped
  pid_t ppid = 0;
  pid_t tgid = 0;    // from /proc/PID/status: differs from the id for a thread
  // clock ticks (sysconf(_SC_CLK_TCK)): the process's own, and its reaped children's
  uint64_t utime = 0, stime = 0, cutime = 0, cstime = 0;
  uint64_t cpu_ns = 0;  // the process's CPU clock (clock_getcpuclockid): exact; 0 when refused
};

// nullopt when the process is gone (reaped).
std::optional<ProcStat> read_proc_stat(pid_t pid);

// What each of `pid`'s descriptors is: tcp, udp, unix, socket, pipe, file, device, anon.
// Socket protocols come from the process's /proc/PID/net tables; `known_sockets` caches them
// across calls (inode -> kind).
std::map<int, std::string> descriptor_kinds(pid_t pid,
                                            std::map<uint64_t, std::string>& known_sockets);

}  // namespace iobench
