// The human-readable table: one row per side per buffer size, medians when repeated (their
// min..max below), the notes that change how to read it; -v adds the context lines.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "probe/placement.h"
#include "report/report.h"
#include "util/size.h"
#include "util/stats.h"

namespace iobench {
namespace {

// How a run that ended early ended, for the lines that say a side's figures never came.
bool was_interrupted(const Report& r) { return !r.interrupted.empty(); }

std::string side_row(const std::string& buf, const char* side, const char* where,
                     const SideSummary& s, bool tls, bool interrupted) {
  if (s.runs == 0)
    return fmt::format("{:>6} {:<8} {:<6} {:>11}   not reported: {} before the {} sent its "
                       "figures\n",
                       buf, side, where, "n/a", interrupted ? "interrupted" : "failed", where);
  std::string row = fmt::format(
      "{:>6} {:<8} {:<6} {:>11} {:>8.4f} {:>7.2f} {:>8.1f} {:>7.3f} {:>7.3f} {:>7.3f} {:>9.3f} "
      "{:>9.0f} {:>8.0f} {:>9.0f} {:>9.0f}",
      buf, side, where, format_bytes_human(static_cast<uint64_t>(s.bytes.median)), s.wall_s.median,
      s.throughput_gbps.median, s.throughput_mib_s.median, s.cpu_user_s.median, s.cpu_sys_s.median,
      s.cpu_s.median, s.cpu_s_per_gib.median, s.io_calls.median, s.bytes_per_call.median,
      s.syscalls.median, s.syscalls_total.median);
  if (tls) row += fmt::format(" {:>8.0f}", s.records.median);
  return row + "\n";
}

std::string tls_line(const proto::SideResult& r, bool is_client) {
  std::string line = fmt::format(
      "  {:<8} tls: {} {} {}, handshake {:.2f} ms, io {}, read-ahead {}, max fragment {}, "
      "ktls {}",
      r.is_sender ? "sender" : "receiver", r.tls.version, r.tls.cipher, r.tls.group,
      static_cast<double>(r.tls.handshake_ns) / 1e6, r.tls.io, r.tls.read_ahead ? "on" : "off",
      r.tls.max_fragment, r.tls.ktls);
  if (is_client) line += r.tls.verified ? ", server verified" : ", server NOT verified (insecure)";
  return line + "\n";
}

const char* syscalls_source_label(SyscallSource source) {
  switch (source) {
    case SyscallSource::kBpf:
      return "kernel counters (eBPF on the sys_enter tracepoint)";
    case SyscallSource::kPerfEvent:
      return "kernel counters (perf_event tracepoints)";
    case SyscallSource::kTaskIo:
      return "kernel task I/O accounting";
    case SyscallSource::kCounted:
      break;
  }
  return "counted by iobench";
}

// Where the side's data phase ran: pinned (--cpus) or not, allowed and seen CPUs.
std::string placement_line(const proto::SideResult& side) {
  const proto::Placement& p = side.placement;
  if (p.allowed_cpus.empty()) return {};  // a peer that did not say (an error before it ran)
  const char* name = side.is_sender ? "sender" : "receiver";
  const std::string pinned = p.pinned_cpu >= 0
                                 ? fmt::format("pinned to CPU {}", p.pinned_cpu)
                                 : fmt::format("not pinned (CPUs {} allowed)", p.allowed_cpus);
  return fmt::format("  {:<8} placement: {}, ran on CPU {} (sampled at start and end)\n", name,
                     pinned, p.seen_cpus);
}

// Unpinned loopback on a few CPUs: both sides and the kernel's softirq work share them as the
// scheduler decides, and that moves the figures (measured: 1K from 8.3 to 1.6 s/GiB pinned).
std::string placement_warning(const Report& r, const proto::SideResult& a,
                              const proto::SideResult& b) {
  if (r.mode != RunMode::kLoopback || a.placement.pinned_cpu >= 0 || b.placement.pinned_cpu >= 0)
    return {};
  if (a.placement.allowed_cpus.empty() || cpu_list_count(a.placement.allowed_cpus) > 4) return {};
  return fmt::format(
      "note: unpinned on {} CPUs: where the scheduler puts the two sides changes these figures; "
      "pin them with --cpus SENDER,RECEIVER (e.g. --cpus 0,1 or --cpus 0)\n",
      cpu_list_count(a.placement.allowed_cpus));
}

// The lines above the table for one side of the first run: socket, TLS, zero-copy, engine path
// and where its syscall figures come from (`counted`: the counting run's side when there is one).
std::string side_header_lines(const proto::SideResult& side, const proto::SideResult& counted,
                              bool has_counting_run, bool client_sends) {
  const char* name = side.is_sender ? "sender" : "receiver";
  std::string out = fmt::format(
      "  {:<8} socket: SO_SNDBUF {} B, SO_RCVBUF {} B (granted), TCP_NODELAY {}, MTU {}, MSS {}{}{}\n",
      name, side.socket.sndbuf_bytes, side.socket.rcvbuf_bytes,
      side.socket.nodelay ? "on" : "off", side.socket.mtu_bytes, side.socket.mss_bytes,
      side.socket.notsent_lowat_bytes == 0
          ? ""
          : fmt::format(", TCP_NOTSENT_LOWAT {} B", side.socket.notsent_lowat_bytes),
      side.socket.congestion.empty() ? "" : ", congestion " + side.socket.congestion);
  out += placement_line(side);
  if (!side.tls.version.empty()) out += tls_line(side, side.is_sender == client_sends);
  if (side.io.zc.sends > 0)
    out += fmt::format(
        "  {:<8} zerocopy: {} sends, {} notifications, {} copied by the kernel after all{}\n",
        "sender", side.io.zc.sends, side.io.zc.notifications, side.io.zc.copied,
        side.io.zc.copied == side.io.zc.sends ? " (no zero-copy path: loopback always copies)"
                                              : "");
  if (!side.io.path.empty() || side.io.uring.sqes > 0) {
    std::string ring;
    if (side.io.uring.sqes > 0)
      ring = fmt::format("{}{} SQEs submitted, {} CQEs reaped",
                         side.io.path.empty() ? "" : "; ", side.io.uring.sqes, side.io.uring.cqes);
    out += fmt::format("  {:<8} {}: {}{}\n", name, side.engine, side.io.path, ring);
  }
  out += fmt::format("  {:<8} syscalls: {}{}{}\n", name,
                     syscalls_source_label(counted.syscalls.source),
                     has_counting_run ? " in one counting run per size; the measured runs count "
                                        "nothing (CPU and time free of tracing)"
                                      : "",
                     counted.syscalls.note.empty() ? "" : " - " + counted.syscalls.note);
  return out;
}

// --syscalls strace|perf: what the tool saw for the whole session beside the data phase.
std::string tracer_lines(const Report& r) {
  std::string out;
  for (const auto& size : r.sizes) {
    for (const auto& run : size.runs) {
      for (const auto* side : {&run.sender, &run.receiver}) {
        const auto& t = side->is_sender ? run.sender_tracer : run.receiver_tracer;
        if (!t) continue;
        if (out.empty())
          out = fmt::format(
              "{} attached to each side for every session (connect to close); CPU and time "
              "above are distorted by it:\n",
              t->tool == TracerTool::kStrace ? "strace -f -c" : "perf stat");
        const SideFigures f = side_figures(*side);
        std::string top;
        for (const auto& [name, n] : t->by_name)
          if (n * 50 >= t->total) top += fmt::format("{}{} {}", top.empty() ? "" : ", ", name, n);
        out += fmt::format(
            "{:>6} {:<8} run {}: session {} syscalls ({}), data phase {:.0f}: {:+.0f} for setup, "
            "control messages and teardown\n",
            format_size(side->buf_bytes), side->is_sender ? "sender" : "receiver", run.run,
            t->total, top, f.syscalls_total, static_cast<double>(t->total) - f.syscalls_total);
      }
    }
  }
  return out;
}

std::string timeline_text(const proto::GroupResult& g) {
  std::string out;
  const size_t shown = std::min<size_t>(g.timeline.size(), 16);
  for (size_t i = 0; i < shown; ++i) {
    const auto& p = g.timeline[i];
    out += fmt::format("{}{:.1f}ms:{}", i ? " " : "", static_cast<double>(p.t_ns) / 1e6, p.live);
    if (p.live > 0) out += fmt::format("@{}", format_size(p.size));
  }
  if (g.timeline.size() > shown) out += fmt::format(" (+{} more)", g.timeline.size() - shown);
  return out;
}

std::string group_side_line(const proto::GroupResult& g, bool known, const char* side,
                            const char* where) {
  if (!known) return fmt::format("  {:<8} {:<6}: whole-run figures did not arrive\n", side, where);
  uint64_t resizes = 0;
  for (const auto& c : g.changes) resizes += c.from != 0;
  std::string line = fmt::format(
      "  {:<8} {:<6}: {}; peak live {}, peak buffer memory {}, peak RSS {}, {} resize(s); "
      "live: {}\n",
      side, where, g.policy, g.peak_live, format_bytes_human(g.peak_buffer_bytes),
      g.peak_rss_bytes ? format_bytes_human(g.peak_rss_bytes) : "unknown", resizes,
      timeline_text(g));
  if (!g.error.empty())
    line += fmt::format("  {:<8} {:<6}: incomplete: {}\n", side, where, g.error);
  return line;
}

// --conns / adaptive: per run, fairness, each side's policy, memory and live timeline, then one
// row per connection.
std::string group_lines(const Report& r) {
  std::string out;
  const bool client_sends = !r.options.reverse;
  for (const auto& size : r.sizes) {
    for (const auto& run : size.runs) {
      if (!run.group) continue;
      const GroupRecord& g = *run.group;
      const GroupFigures f = group_figures(g);
      out += fmt::format(
          "{} run {}: {} connections, per-connection Gbit/s min/median/max "
          "{:.2f}/{:.2f}/{:.2f} (slowest: conn {}), aggregate {:.2f} Gbit/s\n",
          buf_label(size.buf), run.run, g.conns.size(), f.conn_gbps.min, f.conn_gbps.median,
          f.conn_gbps.max, f.slowest_conn, f.aggregate_gbps);
      out +=
          group_side_line(g.sender, g.sender_known, "sender", client_sends ? "client" : "server");
      out += group_side_line(g.receiver, g.receiver_known, "receiver",
                             client_sends ? "server" : "client");
      out += fanout_lines(g);
      out += fmt::format("  {:>5} {:>11} {:>9} {:>8} {:>7} {:>9} {:>9}  {}\n", "conn", "bytes",
                         "start_ms", "time_s", "Gbit/s", "s_resize", "r_resize", "status");
      for (const ConnRecord& c : g.conns) {
        const double wall = c.receiver ? static_cast<double>(c.receiver->probe.wall_ns) / 1e9 : 0;
        const double got = c.receiver ? static_cast<double>(c.receiver->io.bytes) : 0;
        out +=
            fmt::format("  {:>5} {:>11} {:>9.1f} {:>8.4f} {:>7.2f} {:>9} {:>9}  {}\n", c.index,
                        format_bytes_human(c.bytes), static_cast<double>(c.start_ns) / 1e6, wall,
                        wall > 0 ? got * 8 / wall / 1e9 : 0.0, c.sender ? c.sender->buf_resizes : 0,
                        c.receiver ? c.receiver->buf_resizes : 0,
                        c.error.empty() ? std::string("ok, xxh3 verified")
                                        : fmt::format("FAILED: {}", c.error));
      }
    }
  }
  return out;
}

// One line per interrupted or failed run (measured or counting): what its figures cover.
std::string partial_lines(const Report& r) {
  std::string out;
  for (const auto& size : r.sizes) {
    for (const RunRecord* run : size.all_runs()) {
      if (!run->partial) continue;
      const std::string why =
          !run->error.empty() ? "failed (" + run->error + ")"
                              : "was interrupted by " +
                                    (r.interrupted.empty() ? std::string("a signal") : r.interrupted);
      out += fmt::format(
          "PARTIAL: buf {} {} {} after {} of {} bytes: its figures cover the data phase up to "
          "that moment (the other side's did not arrive)\n",
          buf_label(size.buf),
          run->run < 0 ? std::string("counting run") : fmt::format("run {}", run->run), why,
          std::max(run->sender.io.bytes, run->receiver.io.bytes), run->sender.bytes_expected);
    }
  }
  return out;
}

// --repeat auto: per size, how many runs it took and how precisely CPU per GiB is known.
std::string repeat_auto_lines(const Report& r) {
  std::string out;
  for (const auto& size : r.sizes) {
    if (!size.repeat_auto) continue;
    const RepeatAuto& a = *size.repeat_auto;
    out += fmt::format(
        "repeat auto: buf {} {} after {} runs: CPU per GiB known to +-{:.1f}% (sender), "
        "+-{:.1f}% (receiver), target +-{:.1f}%\n",
        buf_label(size.buf), a.reached ? "within the target" : "stopped at --max-repeat", a.runs,
        a.sender_ci * 100, a.receiver_ci * 100, r.options.target_ci * 100);
  }
  return out;
}

// Where the network softirqs ran over each size's measured runs, per CPU (host-wide counters).
std::string softirq_lines(const Report& r) {
  std::string out;
  for (const auto& size : r.sizes) {
    SoftirqCounts sum;
    for (const RunRecord& run : size.runs) add_softirqs(sum, run.softirqs);
    const std::string rx = sum.empty() ? "" : softirq_shares(sum.net_rx);
    if (rx.empty()) continue;
    const std::string tx = softirq_shares(sum.net_tx);
    out += fmt::format("softirqs {} ({}): NET_RX {}{}\n", buf_label(size.buf),
                       r.mode == RunMode::kLoopback ? "this host, both sides" : "the client's host", rx,
                       tx.empty() ? "" : "; NET_TX " + tx);
  }
  return out;
}

// The sender's TCP segments per size (TCP_INFO): per write — each small write leaving as a
// segment of its own, or several coalesced in the send queue (the regime a loopback run at 4K
// landed in moves its CPU by a third) — and how many it sent again (a link that drops).
std::string segment_lines(const Report& r) {
  std::string out;
  for (const auto& size : r.sizes) {
    std::vector<double> per_write;
    uint64_t sent_again = 0;
    for (const RunRecord& run : size.runs) {
      if (!run.reported(true)) continue;
      const double per_call = side_figures(run.sender).segments_per_call;
      if (per_call == 0) continue;
      per_write.push_back(per_call);
      sent_again += run.sender.segments.retransmitted;
    }
    if (per_write.empty()) continue;
    out += fmt::format("segments {} (sender, TCP_INFO): {:.2f} per write{}, {} retransmitted\n",
                       buf_label(size.buf), stats::median(per_write),
                       per_write.size() > 1 ? " (median)" : "", sent_again);
  }
  return out;
}

// One side's regime over a size's measured runs (medians): the share of its data phase its CPU
// was busy, how often it blocked (voluntary context switches: a full socket buffer for a
// sender, an empty one for a receiver, on the blocking engine), how often it was preempted and
// what its send queue held unsent. A side busy for nine tenths of the phase or more never
// waited: it ran throughout. A sender that keeps pace with a rate-capped link that way finds its
// queue empty and sends each write at once, in its own context, at about twice the CPU per
// write of one that ran ahead and waited (docs/measurement.md, two regimes).
constexpr double kRanThroughout = 0.9;

std::string side_regime(const std::vector<RunRecord>& runs, bool sender) {
  std::vector<double> busy, blocked, preempted, unsent;
  for (const RunRecord& run : runs) {
    if (!run.reported(sender)) continue;
    const proto::SideResult& side = sender ? run.sender : run.receiver;
    const SideFigures f = side_figures(side);
    if (f.wall_s <= 0) continue;
    busy.push_back(f.cpu_s / f.wall_s);
    blocked.push_back(static_cast<double>(side.probe.vol_ctxsw));
    preempted.push_back(static_cast<double>(side.probe.invol_ctxsw));
    if (side.stream.queue_samples > 0)
      unsent.push_back(static_cast<double>(side.stream.queue_unsent_bytes) /
                       static_cast<double>(side.stream.queue_samples));
  }
  if (busy.empty()) return {};
  const double share = stats::median(busy);
  return fmt::format(
      "{} busy {:.0f}% ({}), blocked {:.0f}x, preempted {:.0f}x{}", sender ? "sender" : "receiver",
      100 * share, share >= kRanThroughout ? "ran throughout" : "waited", stats::median(blocked),
      stats::median(preempted),
      unsent.empty() ? ""
                     : ", unsent " +
                           format_bytes_human(static_cast<uint64_t>(stats::median(unsent))) +
                           " (its send queue, sampled)");
}

// Per size, each side's regime (side_regime), so two runs of the same calls whose CPU differs
// say why.
std::string regime_lines(const Report& r) {
  std::string out;
  for (const auto& size : r.sizes) {
    const std::string s = side_regime(size.runs, true), v = side_regime(size.runs, false);
    if (s.empty() && v.empty()) continue;
    out += fmt::format("regime {}: {}{}{}\n", buf_label(size.buf), s,
                       s.empty() || v.empty() ? "" : "; ", v);
  }
  return out;
}

}  // namespace

// A run shorter than this is no single figure to trust: start-up, placement and 4 ms CPU
// ticks weigh on a few milliseconds.
constexpr double kShortRunS = 1.0;

std::string range_text(const Stat& s, int digits) {
  return fmt::format("{:.{}f}..{:.{}f}", s.min, digits, s.max, digits);
}

// Repeated runs: min..max beside the table's medians, per size (time, throughput, CPU per GiB).
std::string spread_lines(const Report& r) {
  std::string out;
  for (const auto& size : r.sizes) {
    if (size.runs.size() < 2) continue;
    const SideSummary snd = summarize(size, true), rcv = summarize(size, false);
    if (snd.runs < 2 || rcv.runs < 2) continue;
    out += fmt::format(
        "{:>6} min..max of {} runs: sender {} s, {} Gbit/s, {} cpu_s/GiB; receiver {} cpu_s/GiB\n",
        size.buf.adaptive ? "adapt" : format_size(size.buf.send_bytes), size.runs.size(),
        range_text(snd.wall_s, 4), range_text(snd.throughput_gbps, 2),
        range_text(snd.cpu_s_per_gib, 3), range_text(rcv.cpu_s_per_gib, 3));
  }
  return out;
}

// A note when a size's measured runs were too short to trust, with what to do instead.
std::string short_run_note(const Report& r) {
  double shortest = -1;  // the least data-phase time any size's measured runs add up to
  for (const auto& size : r.sizes) {
    if (size.runs.empty()) continue;
    double sum = 0;
    for (const RunRecord& run : size.runs)
      sum += static_cast<double>(run.sender.probe.wall_ns) / 1e9;
    shortest = shortest < 0 ? sum : std::min(shortest, sum);
  }
  if (shortest < 0 || shortest >= kShortRunS) return "";
  return fmt::format(
      "note: a size's measured data phases add up to {:.3f} s: too short to trust (start-up, "
      "placement and 4 ms CPU ticks weigh on it); use -t 10s (runs until 10 s of data a size), "
      "--bytes 4G or --repeat 50\n",
      shortest);
}

// Every process's CPU in one line (-v: each broken down by phase).
std::string process_cpu_line(const std::vector<ProcessCpu>& processes) {
  if (processes.empty()) return "";
  std::string out = "process CPU:";
  double total = 0;
  for (const ProcessCpu& p : processes) {
    total += static_cast<double>(p.cpu_ns) / 1e9;
    out += fmt::format(" {} {:.3f} s,", name_of(p.host), static_cast<double>(p.cpu_ns) / 1e9);
  }
  return out + fmt::format(" all {:.3f} s (whole processes; -v: by phase)\n", total);
}

// -v: the host the figures are this host's of, named by what it is (a VM's model name is
// often generic: "Intel(R) Xeon(R) Processor").
std::string host_line(const nlohmann::json& ctx) {
  if (!ctx.is_object() || !ctx.contains("cpu")) return "";
  const nlohmann::json& cpu = ctx["cpu"];
  auto text = [](const nlohmann::json& j, const char* key) {
    return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string("?");
  };
  std::string caches;
  if (cpu.contains("caches") && cpu["caches"].is_object())
    for (const auto& [level, size] : cpu["caches"].items())
      caches += fmt::format(" {} {}", level, size.is_string() ? size.get<std::string>() : "?");
  return fmt::format("host: {} [{} {}/{}/{}], microcode {},{}, hypervisor {}, {}, {} CPUs\n",
                     text(ctx, "cpu_model"), text(cpu, "vendor"), text(cpu, "family"),
                     text(cpu, "model"), text(cpu, "stepping"), text(cpu, "microcode"), caches,
                     text(cpu, "hypervisor"), text(ctx, "kernel"),
                     ctx.value("cpus_online", 0));
}

std::string runs_text(const ClientOptions& o) {
  if (o.time_s > 0) return fmt::format("runs until {:g} s of data per size, medians", o.time_s);
  if (o.repeat_auto)
    return fmt::format("auto ({}..{}) run(s) per size, medians", ClientOptions::kAutoMinRuns,
                       o.repeat);
  return fmt::format("{} run(s){}", o.repeat, o.repeat > 1 ? " per size, medians" : "");
}

std::string render_table(const Report& r) {
  const ClientOptions& o = r.options;
  std::string out;
  const bool client_sends = !o.reverse;
  const bool tls = o.proto == Proto::kTls;
  out += fmt::format("iobench {} | {} | proto {} | engine {} | payload {} | {}{}\n",
                     IOBENCH_VERSION, r.mode == RunMode::kLoopback ? "loopback" : "server " + r.server,
                     name_of(o.proto),
                     o.send_engine == o.recv_engine
                         ? std::string(name_of(o.send_engine))
                         : fmt::format("{} sender, {} receiver", name_of(o.send_engine),
                                       name_of(o.recv_engine)),
                     r.payload_source, runs_text(o),
                     o.group() ? fmt::format(" | {} connections, totals per side", o.conns) : "");
  if (o.verbose) out += host_line(r.context);
  if (!r.sizes.empty() && !r.sizes.front().runs.empty()) {
    const auto& first = r.sizes.front().runs.front();
    // Where the syscall figures come from: the counting run, when there is one (--syscalls auto).
    const std::optional<RunRecord>& counting = r.sizes.front().counting_run;
    for (const auto* side : {&first.sender, &first.receiver}) {
      if (!first.reported(side->is_sender)) {
        out += fmt::format("  {:<8} not reported: the run {} before the {} sent its figures\n",
                           side->is_sender ? "sender" : "receiver",
                           was_interrupted(r) ? "was interrupted" : "failed",
                           side->is_sender == client_sends ? "client" : "server");
        continue;
      }
      const proto::SideResult& counted =
          counting ? (side->is_sender ? counting->sender : counting->receiver) : *side;
      if (o.verbose) out += side_header_lines(*side, counted, counting.has_value(), client_sends);
    }
    out += placement_warning(r, first.sender, first.receiver);
  }
  out += fmt::format(
      "{:>6} {:<8} {:<6} {:>11} {:>8} {:>7} {:>8} {:>7} {:>7} {:>7} {:>9} {:>9} {:>8} {:>9} {:>9}",
      "buf", "side", "host", "bytes", "time_s", "Gbit/s", "MiB/s", "user_s", "sys_s", "cpu_s",
      "cpu_s/GiB", "calls", "B/call", "syscalls", "sys_total");
  out += tls ? fmt::format(" {:>8}\n", "records") : "\n";
  for (const auto& size : r.sizes) {
    if (size.runs.empty()) continue;
    const std::string send_label = size.buf.adaptive ? "adapt" : format_size(size.buf.send_bytes);
    const std::string recv_label = size.buf.adaptive ? "adapt" : format_size(size.buf.recv_bytes);
    out += side_row(send_label, "sender", client_sends ? "client" : "server", summarize(size, true),
                    tls, was_interrupted(r));
    out += side_row(recv_label, "receiver", client_sends ? "server" : "client",
                    summarize(size, false), tls, was_interrupted(r));
  }
  out += spread_lines(r);
  out += partial_lines(r);
  out += repeat_auto_lines(r);
  out += short_run_note(r);
  if (!o.verbose) return out + tracer_lines(r) + group_lines(r) + process_cpu_line(r.processes);
  out += segment_lines(r);
  out += regime_lines(r);
  out += softirq_lines(r);
  out += tls_cost_lines(r);
  return out + tracer_lines(r) + group_lines(r) + process_cpu_lines(r.processes);
}

}  // namespace iobench
