// The human-readable table: one row per side per buffer size, medians when repeated.
#include <fmt/format.h>

#include "cli/size.h"
#include "report/report.h"

namespace iobench {
namespace {

std::string side_row(const std::string& buf, const char* side, const char* where,
                     const SideSummary& s) {
  return fmt::format(
      "{:>6} {:<8} {:<6} {:>11} {:>8.4f} {:>7.2f} {:>8.1f} {:>7.3f} {:>7.3f} {:>7.3f} {:>8.3f} "
      "{:>9.0f} {:>8.0f}\n",
      buf, side, where, format_bytes_human(static_cast<uint64_t>(s.bytes.median)), s.wall_s.median,
      s.throughput_gbps.median, s.throughput_mib_s.median, s.cpu_user_s.median, s.cpu_sys_s.median,
      s.cpu_s.median, s.cpu_s_per_gib.median, s.io_calls.median, s.bytes_per_call.median);
}

}  // namespace

std::string render_table(const Report& r) {
  const ClientOptions& o = r.options;
  std::string out;
  const bool client_sends = !o.reverse;
  out += fmt::format("iobench {} | {} | proto {} | engine {} | payload {} | {} run(s){}\n",
                     IOBENCH_VERSION, r.mode == "loopback" ? "loopback" : "server " + r.server,
                     o.proto, o.engine, r.payload_source, o.repeat,
                     o.repeat > 1 ? " per size, medians" : "");
  if (!r.sizes.empty() && !r.sizes.front().runs.empty()) {
    const auto& first = r.sizes.front().runs.front();
    for (const auto* side : {&first.sender, &first.receiver}) {
      out += fmt::format(
          "  {:<8} socket: SO_SNDBUF {} B, SO_RCVBUF {} B (granted), TCP_NODELAY {}, MTU {}\n",
          side->is_sender ? "sender" : "receiver", side->sndbuf_bytes, side->rcvbuf_bytes,
          side->nodelay ? "on" : "off", side->mtu_bytes);
    }
  }
  out += fmt::format(
      "{:>6} {:<8} {:<6} {:>11} {:>8} {:>7} {:>8} {:>7} {:>7} {:>7} {:>8} {:>9} {:>8}\n", "buf",
      "side", "host", "bytes", "time_s", "Gbit/s", "MiB/s", "user_s", "sys_s", "cpu_s", "cpu_s/GiB",
      "calls", "B/call");
  for (const auto& size : r.sizes) {
    if (size.runs.empty()) continue;
    out += side_row(format_size(size.buf.send_bytes), "sender", client_sends ? "client" : "server",
                    summarize(size.runs, true));
    out += side_row(format_size(size.buf.recv_bytes), "receiver",
                    client_sends ? "server" : "client", summarize(size.runs, false));
  }
  return out;
}

}  // namespace iobench
