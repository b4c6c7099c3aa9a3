// The watch report as a table (stdout), JSON (the context and sources blocks of a results file)
// and CSV (one row per process, descriptor kind and direction).
#include <fmt/format.h>

#include <cstring>

#include "util/size.h"
#include "watch/watch_report.h"

namespace iobench {
namespace {

std::string size_label(int64_t size) {
  if (size < 0) return fmt::format("-{}", std::strerror(static_cast<int>(-size)));
  return fmt::format("{}", size);
}

std::string sizes_line(const WatchIo& io) {
  const auto top = top_sizes(io, 0.9, 8);
  std::string s;
  for (const auto& [size, n] : top)
    s += fmt::format("{}{}: {}", s.empty() ? "" : ", ", size_label(size), n);
  if (io.sizes.size() > top.size())
    s += fmt::format(" (+{} other sizes)", io.sizes.size() - top.size());
  return s;
}

std::string histogram_line(const WatchIo& io) {
  std::string s;
  for (const auto& [low, n] : size_histogram(io))
    s += fmt::format("{}{}: {}", s.empty() ? "" : "  ",
                     low == 0 ? std::string("0") : fmt::format("{}..{}", low, 2 * low - 1), n);
  return s;
}

double per_call(const WatchIo& io) {
  const uint64_t moved = io.calls - io.errors - io.zero;
  return moved > 0 ? static_cast<double>(io.bytes) / static_cast<double>(moved) : 0.0;
}

const char* origin(const WatchProcess& p) { return p.pid == p.root ? "--pid" : "forked"; }

}  // namespace

void print_watch_table(const WatchReport& r) {
  fmt::print("iobench watch: {:.2f} s, ended by {}\n", r.duration_s, r.ended_by);
  for (const WatchProcess& p : r.processes) {
    fmt::print("\npid {} ({}){}{}\n", p.pid, p.comm.empty() ? "?" : p.comm,
               p.pid == p.root ? "" : fmt::format(", forked by the watched tree of {}", p.root),
               p.exited ? ", exited" : "");
    fmt::print("  CPU {:.3f} s (user {:.2f} s, sys {:.2f} s){}", p.cpu_s, p.cpu_user_s, p.cpu_sys_s,
               p.cpu_complete ? "" : ", up to its last sample (it ended between two)");
    if (p.pid == p.root)
      fmt::print("; children reaped during the watch {:.2f} s", p.reaped_children_cpu_s);
    fmt::print("\n  syscalls {}:", p.syscalls_total);
    for (const auto& [name, n] : p.syscalls) fmt::print(" {} {}", name, n);
    fmt::print("\n");
    for (const WatchIo& io : p.io) {
      fmt::print("  {:<6} {:<5} {:>9} calls {:>11} {:>9.0f} B/call{}\n", io.kind, io.family,
                 io.calls, format_bytes_human(io.bytes), per_call(io),
                 io.errors ? fmt::format(", {} errors", io.errors) : std::string());
      fmt::print("         sizes: {}\n", sizes_line(io));
      fmt::print("         log2:  {}\n", histogram_line(io));
    }
  }
  print_loop_table(r);
  if (r.lost_calls + r.lost_io > 0)
    fmt::print("\nnot counted (the kernel's maps were full): {} calls, {} results\n", r.lost_calls,
               r.lost_io);
}

nlohmann::json watch_json(const WatchReport& r) {
  nlohmann::json procs = nlohmann::json::array();
  for (const WatchProcess& p : r.processes) {
    nlohmann::json io = nlohmann::json::array();
    for (const WatchIo& w : p.io) {
      nlohmann::json sizes = nlohmann::json::array(), hist = nlohmann::json::array(),
                     fds = nlohmann::json::object();
      for (const auto& [size, n] : w.sizes) sizes.push_back({{"result", size}, {"calls", n}});
      for (const auto& [low, n] : size_histogram(w))
        hist.push_back({{"from", low}, {"to", low == 0 ? 0 : 2 * low - 1}, {"calls", n}});
      for (const auto& [fd, n] : w.descriptors) fds[std::to_string(fd)] = n;
      io.push_back({{"fd_kind", w.kind}, {"family", w.family}, {"calls", w.calls},
                    {"bytes", w.bytes}, {"bytes_per_call", per_call(w)}, {"errors", w.errors},
                    {"zero_results", w.zero}, {"sizes", sizes}, {"histogram", hist},
                    {"descriptors", fds}});
    }
    nlohmann::json calls = nlohmann::json::object();
    for (const auto& [name, n] : p.syscalls) calls[name] = n;
    procs.push_back({{"pid", p.pid}, {"root", p.root}, {"origin", origin(p)}, {"comm", p.comm},
                     {"exited", p.exited}, {"cpu_s", p.cpu_s}, {"cpu_user_s", p.cpu_user_s},
                     {"cpu_sys_s", p.cpu_sys_s}, {"cpu_complete", p.cpu_complete},
                     {"reaped_children_cpu_s", p.pid == p.root ? nlohmann::json(p.reaped_children_cpu_s)
                                                               : nlohmann::json(nullptr)},
                     {"syscalls_total", p.syscalls_total}, {"syscalls", calls}, {"io", io}});
  }
  nlohmann::json sources = {
      {"syscalls", "eBPF on raw sys_enter, per process and syscall number (the numbers iobench "
                   "names; the rest as other)"},
      {"io", "eBPF on raw sys_enter (the descriptor) and sys_exit (the result) of read, write, "
             "readv, writev, recvfrom, sendto, recvmsg, sendmsg, pread64, pwrite64, sendfile and "
             "splice (splice: its output descriptor); each result counted exactly"},
      {"children", "tracepoint sched:sched_process_fork: a watched process's child is watched "
                   "from before it first runs"},
      {"fd_kind", fmt::format("/proc/PID/fd and /proc/PID/net/{{tcp,tcp6,udp,udp6,unix}}, "
                              "sampled every {:.0f} ms: the kind the last sample saw; unknown when "
                              "a descriptor lived between two samples",
                              r.sample_interval_s * 1e3)},
      {"cpu", fmt::format("per process, its CPU clock (clock_getcpuclockid, exact) and /proc/PID/"
                          "stat utime/stime (ticks) sampled every {:.0f} ms and at the end: a root "
                          "from the watch's start, a forked child over its life up to its last "
                          "sample; a root's reaped_children_cpu_s is the growth of its cutime + "
                          "cstime (children it waited for, whole lives)",
                          r.sample_interval_s * 1e3)}};
  if (!r.loop.empty())
    sources["event_loop"] = fmt::format(
        "eBPF on raw sys_enter and sys_exit, per watched thread: an iteration from an "
        "epoll_wait/epoll_pwait/epoll_pwait2 return to that thread's next wait (CLOCK_MONOTONIC), "
        "classed by whether it made a large write (write, writev, sendto or sendmsg moving at "
        "least {} bytes, timed from its entry to its return); HdrHistogram's layout, exact "
        "maxima and sums",
        r.large_write);
  return {{"tool", "iobench"},
          {"kind", "watch"},
          {"command", r.command},
          {"context", r.context},
          {"sources", sources},
          {"watch",
           {{"pids", r.roots},
            {"duration_s", r.duration_s},
            {"ended_by", r.ended_by},
            {"lost_calls", r.lost_calls},
            {"lost_results", r.lost_io},
            {"processes", procs},
            {"event_loop", loop_json(r)}}}};
}

std::string watch_csv(const WatchReport& r) {
  std::string out =
      "pid,root,comm,cpu_s,cpu_user_s,cpu_sys_s,syscalls_total,fd_kind,family,calls,bytes,"
      "bytes_per_call,errors,top_sizes\n";
  for (const WatchProcess& p : r.processes) {
    const std::string head =
        fmt::format("{},{},\"{}\",{:.6f},{:.2f},{:.2f},{}", p.pid, p.root, p.comm, p.cpu_s,
                    p.cpu_user_s, p.cpu_sys_s, p.syscalls_total);
    if (p.io.empty()) out += head + ",,,0,0,0,0,\n";
    for (const WatchIo& io : p.io) {
      std::string top;
      for (const auto& [size, n] : top_sizes(io, 0.9, 8))
        top += fmt::format("{}{}:{}", top.empty() ? "" : " ", size, n);
      out += fmt::format("{},{},{},{},{},{:.1f},{},{}\n", head, io.kind, io.family, io.calls,
                         io.bytes, per_call(io), io.errors, top);
    }
  }
  return out;
}

}  // namespace iobench
