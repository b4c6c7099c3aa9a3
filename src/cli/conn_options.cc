// The connection options of a client run (declared with the "run" block, config/options.h): how
// many connections, when each starts and how long it is, one writer for all of them (--fanout),
// and the adaptive mode's limits, checked against each other and the buffer list.
#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <string_view>

#include "adaptive/policy.h"
#include "cli/client_options.h"
#include "util/size.h"

namespace iobench {

Status validate_conns(ClientOptions& o, const RawClient& raw) {
  // Each connection holds a socket and an epoll or io_uring descriptor, on both sides (the
  // loopback server is another process under the same limit).
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY &&
      2 * uint64_t{o.conns} + 32 > nofile.rlim_cur)
    return fail(fmt::format(
        "--conns {} needs about {} descriptors, above RLIMIT_NOFILE {} (raise it: ulimit -n)",
        o.conns, 2 * uint64_t{o.conns} + 32, nofile.rlim_cur));
  if (o.bytes_spread > 0 && o.decompress)
    return fail("--bytes-spread cuts the payload mid-frame: it cannot go with --decompress");
  if (o.group() && attaches_tool(o.syscalls))
    return fail(
        fmt::format("--syscalls {} attaches per session: use it without --conns and "
                    "--buf adaptive (kernel counters cover those runs)",
                    name_of(o.syscalls)));
  const bool adaptive =
      std::any_of(o.bufs.begin(), o.bufs.end(), [](const BufPair& b) { return b.adaptive; });
  if (!adaptive) {
    for (const char* flag : {"--budget", "--buf-min", "--buf-max"})
      if (raw.typed(flag)) return fail(fmt::format("{} needs --buf adaptive", flag));
    return {};
  }
  const bool fanout = o.fanout != FanoutShape::kOff;
  // TLS, either shape: a chunk above one record writes the same records and, for a fan-out
  // writer at N=2, cost more than 16K with more memory (results/fanout: x1.33..x1.37 with 32K).
  if (o.proto == Proto::kTls && !raw.typed("--buf-max"))
    o.buf_max = std::max(kTlsRecordBytes, o.buf_min);
  if (fanout && !raw.typed("--buf-min"))
    o.buf_min = writer_start_chunk(o.proto == Proto::kTls, o.buf_max);
  // The writer's chunk is one buffer for every replica: the budget holds one chunk, not N.
  if (auto st = validate_limits({o.budget, o.buf_min, o.buf_max}, fanout ? 1 : o.conns); !st)
    return st;
  for (BufPair& b : o.bufs)
    if (b.adaptive) b.send_bytes = b.recv_bytes = o.buf_max;
  return {};
}

}  // namespace iobench
