// The JSON document: schema version, context, effective options, per-run raw figures and
// per-size summaries, with the source of every figure named.
#include <fmt/format.h>

#include "proto/fields.h"
#include "report/report.h"
#include "util/size.h"

namespace iobench {
namespace {

using nlohmann::json;

template <Described T>
json fields_json(const T& block);

// One field's value: enums by name, a number whose 0 (a text whose "") means "not set" as null,
// counts by name as an object, nested blocks as objects.
template <typename V>
json value_json(const Field& f, const V& v) {
  if constexpr (Described<V>)
    return fields_json(v);
  else if constexpr (NamedEnum<V>)
    return name_of(v);
  else if constexpr (std::is_same_v<V, std::vector<std::pair<std::string, uint64_t>>>) {
    json by_name = json::object();
    for (const auto& [name, n] : v) by_name[name] = n;
    return by_name;
  } else if constexpr ((std::is_arithmetic_v<V> && !std::is_same_v<V, bool>) ||
                       std::is_same_v<V, std::string>)
    return f.zero_is_unset && v == V{} ? json(nullptr) : json(v);
  else
    return v;
}

// A described block as a JSON object, a key per field but the unreported (paths, the token,
// where the output goes); a flattened block's fields as the block's own.
template <Described T>
json fields_json(const T& block) {
  json out = json::object();
  describe(block, [&](const Field& f, const auto& v) {
    if (f.unreported) return;
    if constexpr (Described<std::decay_t<decltype(v)>>)
      if (f.flatten) {
        out.update(fields_json(v));
        return;
      }
    out[std::string(f.name)] = value_json(f, v);
  });
  return out;
}

json tls_json(const proto::SideResult& r) {
  if (r.tls.version.empty()) return nullptr;
  json out = fields_json(r.tls);
  out["records_in"] = r.stream.records_in;
  out["records_out"] = r.stream.records_out;
  return out;
}

// The syscalls block as described (source, note, the kernel's total and counts by name), its
// total the figure the summary uses, with the data direction's and the Stream's own counts.
json syscalls_json(const proto::SideResult& r, const SideFigures& f) {
  const bool kernel = kernel_counted(r.syscalls.source);
  json out = fields_json(r.syscalls);
  out["total"] = f.syscalls_total;
  if (!kernel) out["by_name"] = nullptr;
  out["read"] = kernel ? kernel_count(r, "read") : r.stream.sys_reads;
  out["write"] = kernel ? kernel_count(r, "write") : r.stream.sys_writes;
  out["data_direction"] = f.syscalls;
  out["per_mib"] = f.syscalls_per_mib;
  out["bytes_per_syscall"] = f.bytes_per_syscall;
  out["counted"] = {{"read", r.stream.sys_reads}, {"write", r.stream.sys_writes}};
  return out;
}

json tracer_json(const std::optional<TracerCounts>& t) {
  if (!t) return nullptr;
  json by_name = json::object();
  for (const auto& [name, count] : t->by_name) by_name[name] = count;
  return {{"tool", name_of(t->tool)},
          {"window", "whole session: connect, handshake, control messages, data, teardown"},
          {"distorts", "CPU and time figures of this run"},
          {"total", t->total},
          {"by_name", by_name}};
}

// Every described block of `r` (its figure blocks: probe, socket, tls, host_busy ...) that `out`
// does not hold yet, under its field name, and every field of a flattened block (the engine's
// counts): a figure added to a block, or a new block, is written with no line here.
template <bool Flattened = false, Described T>
void add_blocks(json& out, const T& r) {
  describe(r, [&](const Field& f, const auto& v) {
    using V = std::decay_t<decltype(v)>;
    const std::string key(f.name);
    if constexpr (Described<V>) {
      if (f.flatten)
        add_blocks<true>(out, v);
      else if (!out.contains(key))
        out[key] = fields_json(v);
    } else if constexpr (Flattened) {
      if (!out.contains(key)) out[key] = value_json(f, v);
    }
  });
}

// The side's figures: the derived ones and the blocks that add to their fields here, then every
// other block and the engine's counts as they are described (add_blocks).
json side_json(const proto::SideResult& r, bool client_sends,
               const std::optional<TracerCounts>& tracer) {
  const SideFigures f = side_figures(r);
  json zerocopy = fields_json(r.io.zc);
  zerocopy["on"] = r.io.zc.sends > 0;
  json placement = fields_json(r.placement);
  if (r.placement.pinned_cpu < 0) placement["pinned_cpu"] = nullptr;
  placement["seen_how"] = "sched_getcpu at the data phase's start and end";
  json segments = fields_json(r.segments);
  segments["how"] =
      "TCP_INFO tcpi_segs_out/in and tcpi_total_retrans around the data phase (a sender's until "
      "the receiver's RESULT arrived); out includes the retransmitted";
  json out = {
      {"tracer", tracer_json(tracer)},
      {"role", r.is_sender ? "sender" : "receiver"},
      {"host", r.is_sender == client_sends ? "client" : "server"},
      {"bytes_expected", r.bytes_expected},
      {"buf_bytes", r.buf_bytes},
      {"engine", r.engine},
      {"duration_ns", r.probe.wall_ns},
      {"throughput_gbps", f.throughput_gbps},
      {"throughput_mib_s", f.throughput_mib_s},
      {"cpu_user_s", f.cpu_user_s},
      {"cpu_sys_s", f.cpu_sys_s},
      {"cpu_s", f.cpu_s},
      {"cpu_s_per_gib", f.cpu_s_per_gib},
      {"bytes_per_call", f.bytes_per_call},
      {"buf_resizes", r.buf_resizes},
      {"zerocopy", zerocopy},
      {"cpu_scope", name_of(r.cpu_scope)},
      {"placement", placement},
      {"voluntary_ctxsw", r.probe.vol_ctxsw},
      {"involuntary_ctxsw", r.probe.invol_ctxsw},
      {"xxh3", fmt::format("{:016x}", r.xxh3)},
      {"decoded", r.decoded},
      {"decoded_bytes", r.decoded_bytes},
      {"segments", segments},
      {"syscalls", syscalls_json(r, f)},
      {"tls", tls_json(r)},
  };
  add_blocks(out, r);
  return out;
}

json group_side_json(const proto::GroupResult& g, bool known) {
  if (!known) return {{"available", false}};
  json timeline = json::array(), changes = json::array();
  for (const auto& p : g.timeline)
    timeline.push_back({{"t_ns", p.t_ns}, {"live", p.live}, {"buf_bytes", p.size}});
  for (const auto& c : g.changes)
    changes.push_back(
        {{"t_ns", c.t_ns},
         {"conn", c.conn},
         {"from_bytes", c.from},
         {"to_bytes", c.to},
         {"live", c.live},
         {"target_bytes", c.target},
         {"why", fmt::format("{}live count {}{}", c.from == 0 ? "opened, " : "", c.live,
                             c.to < c.target ? ", budget full: part of target" : "")}});
  json out = {{"available", true},
              {"policy", g.policy},
              {"conns", g.conns},
              {"conns_failed", g.conns_failed},
              {"duration_ns", g.probe.wall_ns},
              {"cpu_s", static_cast<double>(g.probe.cpu_ns) / 1e9},
              {"cpu_user_s", static_cast<double>(g.probe.user_us) / 1e6},
              {"cpu_sys_s", static_cast<double>(g.probe.sys_us) / 1e6},
              {"peak_live", g.peak_live},
              {"peak_buffer_bytes", g.peak_buffer_bytes},
              {"peak_rss_bytes", g.peak_rss_bytes},
              {"live_timeline", timeline},
              {"buffer_changes", changes},
              {"buffer_changes_dropped", g.changes_dropped},
              {"error", g.error}};
  add_blocks(out, g);
  return out;
}

json group_json(const GroupRecord& g, bool client_sends) {
  json conns = json::array();
  for (const ConnRecord& c : g.conns) {
    json one = {{"index", c.index},
                {"bytes", c.bytes},
                {"start_ns", c.start_ns},
                {"ok", c.error.empty()},
                {"error", c.error}};
    if (c.sender) one["sender"] = side_json(*c.sender, client_sends, std::nullopt);
    if (c.receiver) one["receiver"] = side_json(*c.receiver, client_sends, std::nullopt);
    conns.push_back(std::move(one));
  }
  const GroupFigures f = group_figures(g);
  return {{"conns", conns},
          {"error", g.error},
          {"fairness",
           {{"conn_gbps_min", f.conn_gbps.min},
            {"conn_gbps_median", f.conn_gbps.median},
            {"conn_gbps_max", f.conn_gbps.max},
            {"slowest_conn", f.slowest_conn},
            {"aggregate_gbps", f.aggregate_gbps}}},
          {"sender", group_side_json(g.sender, g.sender_known)},
          {"receiver", group_side_json(g.receiver, g.receiver_known)},
          {"fanout", fanout_json(g)}};
}

json stat_json(const Stat& s) { return {{"median", s.median}, {"min", s.min}, {"max", s.max}}; }

json summary_json(const SideSummary& s) {
  return {{"bytes", stat_json(s.bytes)},
          {"wall_s", stat_json(s.wall_s)},
          {"throughput_gbps", stat_json(s.throughput_gbps)},
          {"throughput_mib_s", stat_json(s.throughput_mib_s)},
          {"cpu_user_s", stat_json(s.cpu_user_s)},
          {"cpu_sys_s", stat_json(s.cpu_sys_s)},
          {"cpu_s", stat_json(s.cpu_s)},
          {"cpu_s_per_gib", stat_json(s.cpu_s_per_gib)},
          {"io_calls", stat_json(s.io_calls)},
          {"bytes_per_call", stat_json(s.bytes_per_call)},
          {"syscalls", stat_json(s.syscalls)},
          {"syscalls_total", stat_json(s.syscalls_total)},
          {"syscalls_per_mib", stat_json(s.syscalls_per_mib)},
          {"bytes_per_syscall", stat_json(s.bytes_per_syscall)},
          {"records", stat_json(s.records)}};
}

json options_json(const Report& r) {
  const ClientOptions& o = r.options;
  json bufs = json::array();
  for (const auto& b : o.bufs)
    bufs.push_back({{"send", b.send_bytes}, {"recv", b.recv_bytes}, {"adaptive", b.adaptive}});
  // The options outside the described blocks: lists, words and where the run went.
  json doc = {{"mode", name_of(r.mode)},
              {"server", r.server},
              {"bufs", bufs},
              {"payload", r.payload_source},
              {"repeat", o.repeat},
              {"repeat_auto", o.repeat_auto},
              {"target_ci", o.repeat_auto ? json(o.target_ci) : json(nullptr)},
              {"sender_cpu", o.sender_cpu < 0 ? json(nullptr) : json(o.sender_cpu)},
              {"receiver_cpu", o.receiver_cpu < 0 ? json(nullptr) : json(o.receiver_cpu)}};
  // Every field of the described option blocks (the engines' tuning, the socket options, ...).
  for_each_option_block(o, [&](const char*, const char*, const auto& block) {
    doc.update(fields_json(block));
  });
  return doc;
}

json tls_crypto_json(const Report& r) {
  if (r.crypto.empty()) return nullptr;
  json out = json::array();
  for (const tls::CryptoCost& c : r.crypto)
    out.push_back({{"cipher", c.cipher},
                   {"record_bytes", c.record_bytes},
                   {"encrypt_s_per_gib", c.encrypt_s_per_gib},
                   {"decrypt_s_per_gib", c.decrypt_s_per_gib}});
  return out;
}

}  // namespace

namespace {

// How each figure was obtained: the JSON's `sources` block.
json sources_json() {
  return {{"duration_ns",
           "CLOCK_MONOTONIC around the data phase: sender from first write to the "
           "receiver's RESULT (end-to-end ack); receiver from first read to last byte "
           "consumed"},
          {"cpu_user_s", "getrusage(RUSAGE_SELF) delta; split sampled per scheduler tick"},
          {"cpu_sys_s", "getrusage(RUSAGE_SELF) delta; split sampled per scheduler tick"},
          {"cpu_s", "clock_gettime(CLOCK_PROCESS_CPUTIME_ID) delta (exact, all threads)"},
          {"io_calls",
           "counted: read/write calls the engine issued on its stream (TLS: SSL_read / "
           "SSL_write calls)"},
          {"syscalls",
           {{"source", "counted"},
            {"how",
             "read(2)/write(2) issued underneath the stream: by the engine for "
             "TCP, by OpenSSL's socket BIO (socket model) or by iobench (bio "
             "model) for TLS; counted from the data phase only"}}},
          {"records", "TLS record headers seen by OpenSSL's message callback"},
          {"send_queue",
           "stream.queue_samples / queue_unsent_bytes: after every 256th write(2) of the data "
           "phase, ioctl(SIOCOUTQNSD) on the socket (bytes queued, not yet sent), summed"},
          {"socket", "getsockopt on the connected socket after setup"},
          {"placement",
           "per side: sched_setaffinity of the data phase's thread (--cpus), its allowed set "
           "(sched_getaffinity before pinning) and sched_getcpu at the data phase's start and "
           "end"},
          {"host_busy",
           "per side, over the same window as duration_ns: the online CPUs x the wall time "
           "minus their idle time (source cpuidle: the sum of /sys/devices/system/cpu/cpu*/"
           "cpuidle/state*/time, microseconds, counted as each idle period ends; proc_stat: "
           "idle + iowait of /proc/stat, 10 ms ticks). Every CPU's busy time, whoever spent "
           "it: both sides, softirqs and ksoftirqd, other processes"},
          {"softirqs",
           "per run: /proc/softirqs NET_RX and NET_TX per CPU, read by the client before the "
           "session opens and after it closes (host-wide counters)"},
          {"tls_cost",
           "per size and side: cpu_s_per_gib (median) minus tls_crypto's encrypt (sender) or "
           "decrypt (receiver) cost; records and syscalls from the summary"},
          {"tls_crypto",
           "EVP AEAD seal and open of records of each size the runs moved, each record with its "
           "own nonce and tag, timed with CLOCK_THREAD_CPUTIME_ID for 15 ms each way in the "
           "client after the runs"},
          {"processes",
           "whole processes: the client's getrusage(RUSAGE_SELF) when the report is made, the "
           "loopback server's and the strace/perf tools' rusage from wait4 once reaped (the "
           "total is exact, the user/sys split tick-sampled); data_phases_cpu_s sums this "
           "process's side of the measured runs, other_runs_cpu_s of warm-up and counting runs, "
           "payload_cpu_s the payload's building or mapping; rest_cpu_s is the remainder"}};
}

json run_json(const Report& r, const RunRecord& run) {
  const bool client_sends = !r.options.reverse;
  json one = {
      {"run", run.run},
      {"sender", run.sender_reported ? side_json(run.sender, client_sends, run.sender_tracer)
                                     : json(nullptr)},
      {"receiver", run.receiver_reported
                       ? side_json(run.receiver, client_sends, run.receiver_tracer)
                       : json(nullptr)}};
  if (run.group) one["group"] = group_json(*run.group, client_sends);
  one["partial"] = run.partial;
  one["error"] = run.error.empty() ? json(nullptr) : json(run.error);
  if (!run.softirqs.empty())
    one["softirqs"] = {
        {"host", r.mode == RunMode::kLoopback ? "this host: both sides" : "the client's"},
        {"net_rx_per_cpu", run.softirqs.net_rx},
        {"net_tx_per_cpu", run.softirqs.net_tx}};
  return one;
}

json size_json(const Report& r, const SizeResults& size) {
  json runs = json::array();
  for (const auto& run : size.runs) runs.push_back(run_json(r, run));
  json out = {{"send_buf_bytes", size.buf.send_bytes},
              {"recv_buf_bytes", size.buf.recv_bytes},
              {"label", buf_label(size.buf)},
              {"adaptive", size.buf.adaptive},
              {"runs", runs},
              {"counting_run", size.counting_run ? run_json(r, *size.counting_run) : nullptr},
              {"summary",
               {{"sender", summary_json(summarize(size, true))},
                {"receiver", summary_json(summarize(size, false))}}}};
  if (!r.crypto.empty()) out["tls_cost"] = tls_cost_json(r, size);
  if (const auto& a = size.repeat_auto)
    out["repeat_auto"] = {
        {"runs", a->runs},
        {"reached_target", a->reached},
        {"sender_ci_rel", a->sender_ci},
        {"receiver_ci_rel", a->receiver_ci},
        {"method",
         "half-width of the 95% percentile bootstrap interval of the median CPU per GiB, over "
         "the median, after each measured run from the 5th; partial runs left out"}};
  return out;
}

}  // namespace

json render_json(const Report& r) {
  json results = json::array();
  for (const auto& size : r.sizes) results.push_back(size_json(r, size));
  return {
      {"schema_version", kSchemaVersion},
      {"tool", "iobench"},
      {"interrupted", r.interrupted.empty() ? json(nullptr) : json(r.interrupted)},
      {"context", r.context},
      {"options", options_json(r)},
      {"sources", sources_json()},
      {"processes", process_cpu_json(r.processes)},
      {"tls_crypto", tls_crypto_json(r)},
      {"results", results},
  };
}

}  // namespace iobench
