#include "cli/engine_options.h"

#include <fmt/format.h>
#include <sched.h>

#include <charconv>
#include <utility>

#include "engine/write_pattern.h"
#include "probe/placement.h"
#include "util/size.h"

namespace iobench {

Status validate_engines(ClientOptions& o) {
  constexpr EngineKind kUring = EngineKind::kUring;
  for (auto [e, name] : {std::pair{o.engine, "--engine"},
                         {o.send_engine, "--send-engine"},
                         {o.recv_engine, "--recv-engine"}}) {
    if (e == kUring && o.proto == Proto::kTls && o.tls.io == tls::TlsIo::kSocket)
      return fail(
          fmt::format("{} uring cannot run with --tls-io socket: io_uring moves the records itself "
                      "(memory-BIO model); use --tls-io bio or auto",
                      name));
  }
  if (o.tuning.sqpoll && o.send_engine != kUring && o.recv_engine != kUring)
    return fail("--sqpoll needs uring on a side (--engine, --send-engine or --recv-engine)");
  if (o.tuning.fixed_buffers && o.send_engine != kUring)
    return fail("--fixed-buffers needs a uring sender (--engine or --send-engine uring)");
  if (o.tuning.fixed_buffers && o.conns > 1)
    return fail(
        "--fixed-buffers needs --conns 1 (each connection would register a copy of the "
        "payload)");
  if (o.tuning.fixed_buffers && o.proto != Proto::kTcp)
    return fail("--fixed-buffers needs --proto tcp (TLS sends records from OpenSSL's buffer)");
  if (o.tuning.uring_recv != UringRecv::kAuto && o.recv_engine != kUring)
    return fail("--uring-recv needs a uring receiver (--engine or --recv-engine uring)");
  if (o.tuning.zerocopy && o.proto != Proto::kTcp)
    return fail("--zerocopy needs --proto tcp (TLS encrypts into its own buffers)");
  if (o.tuning.edge && o.send_engine != EngineKind::kEpoll && o.recv_engine != EngineKind::kEpoll)
    return fail("--edge needs epoll on a side (--engine, --send-engine or --recv-engine)");
  if (o.tuning.reads_per_event > 0 && o.recv_engine != EngineKind::kEpoll)
    return fail("--reads-per-event needs an epoll receiver (--engine or --recv-engine epoll)");
  if (o.tuning.edge && o.tuning.reads_per_event > 0)
    return fail("--reads-per-event needs level-triggered epoll (drop --edge)");
  return {};
}

Status parse_cpus(const std::string& text, ClientOptions& o) {
  if (text.empty()) return {};
  const size_t comma = text.find(',');
  int cpus[2] = {-1, -1};
  for (int i = 0; i < 2; ++i) {
    const std::string part = i == 0 ? text.substr(0, comma)
                                    : (comma == std::string::npos ? text : text.substr(comma + 1));
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), cpus[i]);
    if (part.empty() || ec != std::errc{} || end != part.data() + part.size() || cpus[i] < 0 ||
        cpus[i] >= CPU_SETSIZE)
      return fail(fmt::format("invalid --cpus '{}': expected SENDER[,RECEIVER], CPU numbers 0..{}",
                              text, CPU_SETSIZE - 1));
  }
  o.sender_cpu = cpus[0];
  o.receiver_cpu = cpus[1];
  for (int cpu : {o.client_cpu(), o.connect.empty() ? o.server_cpu() : -1}) {
    if (auto st = check_cpu_usable(cpu, "process"); !st)
      return fail(fmt::format("invalid --cpus '{}': {}", text, st.error().message));
  }
  return {};
}

Status refuse_no_effect(const ClientOptions& o, const TypedOptions& typed) {
  if (typed.queue_depth && o.send_engine != EngineKind::kUring &&
      o.recv_engine != EngineKind::kUring)
    return fail("--qd needs uring on a side (--engine, --send-engine or --recv-engine)");
  if (typed.auth_token && o.connect.empty())
    return fail("--auth-token is for `iobench client`: the loopback server is private to this run");
  if (typed.stagger && o.stagger_s > 0 && o.conns < 2)
    return fail("--stagger needs --conns 2 or more");
  return {};
}

// --write-pattern shapes this process's writes: the client must be the sender, on an engine that
// asks for a size at every write, one connection, one row.
Status validate_write_pattern(const ClientOptions& o) {
  if (o.write_pattern.empty()) return {};
  if (auto p = WritePattern::parse(o.write_pattern, o.payload.seed); !p)
    return std::unexpected(p.error());
  if (o.reverse) return fail("--write-pattern shapes the client's writes: not with --reverse");
  if (o.send_engine == EngineKind::kUring)
    return fail("--write-pattern needs a sender engine that writes one call at a time: "
                "--engine blocking or epoll");
  if (o.group()) return fail("--write-pattern runs one connection: not with --conns or adaptive");
  if (o.bufs.size() != 1)
    return fail("--write-pattern replaces the sender's size: give at most one --buf (the "
                "receiver's)");
  return {};
}


Status validate_fanout(ClientOptions& o, bool source_rate_typed) {
  if (source_rate_typed && o.fanout == FanoutShape::kOff)
    return fail("--source-rate paces the --fanout writer's source: give --fanout");
  if (o.fanout == FanoutShape::kOff) return {};
  const std::string_view shape = name_of(o.fanout);
  if (o.reverse)
    return fail(fmt::format("--fanout {} makes the client the primary writing to --conns "
                            "replicas: not with --reverse",
                            shape));
  if (o.fanout == FanoutShape::kConnset && o.send_engine != EngineKind::kBlocking)
    return fail(fmt::format(
        "--fanout connset writes with blocking sockets (Valkey's rioConnsetWrite), not --engine "
        "{}: use --fanout event-loop for an event loop",
        name_of(o.send_engine)));
  if (o.fanout == FanoutShape::kEventLoop && o.send_engine == EngineKind::kBlocking)
    return fail(
        "--fanout event-loop waits for writable replicas: give --engine (or --send-engine) "
        "epoll or uring, not blocking");
  for (auto [on, flag] : {std::pair{o.tuning.zerocopy, "--zerocopy"},
                          {o.tuning.sqpoll, "--sqpoll"},
                          {o.tuning.fixed_buffers, "--fixed-buffers"}})
    if (on) return fail(fmt::format("{} is not used by the --fanout writer", flag));
  return {};
}

}  // namespace iobench
