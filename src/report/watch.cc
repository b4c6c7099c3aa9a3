// The watch's report: the kernel's counts grouped per process, descriptor kind and direction.
#include "report/watch.h"

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

void set_cpu(WatchProcess& p, const CpuSamples& s, bool root, long ticks_per_s) {
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

}  // namespace

std::vector<WatchProcess> watch_processes(const WatchCounts& counts,
                                          const std::map<pid_t, std::map<int, std::string>>& kinds,
                                          const std::map<pid_t, CpuSamples>& cpu,
                                          const std::vector<pid_t>& roots, long ticks_per_s) {
  std::map<pid_t, WatchProcess> by_pid;
  auto process = [&](pid_t pid) -> WatchProcess& {
    WatchProcess& p = by_pid[pid];
    if (p.pid == 0) {
      p.pid = pid;
      const auto w = counts.watched.find(pid);
      p.root = w == counts.watched.end() ? pid : w->second;
    }
    return p;
  };
  for (pid_t r : roots) process(r);
  for (const auto& [id, root] : counts.watched)
    if (cpu.contains(id) && cpu.at(id).last && cpu.at(id).last->tgid == id) process(id);
  std::map<pid_t, std::map<std::string, uint64_t>> named;
  for (const auto& [key, n] : counts.calls) {
    WatchProcess& p = process(key.first);
    p.syscalls_total += n;
    const auto it = named_syscalls().find(key.second);
    named[key.first][it == named_syscalls().end() ? "other" : it->second] += n;
  }
  for (const auto& [key, n] : counts.io) {
    const auto& [tgid, fd, nr, result, made] = key;
    const auto name = named_syscalls().find(nr);
    if (name == named_syscalls().end()) continue;
    const std::string* sampled = nullptr;
    if (const auto k = kinds.find(tgid); k != kinds.end())
      if (const auto f = k->second.find(static_cast<int>(fd)); f != k->second.end())
        sampled = &f->second;
    const std::string kind = kind_of(made, sampled);
    WatchIo& io = io_entry(process(tgid), kind, is_write(name->second) ? "write" : "read");
    io.calls += n;
    io.sizes[result] += n;
    io.descriptors[static_cast<int>(fd)] += n;
    if (result < 0) io.errors += n;
    if (result == 0) io.zero += n;
    if (result > 0) io.bytes += static_cast<uint64_t>(result) * n;
  }
  for (auto& [pid, p] : by_pid)
    if (const auto c = cpu.find(pid); c != cpu.end())
      set_cpu(p, c->second, p.root == pid, ticks_per_s);
  // A child never sampled (it lived between two samples) still bears its parent's name.
  for (auto& [pid, p] : by_pid)
    if (p.comm.empty() && by_pid.contains(p.root)) p.comm = by_pid[p.root].comm;
  std::vector<WatchProcess> out;
  for (auto& [pid, p] : by_pid) {
    std::vector<std::pair<std::string, uint64_t>> calls(named[pid].begin(), named[pid].end());
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
  // Roots first, in --pid order, each followed by its children.
  std::stable_sort(out.begin(), out.end(), [&](const WatchProcess& a, const WatchProcess& b) {
    auto rank = [&](const WatchProcess& p) {
      return std::find(roots.begin(), roots.end(), p.root) - roots.begin();
    };
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    return (a.pid != a.root) < (b.pid != b.root);
  });
  return out;
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
