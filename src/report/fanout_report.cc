// --fanout in the report: the writer thread's figures and each replica as the writer saw it.
#include <fmt/format.h>

#include <algorithm>

#include "report/report.h"
#include "util/size.h"

namespace iobench {
namespace {

constexpr double kGiBytes = 1024.0 * 1024 * 1024;

double seconds(int64_t ns) { return static_cast<double>(ns) / 1e9; }

}  // namespace

FanoutFigures fanout_figures(const GroupRecord& g) {
  FanoutFigures f;
  if (!g.fanout) return f;
  const FanoutWriterFigures& w = *g.fanout;
  if (w.delivered_bytes > 0)
    f.cpu_s_per_gib_delivered =
        seconds(w.probe.cpu_ns) / (static_cast<double>(w.delivered_bytes) / kGiBytes);
  if (w.chunks > 0)
    f.cpu_us_per_chunk =
        static_cast<double>(w.probe.cpu_ns) / 1e3 / static_cast<double>(w.chunks);
  // Replicas paced by one finish together, the last written in each round a little after the
  // others (more so on a loaded or sanitized build): among those within 2% (at least 1 ms) of
  // the longest, the one that held the chunks open longest is the slowest.
  double longest = 0;
  for (const ConnRecord& c : g.conns) {
    if (!c.fanout) continue;
    f.last_done_s = std::max(f.last_done_s, seconds(c.fanout->done_ns));
    longest = std::max(longest, seconds(c.fanout->done_ns - c.fanout->joined_ns));
  }
  const double together = longest - std::max(1e-3, 0.02 * longest);
  double slowest_stall = -1;
  for (const ConnRecord& c : g.conns) {
    if (!c.fanout) continue;
    const double took = seconds(c.fanout->done_ns - c.fanout->joined_ns);
    const double stall = seconds(c.fanout->stall_ns);
    if (took >= together && stall > slowest_stall) {
      f.slowest_s = took;
      f.slowest = c.index;
      slowest_stall = stall;
    }
  }
  return f;
}

std::string fanout_lines(const GroupRecord& g) {
  if (!g.fanout) return "";
  const FanoutWriterFigures& w = *g.fanout;
  const FanoutFigures f = fanout_figures(g);
  std::string out = fmt::format(
      "  fan-out {} ({}): one writer thread, {} replica(s) ({} dropped); last done {:.3f} s; "
      "writer CPU {:.3f} s = {:.3f} s/GiB delivered ({} delivered), {:.2f} us per chunk round "
      "({} rounds, {} writes, {} waits); largest chunk {}; slowest replica {} ({:.3f} s)\n",
      name_of(w.shape), w.engine, w.replicas, w.dropped, f.last_done_s, seconds(w.probe.cpu_ns),
      f.cpu_s_per_gib_delivered, format_bytes_human(w.delivered_bytes), f.cpu_us_per_chunk,
      w.chunks, w.writes, w.waits, format_bytes_human(w.peak_chunk_bytes), f.slowest,
      f.slowest_s);
  if (w.source_rate > 0)
    out += fmt::format("  fan-out source: {}/s (--source-rate), the writer waited {:.3f} s for it\n",
                       format_bytes_human(w.source_rate), seconds(w.source_wait_ns));
  out += fmt::format("  {:>7} {:>9} {:>9} {:>10} {:>8} {:>9}  {}\n", "replica", "joined_s",
                     "done_s", "lag_max", "stalls", "stall_s", "writer");
  for (const ConnRecord& c : g.conns) {
    if (!c.fanout) {
      out += fmt::format("  {:>7}  never joined the writer\n", c.index);
      continue;
    }
    const FanoutReplica& r = *c.fanout;
    out += fmt::format("  {:>7} {:>9.3f} {:>9.3f} {:>10} {:>8} {:>9.3f}  {}\n", c.index,
                       seconds(r.joined_ns), seconds(r.done_ns), format_bytes_human(r.lag_max_bytes),
                       r.stalls, seconds(r.stall_ns),
                       r.dropped ? "dropped: " + r.drop_reason : std::string("all written"));
  }
  return out;
}

nlohmann::json fanout_json(const GroupRecord& g) {
  if (!g.fanout) return nullptr;
  const FanoutWriterFigures& w = *g.fanout;
  const FanoutFigures f = fanout_figures(g);
  nlohmann::json replicas = nlohmann::json::array();
  for (const ConnRecord& c : g.conns) {
    if (!c.fanout) {
      replicas.push_back({{"index", c.index}, {"joined", false}});
      continue;
    }
    const FanoutReplica& r = *c.fanout;
    replicas.push_back({{"index", c.index},
                        {"joined", true},
                        {"joined_s", seconds(r.joined_ns)},
                        {"done_s", seconds(r.done_ns)},
                        {"time_s", seconds(r.done_ns - r.joined_ns)},
                        {"lag_max_bytes", r.lag_max_bytes},
                        {"stalls", r.stalls},
                        {"stall_s", seconds(r.stall_ns)},
                        {"dropped", r.dropped},
                        {"drop_reason", r.drop_reason}});
  }
  return {{"shape", name_of(w.shape)},
          {"engine", w.engine},
          {"replicas", w.replicas},
          {"dropped", w.dropped},
          {"peak_live", w.peak_live},
          {"wall_s", seconds(w.probe.wall_ns)},
          {"last_done_s", f.last_done_s},
          {"writer_cpu_s", seconds(w.probe.cpu_ns)},
          {"writer_cpu_user_s", static_cast<double>(w.probe.user_us) / 1e6},
          {"writer_cpu_sys_s", static_cast<double>(w.probe.sys_us) / 1e6},
          {"writer_cpu_s_per_gib_delivered", f.cpu_s_per_gib_delivered},
          {"writer_cpu_us_per_chunk", f.cpu_us_per_chunk},
          {"delivered_bytes", w.delivered_bytes},
          {"chunks", w.chunks},
          {"writes", w.writes},
          {"waits", w.waits},
          {"peak_chunk_bytes", w.peak_chunk_bytes},
          {"source_rate_bytes_per_s", w.source_rate == 0 ? nlohmann::json(nullptr)
                                                         : nlohmann::json(w.source_rate)},
          {"source_wait_s", seconds(w.source_wait_ns)},
          {"slowest_replica", f.slowest},
          {"slowest_s", f.slowest_s},
          {"how",
           "the writer thread's CLOCK_THREAD_CPUTIME_ID and RUSAGE_THREAD from its first chunk to "
           "its last replica; times from its first chunk; stalls: event-loop writes that would "
           "block, connset writes that took over 1 ms; stall_s: event-loop time a replica kept "
           "its chunk open after its socket filled, connset time in its writes; lag: bytes "
           "behind the replica furthest ahead at a round's start"},
          {"replicas_detail", replicas}};
}

}  // namespace iobench
