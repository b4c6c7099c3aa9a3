#include "client/client_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "payload/spec.h"
#include "payload/window.h"
#include "report/report.h"

namespace iobench {
namespace {

// What each side runs, decided once: the client's own choice, and the server's as the HELLO
// names it.
struct Choices {
  SideChoice client;
  tls::TlsIo server_io;  // loopback's private server makes its TLS context with it
  std::string server_engine, server_tls_io, proto;
};

Choices choices_of(const ClientOptions& o) {
  const EngineKind client = o.client_engine(), server = o.server_engine();
  const tls::TlsIo client_io = tls::io_model_for(o.tls, client == EngineKind::kUring);
  const tls::TlsIo server_io = tls::io_model_for(o.tls, server == EngineKind::kUring);
  return {{client, client_io, o.client_cpu(), o.timeout_s, o.write_pattern, o.payload.seed},
          server_io,
          std::string(name_of(server)),
          std::string(name_of(server_io)),
          std::string(name_of(o.proto))};
}

// A run's connection `slot` as its server sees it; the run's group id is added when it is sent.
struct Slot {
  uint32_t conns = 1;          // the connections its server sees in this run
  uint32_t index = 0;          // its index among them
  uint64_t bytes = 0;          // its length (--bytes-spread)
  uint64_t payload_bytes = 0;  // a group's: the payload every connection's length is cut from
};

proto::Hello make_hello(const ClientOptions& o, const Choices& c, const BufPair& buf,
                        SyscallsMode syscalls, const Slot& slot) {
  proto::Hello hello;
  hello.client_sends = !o.reverse;
  hello.bytes = slot.bytes;
  hello.payload_bytes = slot.payload_bytes;
  hello.send_buf_bytes = buf.send_bytes;
  hello.recv_buf_bytes = buf.recv_bytes;
  hello.socket = o.socket;
  hello.decompress = o.decompress;
  hello.source_window = o.source_window;
  hello.seed = o.payload.seed;
  hello.zstd_level = o.payload.zstd_level;
  hello.proto = c.proto;
  hello.engine = c.server_engine;
  hello.timeout_s = o.timeout_s;
  hello.tls_io = c.server_tls_io;
  hello.tls_records = o.tls.records;
  hello.kernel_syscalls = syscalls != SyscallsMode::kOff;
  hello.tuning = o.tuning;
  hello.cpu = o.server_cpu();
  hello.auth = !o.auth_token.empty();
  hello.conns = slot.conns;
  hello.conn_index = slot.index;
  hello.adaptive = buf.adaptive;
  hello.fanout = o.fanout != FanoutShape::kOff;
  if (buf.adaptive) {
    hello.budget = o.budget;
    hello.buf_min = o.buf_min;
    hello.buf_max = o.buf_max;
  }
  return hello;
}

// Connection i's length: --bytes shortened by a seeded fraction of up to --bytes-spread.
std::vector<uint64_t> conn_lengths(const ClientOptions& o) {
  std::vector<uint64_t> out(o.conns, o.payload.bytes);
  if (o.bytes_spread <= 0) return out;
  std::mt19937_64 rng(o.payload.seed * 0x9e3779b97f4a7c15ull + o.conns);
  std::uniform_real_distribution<double> u(0, 1);
  for (uint64_t& n : out) {
    const auto cut = static_cast<uint64_t>(static_cast<double>(n) * o.bytes_spread * u(rng));
    n = std::max(n - cut, kMinBytes);
  }
  return out;
}

// A run's connections when it counts the kernel as `syscalls` says, each with its HELLO (this
// side's plan for it comes from that HELLO: plan_sides). A group's connection i reaches
// servers[i % k], and each server sees its share of the connections as a group of its own.
RunConns plan_conns(const ClientOptions& o, const Choices& c, const BufPair& buf,
                    SyscallsMode syscalls, size_t servers) {
  RunConns r;
  r.kernel_counts = syscalls != SyscallsMode::kOff;
  r.grouped = o.conns > 1 || buf.adaptive || o.fanout != FanoutShape::kOff;
  if (!r.grouped) {
    if (attaches_tool(syscalls)) r.tracer = tracer_tool_of(syscalls);
    ConnPlan lone;
    lone.hello = make_hello(o, c, buf, syscalls, {1, 0, o.payload.bytes, 0});
    r.conns.push_back(std::move(lone));
  } else {
    const auto k = static_cast<uint32_t>(std::max<size_t>(servers, 1));
    const std::vector<uint64_t> lengths = conn_lengths(o);
    r.conns.reserve(o.conns);
    for (uint32_t i = 0; i < o.conns; ++i) {
      ConnPlan conn;
      conn.server = i % k;
      conn.start_s = o.stagger_s * i;
      const Slot slot{(o.conns - i % k + k - 1) / k, i / k, lengths[i], o.payload.bytes};
      conn.hello = make_hello(o, c, buf, syscalls, slot);
      r.conns.push_back(std::move(conn));
    }
  }
  return r;
}

// This side's plan for each of a size's connections, from the HELLO its server decides from too.
void plan_sides(SizePlan& s, const SideChoice& client) {
  for (RunConns* runs : {&s.runs, s.counting ? &*s.counting : nullptr})
    if (runs)
      for (ConnPlan& conn : runs->conns) conn.side = plan_side(conn.hello, Side::kClient, client);
}

// "16K run 2/5", "1K warm-up 1/2", "64K counting run", with "size 2/3" when there are several.
std::string live_label(const ClientOptions& o, size_t size, const RunStep& s, int i) {
  const BufPair& buf = o.bufs[size];
  std::string label = buf_label(buf);
  if (s.counting)
    label += " counting run";
  else if (!s.measured)
    label += fmt::format(" warm-up {}/{}", i + 1, o.warmup);
  else
    label += fmt::format(" run {}/{}", s.index + 1, o.repeat);
  if (o.bufs.size() > 1) label += fmt::format(" (size {}/{})", size + 1, o.bufs.size());
  return label;
}

std::vector<RunStep> plan_steps(const ClientOptions& o, size_t size, bool counting_run) {
  const int steps = o.warmup + o.repeat + (counting_run ? 1 : 0);
  std::vector<RunStep> out(static_cast<size_t>(steps));
  for (int i = 0; i < steps; ++i) {
    RunStep& s = out[static_cast<size_t>(i)];
    s.counting = counting_run && i == steps - 1;
    s.measured = i >= o.warmup && !s.counting;
    s.index = s.counting ? -1 : i - o.warmup;
    s.name = s.counting   ? std::string("the counting run")
             : s.measured ? fmt::format("run {}", s.index)
                          : fmt::format("warm-up run {}", i);
    s.label = live_label(o, size, s, i);
  }
  return out;
}

// Loopback's private server: as the client's options ask, one connection at a time on its one
// thread unless --conns.
LoopbackPlan plan_loopback(const ClientOptions& o, const Choices& c) {
  LoopbackPlan l;
  ServerConfig& cfg = l.config;
  // --fanout: a writer blocked on one replica starves the others; they wait twice its send
  // timeout (as a replica's repl-timeout outlasts one stalled write), so the writer's timeout
  // decides which replica is dropped.
  cfg.options.idle_timeout_s = o.fanout == FanoutShape::kOff ? o.timeout_s : 2 * o.timeout_s;
  cfg.local_payload = o.payload;
  // Private to this run's client: its own bounds, not a shared host's.
  cfg.options.max_bytes = kMaxBytes;
  cfg.options.memory_budget = UINT64_MAX;
  cfg.options.session_memory = UINT64_MAX;
  cfg.options.min_rate = 0;
  cfg.options.max_session_time_s = 0;  // no watchdog thread: the serial server stays one thread
  cfg.options.allow_sqpoll = true;     // its own client's choice, on its own cores
  cfg.options.max_decode_ratio = 0;    // its own client's payload, however compressible
  cfg.log = o.verbose;
  cfg.options.max_conns = std::max(cfg.options.max_conns, o.conns);
  // One connection at a time (each run, the counting run): served on the server's one thread.
  cfg.serial = o.conns == 1;
  cfg.kernel_counters = o.syscalls != SyscallsMode::kOff;
  if (o.proto == Proto::kTls) {
    l.tls.emplace();
    l.tls->ktls = o.tls.ktls == tls::Ktls::kOff ? tls::Ktls::kOff : tls::Ktls::kAuto;
    l.tls->io = c.server_io;
  }
  return l;
}

}  // namespace

ClientPlan plan_client(const ClientOptions& o) {
  ClientPlan p;
  const bool loopback = o.connect.empty();
  const Choices c = choices_of(o);
  if (loopback)
    p.loopback = plan_loopback(o, c);
  else
    p.servers = o.servers;
  p.access = {o.timeout_s, o.hello_timeout_s, o.build_timeout_s, o.auth_token, o.quiet};
  if (o.proto == Proto::kTls) {
    p.tls = o.tls;
    p.tls->io = c.client.tls_io;
  }
  p.group = {!o.reverse,  {o.budget, o.buf_min, o.buf_max}, o.fanout, o.send_engine,
             o.source_rate, o.stagger_s > 0};
  // --syscalls auto: the kernel counts in one run of its own per size, after the measured runs,
  // and the measured runs count nothing: no program on sys_enter while their CPU is measured (it
  // taxes every syscall of the machine). A forced counter counts in every measured run.
  p.counting_run = o.syscalls == SyscallsMode::kAuto;
  const SyscallsMode measured = p.counting_run ? SyscallsMode::kOff : o.syscalls;
  // A group's connections reach every server given (loopback: its one); a lone connection the
  // first.
  const size_t group_servers = o.servers.size() > 1 ? o.servers.size() : 1;
  for (size_t i = 0; i < o.bufs.size(); ++i) {
    SizePlan s;
    s.buf = o.bufs[i];
    s.steps = plan_steps(o, i, p.counting_run);
    s.runs = plan_conns(o, c, s.buf, measured, group_servers);
    if (p.counting_run) s.counting = plan_conns(o, c, s.buf, o.syscalls, group_servers);
    plan_sides(s, c.client);
    p.sizes.push_back(std::move(s));
  }
  p.repeat_auto = o.repeat_auto;
  p.time_s = o.time_s;
  p.target_ci = o.target_ci;
  p.last_measured_step = o.warmup + o.repeat - 1;
  p.run_bytes = o.payload.bytes * o.conns;
  // What the door does before the runs. The counter kind is set before the loopback fork, so the
  // private server counts with the same backend (off, strace and perf name no counter: auto).
  p.counter = counter_kind_of(o.syscalls);
  // The payload is loaded before any connection, so generation is never inside a measurement:
  // the run's, or with --source-window the window's bytes. Under --reverse the server sends; on
  // loopback it is still built here, so the forked server finds it in its cache and never builds
  // it inside its measured session.
  p.payload.sent_here = !o.reverse;
  if (!o.reverse || loopback) {
    p.payload.load = o.payload;
    p.payload.load->bytes = window_payload_bytes(o.payload.bytes, o.source_window);
  }
  p.report = {o, o.json_path, o.csv_path, o.quiet, loopback ? describe_payload(o.payload) : ""};
  return p;
}

}  // namespace iobench
