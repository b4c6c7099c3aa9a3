// The watch's report: the kernel's counts grouped per process, descriptor kind and direction.
#include "watch/watch_report.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <bit>

#include "probe/bpf_counter.h"
#include "probe/syscall_counter.h"

namespace iobench {
namespace {

// The syscalls named in a watch's counts: those iobench counts in its runs, the other
// read/write-family calls a real server makes (sendfile, splice, pread64, pwrite64), and what a
// full sync does around them (fork, wait, open, fsync, close).
const std::vector<std::string>& sync_syscalls() {
  static const std::vector<std::string> names = {
      "openat", "close", "fsync", "fdatasync", "clone", "clone3", "wait4",
      "epoll_ctl", "socket", "accept", "accept4", "pipe", "pipe2"};
  return names;
}

const std::map<uint32_t, std::string>& named_syscalls() {
  static const std::map<uint32_t, std::string> names = [] {
    std::map<uint32_t, std::string> m;
    for (const auto* list : {&counted_syscall_names(), &watched_io_syscalls(), &sync_syscalls()})
      for (const std::string& n : *list)
        if (const long nr = syscall_number(n); nr >= 0) m[static_cast<uint32_t>(nr)] = n;
    return m;
  }();
  return names;
}

bool is_write(const std::string& name) {
  return name == "write" || name == "writev" || name == "sendto" || name == "sendmsg" ||
         name == "pwrite64" || name == "sendfile" || name == "splice";
}

double ticks_s(uint64_t ticks, long per_s) {
  return static_cast<double>(ticks) / static_cast<double>(per_s);
}

void set_cpu(WatchProcess& p, const ProcessCpuSamples& s, bool root, long ticks_per_s) {
  if (!s.last) return;
  const ProcStat& last = *s.last;
  const ProcStat zero;
  // A root is measured from the watch's start; a child was born inside it.
  const ProcStat& first = root && s.first ? *s.first : zero;
  p.cpu_user_s = ticks_s(last.utime - first.utime, ticks_per_s);
  p.cpu_sys_s = ticks_s(last.stime - first.stime, ticks_per_s);
  p.cpu_s = last.cpu_ns > 0 ? static_cast<double>(last.cpu_ns - first.cpu_ns) / 1e9
                            : p.cpu_user_s + p.cpu_sys_s;
  if (root)
    p.reaped_children_cpu_s =
        ticks_s(last.cutime + last.cstime - first.cutime - first.cstime, ticks_per_s);
  p.comm = last.comm;
  p.exited = last.state == 'Z';
  p.cpu_complete = s.complete;
}

WatchIo& io_entry(WatchProcess& p, const std::string& kind, const std::string& family) {
  auto it = std::find_if(p.io.begin(), p.io.end(),
                         [&](const WatchIo& w) { return w.kind == kind && w.family == family; });
  if (it != p.io.end()) return *it;
  WatchIo io;
  io.kind = kind;
  io.family = family;
  p.io.push_back(std::move(io));
  return p.io.back();
}

// The kind an I/O result is reported under: what the kernel saw the descriptor made as; a
// socket or a descriptor made before the watch as /proc showed it.
std::string kind_of(WatchKind made, const std::string* sampled) {
  if (made == WatchKind::kFile) return "file";
  if (made == WatchKind::kPipe) return "pipe";
  if (made == WatchKind::kSocket)
    return sampled && (*sampled == "tcp" || *sampled == "udp" || *sampled == "unix") ? *sampled
                                                                                      : "socket";
  return sampled ? *sampled : "unknown";
}

bool is_process(pid_t id, const ProcessCpuSamples& samples) {
  if (!samples.last.has_value()) return false;
  return samples.last.value().tgid == id;
}

// The report's processes, built from the kernel's counts in steps.
class ProcessTable {
 public:
  ProcessTable(const WatchCounts& counts, const std::map<pid_t, std::map<int, std::string>>& kinds)
      : counts_(counts), kinds_(kinds) {}

  WatchProcess& process(pid_t pid) {
    WatchProcess& p = by_pid_[pid];
    if (p.pid == 0) {
      p.pid = pid;
      const auto w = counts_.watched.find(pid);
      p.root = w == counts_.watched.end() ? pid : w->second;
    }
    return p;
  }

  void add_calls() {
    for (const auto& [key, n] : counts_.calls) {
      WatchProcess& p = process(key.first);
      p.syscalls_total += n;
      const auto it = named_syscalls().find(key.second);
      named_[key.first][it == named_syscalls().end() ? "other" : it->second] += n;
    }
  }

  void add_io() {
    for (const auto& entry : counts_.io) add_result(entry.first, entry.second);
  }

  void set_cpu_and_names(const std::map<pid_t, ProcessCpuSamples>& cpu, long ticks_per_s) {
    for (auto& [pid, p] : by_pid_)
      if (const auto c = cpu.find(pid); c != cpu.end())
        set_cpu(p, c->second, p.root == pid, ticks_per_s);
    // A child never sampled (it lived between two samples) still bears its parent's name.
    for (auto& [pid, p] : by_pid_)
      if (p.comm.empty() && by_pid_.contains(p.root)) p.comm = by_pid_[p.root].comm;
  }

  // Named calls most frequent first ("other" last), I/O by bytes; roots in --pid order, each
  // followed by its children.
  std::vector<WatchProcess> take(const std::vector<pid_t>& roots) {
    std::vector<WatchProcess> out;
    for (auto& [pid, p] : by_pid_) {
      std::vector<std::pair<std::string, uint64_t>> calls(named_[pid].begin(), named_[pid].end());
      std::stable_sort(calls.begin(), calls.end(), [](const auto& a, const auto& b) {
        return (a.first == "other") < (b.first == "other") ||
               ((a.first == "other") == (b.first == "other") && a.second > b.second);
      });
      p.syscalls = std::move(calls);
      std::sort(p.io.begin(), p.io.end(), [](const WatchIo& a, const WatchIo& b) {
        return a.bytes != b.bytes ? a.bytes > b.bytes : a.calls > b.calls;
      });
      out.push_back(std::move(p));
    }
    auto rank = [&](const WatchProcess& p) {
      return std::find(roots.begin(), roots.end(), p.root) - roots.begin();
    };
    std::stable_sort(out.begin(), out.end(), [&](const WatchProcess& a, const WatchProcess& b) {
      if (rank(a) != rank(b)) return rank(a) < rank(b);
      return (a.pid != a.root) < (b.pid != b.root);
    });
    return out;
  }

 private:
  void add_result(const WatchCounts::IoKey& key, uint64_t n) {
    const pid_t tgid = std::get<0>(key);
    const auto fd = static_cast<int>(std::get<1>(key));
    const int64_t result = std::get<3>(key);
    const auto name = named_syscalls().find(std::get<2>(key));
    if (name == named_syscalls().end()) return;
    const std::string* sampled = nullptr;
    if (const auto k = kinds_.find(tgid); k != kinds_.end())
      if (const auto f = k->second.find(fd); f != k->second.end()) sampled = &f->second;
    WatchIo& io = io_entry(process(tgid), kind_of(std::get<4>(key), sampled),
                           is_write(name->second) ? "write" : "read");
    io.calls += n;
    io.sizes[result] += n;
    io.descriptors[fd] += n;
    if (result < 0) io.errors += n;
    if (result == 0) io.zero += n;
    if (result > 0) io.bytes += static_cast<uint64_t>(result) * n;
  }

  const WatchCounts& counts_;
  const std::map<pid_t, std::map<int, std::string>>& kinds_;
  std::map<pid_t, WatchProcess> by_pid_;
  std::map<pid_t, std::map<std::string, uint64_t>> named_;
};

}  // namespace

std::vector<WatchProcess> watch_processes(const WatchCounts& counts,
                                          const std::map<pid_t, std::map<int, std::string>>& kinds,
                                          const std::map<pid_t, ProcessCpuSamples>& cpu,
                                          const std::vector<pid_t>& roots, long ticks_per_s) {
  ProcessTable t(counts, kinds);
  for (pid_t r : roots) t.process(r);
  // Every watched id that /proc showed is a process (not a thread).
  for (const auto& entry : cpu)
    if (counts.watched.contains(entry.first) && is_process(entry.first, entry.second))
      t.process(entry.first);
  t.add_calls();
  t.add_io();
  t.set_cpu_and_names(cpu, ticks_per_s);
  return t.take(roots);
}

std::vector<std::pair<int64_t, uint64_t>> top_sizes(const WatchIo& io, double share, size_t max) {
  std::vector<std::pair<int64_t, uint64_t>> all(io.sizes.begin(), io.sizes.end());
  std::stable_sort(all.begin(), all.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::pair<int64_t, uint64_t>> top;
  uint64_t covered = 0;
  for (const auto& s : all) {
    if (top.size() >= max || static_cast<double>(covered) >= share * static_cast<double>(io.calls))
      break;
    top.push_back(s);
    covered += s.second;
  }
  return top;
}

std::map<uint64_t, uint64_t> size_histogram(const WatchIo& io) {
  std::map<uint64_t, uint64_t> h;
  for (const auto& [size, n] : io.sizes) {
    if (size < 0) continue;
    const auto u = static_cast<uint64_t>(size);
    h[u == 0 ? 0 : std::bit_floor(u)] += n;
  }
  return h;
}

}  // namespace iobench
