// The CSV report: one row per side of every run (the counting run last), its columns listed
// once below — each column's name and how its value is written — so the header and the rows
// cannot drift apart.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <functional>

#include "proto/fields.h"
#include "report/report.h"
#include "util/size.h"

namespace iobench {
namespace {

// RFC 4180: a field with a comma or quote is quoted, its quotes doubled.
std::string csv_quoted(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

// One side of one run, with what its columns are computed from.
struct Row {
  const Report& report;
  const SizeResults& size;
  const RunRecord& run;
  const proto::SideResult& side;
  const SideFigures f;
  std::string run_column;  // the run's number, or "counting"
  bool on_client;
  const proto::GroupResult* group;  // this side's whole-run figures (a --conns run)
};

struct Column {
  const char* name;
  std::function<std::string(const Row&)> value;
};

template <typename V>
std::string plain(const V& v) {
  return fmt::format("{}", v);
}
std::string fixed(double v, int digits) { return fmt::format("{:.{}f}", v, digits); }

const std::array kColumns{
    Column{"send_buf_bytes", [](const Row& r) { return plain(r.size.buf.send_bytes); }},
    Column{"recv_buf_bytes", [](const Row& r) { return plain(r.size.buf.recv_bytes); }},
    Column{"run", [](const Row& r) { return r.run_column; }},
    Column{"side",
           [](const Row& r) { return std::string(r.side.is_sender ? "sender" : "receiver"); }},
    Column{"host", [](const Row& r) { return std::string(r.on_client ? "client" : "server"); }},
    Column{"bytes", [](const Row& r) { return plain(r.side.io.bytes); }},
    Column{"duration_ns", [](const Row& r) { return plain(r.side.probe.wall_ns); }},
    Column{"throughput_gbps", [](const Row& r) { return fixed(r.f.throughput_gbps, 6); }},
    Column{"throughput_mib_s", [](const Row& r) { return fixed(r.f.throughput_mib_s, 3); }},
    Column{"cpu_user_s", [](const Row& r) { return fixed(r.f.cpu_user_s, 6); }},
    Column{"cpu_sys_s", [](const Row& r) { return fixed(r.f.cpu_sys_s, 6); }},
    Column{"cpu_s", [](const Row& r) { return fixed(r.f.cpu_s, 6); }},
    Column{"cpu_s_per_gib", [](const Row& r) { return fixed(r.f.cpu_s_per_gib, 6); }},
    Column{"io_calls", [](const Row& r) { return plain(r.side.io.calls); }},
    Column{"bytes_per_call", [](const Row& r) { return fixed(r.f.bytes_per_call, 1); }},
    Column{"short_writes", [](const Row& r) { return plain(r.side.io.short_writes); }},
    Column{"voluntary_ctxsw", [](const Row& r) { return plain(r.side.probe.vol_ctxsw); }},
    Column{"involuntary_ctxsw", [](const Row& r) { return plain(r.side.probe.invol_ctxsw); }},
    Column{"sndbuf_bytes", [](const Row& r) { return plain(r.side.socket.sndbuf_bytes); }},
    Column{"rcvbuf_bytes", [](const Row& r) { return plain(r.side.socket.rcvbuf_bytes); }},
    Column{"nodelay", [](const Row& r) { return plain(r.side.socket.nodelay ? 1 : 0); }},
    Column{"mtu_bytes", [](const Row& r) { return plain(r.side.socket.mtu_bytes); }},
    Column{"proto", [](const Row& r) { return std::string(name_of(r.report.options.proto)); }},
    Column{"engine", [](const Row& r) { return r.side.engine; }},
    Column{"decoded_bytes", [](const Row& r) { return plain(r.side.decoded_bytes); }},
    Column{"xxh3", [](const Row& r) { return fmt::format("{:016x}", r.side.xxh3); }},
    Column{"tls_version", [](const Row& r) { return r.side.tls.version; }},
    Column{"tls_cipher", [](const Row& r) { return r.side.tls.cipher; }},
    Column{"tls_group", [](const Row& r) { return r.side.tls.group; }},
    Column{"tls_io", [](const Row& r) { return r.side.tls.io; }},
    Column{"tls_handshake_ns", [](const Row& r) { return plain(r.side.tls.handshake_ns); }},
    Column{"syscalls_total", [](const Row& r) { return fixed(r.f.syscalls_total, 0); }},
    Column{"syscalls_data_direction", [](const Row& r) { return fixed(r.f.syscalls, 0); }},
    Column{"label", [](const Row& r) { return buf_label(r.size.buf); }},
    Column{"conns",
           [](const Row& r) { return plain(r.run.group ? r.run.group->conns.size() : size_t{1}); }},
    Column{"conns_failed",
           [](const Row& r) { return plain(r.group ? r.group->conns_failed : uint32_t{0}); }},
    Column{"peak_buffer_bytes",
           [](const Row& r) { return plain(r.group ? r.group->peak_buffer_bytes : uint64_t{0}); }},
    Column{"peak_rss_bytes",
           [](const Row& r) { return plain(r.group ? r.group->peak_rss_bytes : uint64_t{0}); }},
    Column{"slowest_conn_gbps",
           [](const Row& r) {
             return fixed(r.run.group ? group_figures(*r.run.group).conn_gbps.min : 0.0, 6);
           }},
    Column{"engine_path", [](const Row& r) { return csv_quoted(r.side.io.path); }},
    // A run that failed or was interrupted: this side's figures up to that moment, and why.
    Column{"partial", [](const Row& r) { return std::string(r.run.partial ? "1" : "0"); }},
    Column{"error",
           [](const Row& r) {
             return csv_quoted(!r.run.error.empty() ? r.run.error : r.side.error);
           }},
};

using Cells = std::vector<std::pair<std::string, std::string>>;

// One cell's text: enums by name, bools as 0/1, texts quoted where needed, counts by name as
// "read=3;write=5".
template <typename V>
std::string cell(const V& v) {
  if constexpr (NamedEnum<V>)
    return std::string(name_of(v));
  else if constexpr (std::is_same_v<V, bool>)
    return plain(v ? 1 : 0);
  else if constexpr (std::is_same_v<V, std::string>)
    return csv_quoted(v);
  else if constexpr (std::is_same_v<V, std::vector<std::pair<std::string, uint64_t>>>) {
    std::string out;
    for (const auto& [name, n] : v) out += fmt::format("{}{}={}", out.empty() ? "" : ";", name, n);
    return csv_quoted(out);
  } else
    return plain(v);
}

bool listed(std::string_view name) {
  return std::any_of(kColumns.begin(), kColumns.end(),
                     [&](const Column& c) { return c.name == name; });
}

// A described block's fields as (block.field, value) cells, in its field list's order (a block
// inside it as block.inner.field).
template <Described T>
void block_cells(std::string_view block, const T& fields, Cells& out) {
  describe(fields, [&](const Field& f, const auto& v) {
    if (f.unreported) return;
    if constexpr (Described<std::decay_t<decltype(v)>>)
      block_cells(f.flatten ? std::string(block) : fmt::format("{}.{}", block, f.name), v, out);
    else
      out.emplace_back(fmt::format("{}.{}", block, f.name), cell(v));
  });
}

// The side's described figure blocks, a column per field ("side.host_busy.busy_ns",
// "side.socket.congestion": the row's side, as the JSON nests them; "socket.congestion" is the
// option asked for), after the listed figures: a field added to a block has its column with no
// line here. A flattened block's fields (the engine's counts) are the side's own: a column each
// under its name unless listed above, its blocks as the side's ("side.zerocopy.sends").
template <Described T>
void figure_cells(const T& fields, bool flattened, Cells& out) {
  describe(fields, [&](const Field& f, const auto& v) {
    using V = std::decay_t<decltype(v)>;
    if constexpr (Described<V>) {
      if (f.flatten)
        figure_cells(v, true, out);
      else
        block_cells(fmt::format("side.{}", f.name), v, out);
    } else if (flattened && !listed(f.name)) {
      out.emplace_back(std::string(f.name), cell(v));
    }
  });
}

Cells figure_cells(const proto::SideResult& side) {
  Cells out;
  figure_cells(side, false, out);
  return out;
}

// The run's described option blocks, a column per field ("tuning.queue_depth", "socket.sndbuf"),
// after the figures: the same for every row of a report.
Cells option_cells(const ClientOptions& o) {
  Cells out;
  for_each_option_block(o, [&](const char* block, const char*, const auto& fields) {
    block_cells(block, fields, out);
  });
  return out;
}

std::string line(const std::function<std::string(const Column&)>& cell, const Cells& figures,
                 const Cells& options, bool header) {
  std::string out;
  for (const Column& c : kColumns) {
    if (!out.empty()) out += ',';
    out += cell(c);
  }
  for (const Cells* cells : {&figures, &options})
    for (const auto& [name, value] : *cells) {
      out += ',';
      out += header ? name : value;
    }
  out += '\n';
  return out;
}

}  // namespace

std::string render_csv(const Report& r) {
  const auto options = option_cells(r.options);
  std::string out = line([](const Column& c) { return std::string(c.name); },
                         figure_cells(proto::SideResult{}), options, true);
  const bool client_sends = !r.options.reverse;
  for (const auto& size : r.sizes) {
    // The counting run (--syscalls auto) last, its run column "counting".
    for (const RunRecord* run : size.all_runs()) {
      const bool counting = size.counting_run && run == &*size.counting_run;
      for (const auto* side : {&run->sender, &run->receiver}) {
        if (!run->reported(side->is_sender)) continue;  // no figures: no row
        const proto::GroupResult* g =
            run->group ? &(side->is_sender ? run->group->sender : run->group->receiver) : nullptr;
        const Row row{r,
                      size,
                      *run,
                      *side,
                      side_figures(*side),
                      counting ? "counting" : std::to_string(run->run),
                      side->is_sender == client_sends,
                      g};
        out += line([&](const Column& c) { return c.value(row); }, figure_cells(*side), options,
                    false);
      }
    }
  }
  return out;
}

}  // namespace iobench
