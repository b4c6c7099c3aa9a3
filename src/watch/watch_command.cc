// `iobench watch`: the kernel counters of a run, pointed at live processes (e.g. a Valkey
// primary during a full sync) and at the children they fork while watched.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "net/interrupt.h"
#include "probe/syscall_counter.h"
#include "report/output.h"
#include "report/report.h"
#include "watch/bpf_watch.h"
#include "watch/watch_command.h"
#include "watch/watch_report.h"

namespace iobench {
namespace {

using Clock = std::chrono::steady_clock;

bool gone(pid_t pid) {
  const auto st = read_proc_stat(pid);
  return !st || st->state == 'Z';
}

// What the watch keeps between samples of /proc.
struct Samples {
  std::map<pid_t, ProcessCpuSamples> cpu;
  std::map<pid_t, std::map<int, std::string>> kinds;
  std::map<uint64_t, std::string> sockets;  // inode -> tcp/udp/unix
};

// Samples every watched process; a watched id that is a thread is forgotten (its calls count
// under its process). Returns how many watched processes are still running.
size_t sample(BpfWatch& w, Samples& s, bool final = false) {
  size_t running = 0;
  for (const auto& [id, root] : w.read_watched()) {
    const auto st = read_proc_stat(id);
    if (!st) continue;
    if (st->tgid != id) {
      w.forget(id);
      continue;
    }
    ProcessCpuSamples& c = s.cpu[id];
    if (!c.first) c.first = st;
    c.last = st;
    c.complete = final || st->state == 'Z';
    if (st->state == 'Z') continue;
    ++running;
    for (const auto& [fd, kind] : descriptor_kinds(id, s.sockets)) s.kinds[id][fd] = kind;
  }
  return running;
}

// A child never sampled while running (it lived between two samples) takes the kinds its root
// had (a forked child starts with its parent's descriptors). A child sampled at least once keeps
// what it was seen with: it may have closed and reused a number. Descriptors made while watched
// carry their kind from the kernel anyway (BpfWatch).
void inherit_kinds(const WatchCounts& counts, Samples& s) {
  for (const auto& [id, root] : counts.watched) {
    if (id == root || s.kinds.contains(id) || !s.kinds.contains(root)) continue;
    s.kinds[id] = s.kinds[root];
  }
}

// Runs until the end condition; returns what ended it.
std::string watch_until_end(const WatchCommand& c, BpfWatch& w, Samples& s, Clock::time_point t0) {
  const auto slice = std::chrono::duration<double>(c.interval_s);
  for (;;) {
    std::this_thread::sleep_for(slice);
    const size_t running = sample(w, s);
    if (const int sig = interrupt::received()) return interrupt::name(sig);
    if (c.duration_s > 0 && Clock::now() - t0 >= std::chrono::duration<double>(c.duration_s))
      return fmt::format("--duration {}", c.duration_s);
    if (c.until_exit > 0 && gone(c.until_exit)) return fmt::format("pid {} exited", c.until_exit);
    if (running == 0) return "every watched process exited";
  }
}

std::string command_line(const WatchCommand& c) {
  std::string s = "iobench watch";
  for (pid_t p : c.pids) s += fmt::format(" --pid {}", p);
  if (c.duration_s > 0) s += fmt::format(" --duration {}", c.duration_s);
  if (c.until_exit > 0) s += fmt::format(" --until-exit {}", c.until_exit);
  if (c.event_loop) s += fmt::format(" --event-loop --large-write {}", c.large_write);
  return s;
}

}  // namespace

int run_watch_command(const WatchCommand& c) {
  auto files = ReportFiles::open(c.json_path, c.csv_path);
  if (!files) {
    print_error(files.error().message);
    return 2;
  }
  interrupt::install({SIGINT, SIGTERM});
  Samples s;
  for (pid_t p : c.pids) s.cpu[p].first = read_proc_stat(p);
  const auto large_write = c.event_loop ? static_cast<int64_t>(c.large_write) : 0;
  auto w = BpfWatch::open(c.pids, find_tracefs(), large_write);
  if (!w) {
    print_error("watch: " + w.error().message);
    return 1;
  }
  const auto t0 = Clock::now();
  if (!c.quiet)
    fmt::print(stderr, "iobench: watching {} (Ctrl-C ends the watch)\n", command_line(c).substr(14));
  WatchReport r;
  r.ended_by = watch_until_end(c, **w, s, t0);
  sample(**w, s, true);
  const WatchCounts counts = (*w)->read();
  w->reset();  // detached: the machine's syscalls leave the traced path
  r.duration_s = std::chrono::duration<double>(Clock::now() - t0).count();
  inherit_kinds(counts, s);
  r.roots = c.pids;
  r.sample_interval_s = c.interval_s;
  r.lost_calls = counts.lost_calls;
  r.lost_io = counts.lost_io;
  r.loop = counts.loop;
  r.large_write = c.event_loop ? static_cast<int64_t>(c.large_write) : 0;
  r.processes = watch_processes(counts, s.kinds, s.cpu, c.pids, sysconf(_SC_CLK_TCK));
  r.context = collect_context();
  r.command = command_line(c);
  if (!c.quiet && c.json_path != "-" && c.csv_path != "-") print_watch_table(r);
  Status st;
  if (files->json.is_open()) st = files->json.write(watch_json(r).dump(2) + "\n");
  if (st && files->csv.is_open()) st = files->csv.write(watch_csv(r));
  if (!st) {
    print_error(st.error().message);
    return 1;
  }
  return 0;
}

}  // namespace iobench
