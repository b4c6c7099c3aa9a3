// The connection options of a client run: how many connections, when each starts and how long
// it is, one writer for all of them (--fanout), and the adaptive mode's limits.
#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <string_view>
#include <tuple>

#include "adaptive/policy.h"
#include "cli/client_options.h"
#include "util/size.h"

namespace iobench {

void add_connection_options(CLI::App& app, ClientOptions& o, RawClient& raw) {
  unsigned_option(app.add_option("--conns", o.conns,
                                 "Connections at once, each streaming --bytes (default 1)"));
  app.add_option("--stagger", raw.stagger, "Start connection i at i x this (e.g. 50ms)");
  app.add_option("--fanout", raw.fanout,
                 "One writer thread streams to all --conns replicas, as a primary's full sync: "
                 "connset (blocking, each chunk to each in turn) or event-loop (epoll or uring, "
                 "the slowest paces all); off (default)");
  app.add_option("--source-rate", raw.source_rate,
                 "--fanout: the writer's source produces at most this per second (e.g. 90M), "
                 "as a fork serialising the dataset does");
  app.add_option("--bytes-spread", o.bytes_spread,
                 "Shorten each connection by a seeded random fraction up to this (0..0.9)");
  app.add_option("--budget", raw.budget,
                 "--buf adaptive: buffer memory per side, all connections (default 256K)");
  app.add_option("--buf-min", raw.buf_min,
                 "--buf adaptive: smallest buffer (default 4K; with --fanout the chunk the writer "
                 "starts from with one replica: 16K, one record, on TLS; --buf-max on TCP)");
  app.add_option("--buf-max", raw.buf_max,
                 "--buf adaptive: largest buffer (default 64K; independent TLS connections: 16K, "
                 "one record)");
}

Status validate_conns(ClientOptions& o, const RawClient& raw) {
  if (o.conns < 1 || o.conns > kMaxConns)
    return fail(fmt::format("invalid --conns '{}': expected 1..{}", o.conns, kMaxConns));
  if (!raw.stagger.empty()) {
    auto v = parse_duration(raw.stagger, "--stagger", 60);
    if (!v) return std::unexpected(v.error());
    o.stagger_s = *v;
  }
  // Each connection holds a socket and an epoll or io_uring descriptor, on both sides (the
  // loopback server is another process under the same limit).
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY &&
      2 * uint64_t{o.conns} + 32 > nofile.rlim_cur)
    return fail(fmt::format(
        "--conns {} needs about {} descriptors, above RLIMIT_NOFILE {} (raise it: ulimit -n)",
        o.conns, 2 * uint64_t{o.conns} + 32, nofile.rlim_cur));
  if (!(o.bytes_spread >= 0 && o.bytes_spread <= 0.9))
    return fail(fmt::format("invalid --bytes-spread '{}': expected 0..0.9", o.bytes_spread));
  if (o.bytes_spread > 0 && o.decompress)
    return fail("--bytes-spread cuts the payload mid-frame: it cannot go with --decompress");
  if (o.group() && attaches_tool(o.syscalls))
    return fail(
        fmt::format("--syscalls {} attaches per session: use it without --conns and "
                    "--buf adaptive (kernel counters cover those runs)",
                    name_of(o.syscalls)));
  for (auto [text, field, name] : {std::tuple{&raw.budget, &o.budget, "--budget"},
                                   {&raw.buf_min, &o.buf_min, "--buf-min"},
                                   {&raw.buf_max, &o.buf_max, "--buf-max"}}) {
    if (text->empty()) continue;
    auto v =
        parse_size(*text, name, kMinBuf, name == std::string_view("--budget") ? kGiB : kMaxBuf);
    if (!v) return std::unexpected(v.error());
    *field = *v;
  }
  const bool adaptive =
      std::any_of(o.bufs.begin(), o.bufs.end(), [](const BufPair& b) { return b.adaptive; });
  if (!adaptive) {
    for (auto [text, name] : {std::pair{&raw.budget, "--budget"},
                              {&raw.buf_min, "--buf-min"},
                              {&raw.buf_max, "--buf-max"}})
      if (!text->empty()) return fail(fmt::format("{} needs --buf adaptive", name));
    return {};
  }
  const bool fanout = o.fanout != FanoutShape::kOff;
  if (!fanout && o.proto == Proto::kTls && raw.buf_max.empty())
    o.buf_max = std::max(kTlsRecordBytes, o.buf_min);
  if (fanout && raw.buf_min.empty())
    o.buf_min = writer_start_chunk(o.proto == Proto::kTls, o.buf_max);
  // The writer's chunk is one buffer for every replica: the budget holds one chunk, not N.
  if (auto st = validate_limits({o.budget, o.buf_min, o.buf_max}, fanout ? 1 : o.conns); !st)
    return st;
  for (BufPair& b : o.bufs)
    if (b.adaptive) b.send_bytes = b.recv_bytes = o.buf_max;
  return {};
}

}  // namespace iobench
