#include <algorithm>
#include <array>

#include "report/report.h"
#include "util/size.h"
#include "util/stats.h"

namespace iobench {

SideFigures side_figures(const proto::SideResult& r) {
  SideFigures f;
  f.bytes = static_cast<double>(r.io.bytes);
  f.wall_s = static_cast<double>(r.probe.wall_ns) / 1e9;
  if (r.probe.wall_ns > 0) {
    f.throughput_gbps = f.bytes * 8 / static_cast<double>(r.probe.wall_ns);
    f.throughput_mib_s = f.bytes / static_cast<double>(kMiB) / f.wall_s;
  }
  f.cpu_user_s = static_cast<double>(r.probe.user_us) / 1e6;
  f.cpu_sys_s = static_cast<double>(r.probe.sys_us) / 1e6;
  f.cpu_s = static_cast<double>(r.probe.cpu_ns) / 1e9;
  if (r.io.bytes > 0) f.cpu_s_per_gib = f.cpu_s / (f.bytes / static_cast<double>(kGiB));
  f.io_calls = static_cast<double>(r.io.calls);
  if (r.io.calls > 0) {
    f.bytes_per_call = f.bytes / f.io_calls;
    f.segments_per_call = static_cast<double>(r.segments.out) / f.io_calls;
  }
  const bool kernel = kernel_counted(r.syscalls.source);
  // The kernel's count of this side's data syscalls: read/write plus their vector and socket
  // variants; without perf_event, the stream's own count of the read(2)/write(2) it issued.
  static constexpr std::array<const char*, 4> kWrites{"write", "writev", "sendto", "sendmsg"};
  static constexpr std::array<const char*, 4> kReads{"read", "readv", "recvfrom", "recvmsg"};
  uint64_t directional = r.is_sender ? r.stream.sys_writes : r.stream.sys_reads;
  if (kernel) {
    directional = 0;
    for (const char* n : r.is_sender ? kWrites : kReads) directional += kernel_count(r, n);
  }
  f.syscalls = static_cast<double>(directional);
  f.syscalls_total =
      static_cast<double>(kernel ? r.syscalls.total : r.stream.sys_reads + r.stream.sys_writes);
  if (r.io.bytes > 0) f.syscalls_per_mib = f.syscalls_total / (f.bytes / static_cast<double>(kMiB));
  if (f.syscalls_total > 0) f.bytes_per_syscall = f.bytes / f.syscalls_total;
  f.records = static_cast<double>(r.is_sender ? r.stream.records_out : r.stream.records_in);
  return f;
}

uint64_t kernel_count(const proto::SideResult& r, std::string_view name) {
  for (const auto& [n, v] : r.syscalls.by_name)
    if (n == name) return v;
  return 0;
}

Stat stat_of(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return {median, v.front(), v.back()};
}

SideSummary summarize(const std::vector<RunRecord>& runs, bool sender) {
  std::vector<SideFigures> figs;
  figs.reserve(runs.size());
  for (const auto& r : runs)
    if (r.reported(sender)) figs.push_back(side_figures(sender ? r.sender : r.receiver));
  auto over = [&](double SideFigures::*field) {
    std::vector<double> v;
    v.reserve(figs.size());
    for (const auto& f : figs) v.push_back(f.*field);
    return stat_of(std::move(v));
  };
  SideSummary s;
  s.runs = figs.size();
  s.bytes = over(&SideFigures::bytes);
  s.wall_s = over(&SideFigures::wall_s);
  s.throughput_gbps = over(&SideFigures::throughput_gbps);
  s.throughput_mib_s = over(&SideFigures::throughput_mib_s);
  s.cpu_user_s = over(&SideFigures::cpu_user_s);
  s.cpu_sys_s = over(&SideFigures::cpu_sys_s);
  s.cpu_s = over(&SideFigures::cpu_s);
  s.cpu_s_per_gib = over(&SideFigures::cpu_s_per_gib);
  s.io_calls = over(&SideFigures::io_calls);
  s.bytes_per_call = over(&SideFigures::bytes_per_call);
  s.syscalls = over(&SideFigures::syscalls);
  s.syscalls_total = over(&SideFigures::syscalls_total);
  s.syscalls_per_mib = over(&SideFigures::syscalls_per_mib);
  s.bytes_per_syscall = over(&SideFigures::bytes_per_syscall);
  s.records = over(&SideFigures::records);
  return s;
}

SideSummary summarize(const SizeResults& size, bool sender) {
  SideSummary s = summarize(size.runs, sender);
  if (!size.counting_run) return s;
  const SideFigures f =
      side_figures(sender ? size.counting_run->sender : size.counting_run->receiver);
  s.syscalls = stat_of({f.syscalls});
  s.syscalls_total = stat_of({f.syscalls_total});
  s.syscalls_per_mib = stat_of({f.syscalls_per_mib});
  s.bytes_per_syscall = stat_of({f.bytes_per_syscall});
  return s;
}

RepeatAuto repeat_auto_precision(const std::vector<RunRecord>& runs, double target) {
  RepeatAuto r;
  std::vector<double> sender, receiver;
  for (const RunRecord& run : runs) {
    if (run.partial) continue;
    sender.push_back(side_figures(run.sender).cpu_s_per_gib);
    receiver.push_back(side_figures(run.receiver).cpu_s_per_gib);
  }
  r.runs = static_cast<int>(sender.size());
  auto relative = [](const std::vector<double>& v) {
    const double m = stats::median(v);
    const stats::Interval ci = stats::median_ci(v);
    return m > 0 ? (ci.high - ci.low) / 2 / m : 1.0;
  };
  r.sender_ci = relative(sender);
  r.receiver_ci = relative(receiver);
  r.reached = r.runs >= ClientOptions::kAutoMinRuns && r.sender_ci <= target &&
              r.receiver_ci <= target;
  return r;
}

std::string buf_label(const BufPair& b) {
  if (b.adaptive) return "adaptive";
  if (b.send_bytes == b.recv_bytes) return format_size(b.send_bytes);
  return format_size(b.send_bytes) + "/" + format_size(b.recv_bytes);
}

GroupFigures group_figures(const GroupRecord& g) {
  GroupFigures f;
  std::vector<double> gbps;
  double slowest = -1;
  uint64_t bytes = 0;
  for (const ConnRecord& c : g.conns) {
    if (!c.error.empty() || !c.receiver || c.receiver->probe.wall_ns <= 0) continue;
    const double v = static_cast<double>(c.receiver->io.bytes) * 8 /
                     static_cast<double>(c.receiver->probe.wall_ns);
    gbps.push_back(v);
    bytes += c.receiver->io.bytes;
    if (slowest < 0 || v < slowest) {
      slowest = v;
      f.slowest_conn = c.index;
    }
  }
  f.conn_gbps = stat_of(gbps);
  if (g.receiver.probe.wall_ns > 0)
    f.aggregate_gbps =
        static_cast<double>(bytes) * 8 / static_cast<double>(g.receiver.probe.wall_ns);
  return f;
}

}  // namespace iobench
