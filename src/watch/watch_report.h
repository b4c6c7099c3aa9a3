// `iobench watch`'s report: per watched process, its CPU, its syscalls by name and its reads and
// writes by descriptor kind with their sizes; rendered as a table, JSON (with the context and
// sources blocks of a results file) and CSV.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "watch/bpf_watch.h"
#include "watch/proc_watch.h"

namespace iobench {

// One kind of descriptor (tcp, pipe, file, ...) and one direction (read or write).
struct WatchIo {
  std::string kind, family;
  uint64_t calls = 0, bytes = 0, errors = 0, zero = 0;  // zero: results of 0 bytes (EOF)
  std::map<int64_t, uint64_t> sizes;   // result -> calls (errors as -errno)
  std::map<int, uint64_t> descriptors;  // fd -> calls
};

struct WatchProcess {
  pid_t pid = 0, root = 0;  // root == pid: named by --pid; else forked after the watch began
  std::string comm;
  bool exited = false;  // gone (or a zombie) by the end
  // Its own CPU over the watch (a child: its whole life): exact from its CPU clock when it was
  // last sampled, the user/sys split from /proc ticks.
  double cpu_s = 0, cpu_user_s = 0, cpu_sys_s = 0;
  // False when the process vanished between two samples: its CPU is up to its last sample (a
  // child's whole life is then in its root's reaped_children_cpu_s, once reaped).
  bool cpu_complete = false;
  // A root: CPU of the children it reaped during the watch (cutime + cstime grew by this).
  double reaped_children_cpu_s = 0;
  uint64_t syscalls_total = 0;
  std::vector<std::pair<std::string, uint64_t>> syscalls;  // named ones, then "other"
  std::vector<WatchIo> io;
};

struct WatchReport {
  std::vector<pid_t> roots;
  double duration_s = 0;
  std::string ended_by;
  double sample_interval_s = 0;
  uint64_t lost_calls = 0, lost_io = 0;
  std::vector<WatchProcess> processes;
  // --event-loop: the four classes of watch_bpf::LoopClass, in its order (empty without).
  std::vector<WatchCounts::LoopTimes> loop;
  int64_t large_write = 0;
  nlohmann::json context;
  std::string command;
};

// CPU samples of one watched process: the first (at the watch's start for a root) and the last
// seen. (Not probe/placement.h's CpuSamples, the CPUs a side ran on: one name, one class.)
struct ProcessCpuSamples {
  std::optional<ProcStat> first, last;
  bool complete = false;  // last holds the final times: seen exited (a zombie) or at the end
};

// Builds the report's processes from the kernel's counts, the descriptor kinds seen (tgid ->
// fd -> kind) and the CPU samples (tgid -> samples).
std::vector<WatchProcess> watch_processes(const WatchCounts& counts,
                                          const std::map<pid_t, std::map<int, std::string>>& kinds,
                                          const std::map<pid_t, ProcessCpuSamples>& cpu,
                                          const std::vector<pid_t>& roots, long ticks_per_s);

// "16384 x5548, 11 x465": the exact sizes that make up at least `share` of the calls (at most
// `max` of them), most frequent first.
std::vector<std::pair<int64_t, uint64_t>> top_sizes(const WatchIo& io, double share, size_t max);
// Power-of-two buckets: [0], [1,2), [2,4), ... -> calls (errors left out). Key: the lower bound.
std::map<uint64_t, uint64_t> size_histogram(const WatchIo& io);

void print_watch_table(const WatchReport& r);
// --event-loop's part of the table and of the JSON (watch_loop_output.cc).
void print_loop_table(const WatchReport& r);
nlohmann::json loop_json(const WatchReport& r);
nlohmann::json watch_json(const WatchReport& r);
std::string watch_csv(const WatchReport& r);

}  // namespace iobench
