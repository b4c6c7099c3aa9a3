// The validated configuration of one iobench invocation: what cli/ fills and every layer reads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "engine/tuning.h"
#include "net/address.h"
#include "net/socket.h"
#include "net/stream.h"
#include "payload/spec.h"
#include "payload/window.h"
#include "probe/syscall_counter.h"
#include "probe/tracer.h"
#include "proto/messages.h"
#include "tls/options.h"
#include "util/result.h"

namespace iobench {

inline constexpr uint16_t kDefaultPort = 5210;

// One buffer-size pair of a run list: `--buf 1k,16k` gives two.
struct BufPair {
  uint64_t send_bytes = 16 * kKiB;
  uint64_t recv_bytes = 16 * kKiB;
  // `--buf adaptive`: both sides follow the live count within ClientOptions' budget/min/max;
  // send_bytes/recv_bytes then hold --buf-max (the size a lone connection starts from).
  bool adaptive = false;
};

// --syscalls: who counts the data phase's syscalls. The kernel's counters (auto: eBPF, else perf
// tracepoints; bpf; tracepoints; taskio: the free read/write counts), nobody, or a tool attached
// to each side for every session (strace, perf).
enum class SyscallsMode { kAuto, kBpf, kTracepoints, kTaskIo, kOff, kStrace, kPerf };
template <>
struct Names<SyscallsMode> {
  static constexpr std::array table{
      std::pair{SyscallsMode::kAuto, std::string_view{"auto"}},
      std::pair{SyscallsMode::kBpf, std::string_view{"bpf"}},
      std::pair{SyscallsMode::kTracepoints, std::string_view{"tracepoints"}},
      std::pair{SyscallsMode::kTaskIo, std::string_view{"taskio"}},
      std::pair{SyscallsMode::kOff, std::string_view{"off"}},
      std::pair{SyscallsMode::kStrace, std::string_view{"strace"}},
      std::pair{SyscallsMode::kPerf, std::string_view{"perf"}}};
};
inline bool attaches_tool(SyscallsMode m) {
  return m == SyscallsMode::kStrace || m == SyscallsMode::kPerf;
}
// The tool a mode that attaches_tool attaches.
inline TracerTool tracer_tool_of(SyscallsMode m) {
  return m == SyscallsMode::kPerf ? TracerTool::kPerf : TracerTool::kStrace;
}
// The kernel counter a mode opens (kAuto for the modes that open none of their own).
inline CounterKind counter_kind_of(SyscallsMode m) {
  switch (m) {
    case SyscallsMode::kBpf:
      return CounterKind::kBpf;
    case SyscallsMode::kTracepoints:
      return CounterKind::kTracepoints;
    case SyscallsMode::kTaskIo:
      return CounterKind::kTaskIo;
    default:
      return CounterKind::kAuto;
  }
}

// --fanout: one writer thread streams the payload to every connection (a primary's full sync to
// N replicas), in one of the two shapes real primaries use (docs/fanout.md).
enum class FanoutShape { kOff, kConnset, kEventLoop };
template <>
struct Names<FanoutShape> {
  static constexpr std::array table{
      std::pair{FanoutShape::kOff, std::string_view{"off"}},
      std::pair{FanoutShape::kConnset, std::string_view{"connset"}},
      std::pair{FanoutShape::kEventLoop, std::string_view{"event-loop"}}};
};

// A token shorter than this is refused unless --allow-short-token: an AUTH proof a fake server
// collects can be tried against every short token offline (`openssl rand -hex 32` makes one).
inline constexpr size_t kMinTokenBytes = 16;
inline constexpr Field kAllowShortTokenField{
    .name = "allow_short_token",
    .flag = "--allow-short-token",
    .help = "Accept an --auth-token shorter than 16 bytes (a fake server could guess it offline "
            "from one proof)",
    .unreported = true};

struct ClientOptions {
  Proto proto = Proto::kTcp;
  EngineKind engine = EngineKind::kBlocking;
  EngineKind send_engine = engine, recv_engine = engine;  // per side; --engine unless given
  // This process's engine and the server's, by direction.
  EngineKind client_engine() const { return reverse ? recv_engine : send_engine; }
  EngineKind server_engine() const { return reverse ? send_engine : recv_engine; }
  std::vector<BufPair> bufs;  // filled by the parser: one entry per run size
  PayloadSpec payload;
  SocketOptions socket;  // --sndbuf, --rcvbuf, --no-nodelay: both sides' data sockets
  bool reverse = false;
  bool decompress = false;
  int repeat = 1;  // with repeat_auto: the most measured runs (--max-repeat)
  // --repeat auto: measured runs until each side's CPU per GiB is known to within target_ci
  // (the 95% bootstrap interval of the median, half-width over the median), from 5 runs on.
  bool repeat_auto = false;
  double target_ci = 0.02;
  static constexpr int kAutoMinRuns = 5;
  int warmup = 0;
  // -t: each size's measured runs repeated until their data phases add up to this long (0: the
  // --repeat count); at least kTimeMinRuns runs.
  double time_s = 0;
  static constexpr int kTimeMinRuns = 3;
  std::string json_path;  // "-" is stdout
  std::string csv_path;
  bool quiet = false;
  bool verbose = false;
  std::string connect;  // empty: loopback with a private server
  // --connect parsed (validate_client): one server, or several that connection i of a group
  // reaches as servers[i % size]. Empty in loopback.
  std::vector<HostPort> servers;
  double timeout_s = 30;
  double hello_timeout_s = 10;  // from connecting to the server's first answer (ACK or PROGRESS)
  // From the HELLO to the ACK, however often the server reports its build (PROGRESS).
  double build_timeout_s = 300;
  tls::TlsOptions tls;          // used with proto "tls"
  SyscallsMode syscalls = SyscallsMode::kAuto;
  EngineTuning tuning;  // both sides' engines: trigger mode, queue depth, zero-copy, ...
  // --cpus: the CPU each side's data phase runs on (-1: wherever the scheduler puts it).
  int sender_cpu = -1;
  int receiver_cpu = -1;
  int client_cpu() const { return reverse ? receiver_cpu : sender_cpu; }
  int server_cpu() const { return reverse ? sender_cpu : receiver_cpu; }
  std::string auth_token;           // proven in AUTH; --auth-token or $IOBENCH_AUTH_TOKEN
  bool allow_short_token = false;   // a token under kMinTokenBytes accepted all the same
  uint32_t conns = 1;               // connections at once, each streaming `payload.bytes`
  double stagger_s = 0;             // connection i starts i * stagger after the first
  double bytes_spread = 0;          // connection lengths spread down by up to this fraction
  uint64_t budget = 256 * kKiB;     // --buf adaptive: buffer memory per side over all connections
  uint64_t buf_min = 4 * kKiB;
  uint64_t buf_max = 64 * kKiB;
  // --write-pattern: the client's writes follow this (engine/write_pattern.h) instead of one size.
  std::string write_pattern;
  FanoutShape fanout = FanoutShape::kOff;  // --fanout: the client is a primary, --conns replicas
  // --source-rate: the fan-out writer's source produces at most this many bytes per second (0:
  // unbounded), so a run is producer-bound as a real full sync is (a fork serialising the RDB).
  uint64_t source_rate = 0;
  // --source-window: the sender streams a payload of this many bytes over and over (0:
  // the whole payload once), a hot source as a primary's socket writer has (payload/window.h).
  uint64_t source_window = 0;
  bool group() const {
    return conns > 1 || fanout != FanoutShape::kOff ||
           std::any_of(bufs.begin(), bufs.end(), [](auto& b) { return b.adaptive; });
  }
};

// The client's own options, described once (the flag, help and bounds; the JSON options block
// and the CSV's "run." columns, but for the unreported: where the run and its report go). The
// options that are lists or words (--buf, --cpus, --repeat) are text fields of cli/'s RawClient.
template <typename Self, typename Visit>
  requires DescribesAs<Self, ClientOptions>
void describe(Self& o, Visit&& visit) {
  visit(Field{.name = "proto", .flag = "--proto", .help = "Transport: tcp (default) or tls"},
        o.proto);
  visit(Field{.name = "engine",
              .flag = "--engine",
              .help = "I/O engine: blocking (default), epoll or uring"},
        o.engine);
  visit(Field{.name = "send_engine",
              .flag = "--send-engine",
              .help = "The sender's engine, overriding --engine"},
        o.send_engine);
  visit(Field{.name = "recv_engine",
              .flag = "--recv-engine",
              .help = "The receiver's engine, overriding --engine"},
        o.recv_engine);
  visit(Field{.name = "reverse",
              .flag = "--reverse",
              .help = "Server sends, client receives",
              .short_flag = "-R"},
        o.reverse);
  visit(Field{.name = "decompress",
              .flag = "--decompress",
              .help = "Receiver decodes the zstd stream as it arrives"},
        o.decompress);
  visit(Field{.name = "time_s",
              .flag = "--time",
              .help = "A run sized by time: each size's runs of --bytes repeated until their "
                      "data phases add up to this long (at least 3 runs; e.g. -t 10s); not with "
                      "--repeat",
              .short_flag = "-t",
              .real_min = 0,
              .real_max = 86400,
              .duration = true},
        o.time_s);
  visit(Field{.name = "warmup",
              .flag = "--warmup",
              .help = "Unreported runs before the measured ones (default 0)",
              .min = 0,
              .max = 100000},
        o.warmup);
  visit(Field{.name = "timeout_s",
              .flag = "--timeout",
              .help = "Seconds without progress before giving up (default 30)",
              .real_min = 0,
              .real_max = 3600,
              .above_min = true,
              .value_name = "SECONDS"},
        o.timeout_s);
  visit(Field{.name = "hello_timeout_s",
              .flag = "--hello-timeout",
              .help = "Seconds the server has to answer the HELLO, TLS handshake included "
                      "(default 10)",
              .real_min = 0,
              .real_max = 3600,
              .above_min = true,
              .value_name = "SECONDS"},
        o.hello_timeout_s);
  visit(Field{.name = "build_timeout_s",
              .flag = "--build-timeout",
              .help = "Seconds from the HELLO to the server's ACK while it builds the payload, "
                      "however often it reports progress (default 300)",
              .real_min = 0,
              .real_max = 86400,
              .above_min = true,
              .value_name = "SECONDS"},
        o.build_timeout_s);
  visit(Field{.name = "conns",
              .flag = "--conns",
              .help = "Connections at once, each streaming --bytes (default 1)",
              .min = 1,
              .max = kMaxConns},
        o.conns);
  visit(Field{.name = "stagger_s",
              .flag = "--stagger",
              .help = "Start connection i at i x this (e.g. 50ms)",
              .real_min = 0,
              .real_max = 60,
              .duration = true},
        o.stagger_s);
  visit(Field{.name = "bytes_spread",
              .flag = "--bytes-spread",
              .help = "Shorten each connection by a seeded random fraction up to this (0..0.9)",
              .real_min = 0,
              .real_max = 0.9,
              .value_name = "FRACTION"},
        o.bytes_spread);
  visit(Field{.name = "write_pattern",
              .flag = "--write-pattern",
              .help = "The client's writes follow a pattern, e.g. 16384+tail:1-17, 16384,836 or "
                      "@watch.json (an `iobench watch --json` report): a real primary's writes",
              .zero_is_unset = true,
              .value_name = "PATTERN"},
        o.write_pattern);
  visit(Field{.name = "fanout",
              .flag = "--fanout",
              .help = "One writer thread streams to all --conns replicas, as a primary's full "
                      "sync: connset (blocking, each chunk to each in turn) or event-loop (epoll "
                      "or uring, the slowest paces all); off (default)"},
        o.fanout);
  visit(Field{.name = "source_rate_bytes_per_s",
              .flag = "--source-rate",
              .help = "--fanout: the writer's source produces at most this per second (e.g. "
                      "90M), as a fork serialising the dataset does",
              .min = int64_t{kMiB},
              .max = int64_t{1024} * kGiB,
              .size = true,
              .zero_is_unset = true},
        o.source_rate);
  visit(Field{.name = "source_window_bytes",
              .flag = "--source-window",
              .help = "The sender streams a payload of SIZE bytes over and over, from the "
                      "cache as a primary's socket writer sends from the buffer it just filled "
                      "(a multiple of 4K; default: the whole payload once)",
              .min = kMinWindow,
              .max = kMaxWindow,
              .size = true,
              .zero_is_unset = true},
        o.source_window);
  visit(Field{.name = "budget_bytes",
              .flag = "--budget",
              .help = "--buf adaptive: buffer memory per side, all connections (default 256K)",
              .min = kMinBuf,
              .max = kGiB,
              .size = true},
        o.budget);
  visit(Field{.name = "buf_min_bytes",
              .flag = "--buf-min",
              .help = "--buf adaptive: smallest buffer (default 4K; with --fanout the chunk the "
                      "writer starts from with one replica: 16K, one record, on TLS; --buf-max "
                      "on TCP)",
              .min = kMinBuf,
              .max = kMaxBuf,
              .size = true},
        o.buf_min);
  visit(Field{.name = "buf_max_bytes",
              .flag = "--buf-max",
              .help = "--buf adaptive: largest buffer (default 64K; TLS: 16K, one record, "
                      "for independent connections and a --fanout writer alike)",
              .min = kMinBuf,
              .max = kMaxBuf,
              .size = true},
        o.buf_max);
  visit(Field{.name = "syscalls",
              .flag = "--syscalls",
              .help = "Syscall counting: auto (the kernel's counters where allowed: eBPF, else "
                      "perf tracepoints), bpf, tracepoints, taskio (the kernel's free read/write "
                      "counts only), off, strace or perf (also attach the tool to each side for "
                      "every session)"},
        o.syscalls);
  // Where the run goes and where its report goes: in no report themselves.
  visit(Field{.name = "connect",
              .flag = "--connect",
              .help = "Server address HOST:PORT, or several (HOST:PORT,HOST:PORT: connection i "
                      "reaches server i mod N)",
              .short_flag = "-c",
              .unreported = true,
              .required = true,
              .only_in = "client",
              .value_name = "HOST:PORT,..."},
        o.connect);
  visit(Field{.name = "auth_token",
              .flag = "--auth-token",
              .help = "Shared token the server requires, or @FILE to read it from FILE's first "
                      "line (default: $IOBENCH_AUTH_TOKEN, which may be @FILE too)",
              .unreported = true,
              .value_name = "TOKEN"},
        o.auth_token);
  visit(kAllowShortTokenField, o.allow_short_token);
  visit(Field{.name = "json",
              .flag = "--json",
              .help = "Write the JSON report to FILE ('-' = stdout)",
              .unreported = true,
              .value_name = "FILE"},
        o.json_path);
  visit(Field{.name = "csv",
              .flag = "--csv",
              .help = "Write CSV rows to FILE ('-' = stdout)",
              .unreported = true,
              .value_name = "FILE"},
        o.csv_path);
  visit(Field{.name = "quiet",
              .flag = "--quiet",
              .help = "Print no table",
              .short_flag = "-q",
              .unreported = true},
        o.quiet);
  visit(Field{.name = "verbose",
              .flag = "--verbose",
              .help = "The context lines too: sockets, placement, syscall counters, segments, "
                      "regime, softirqs, TLS cost, each process's CPU; on loopback the server's "
                      "log lines",
              .short_flag = "-v",
              .unreported = true},
        o.verbose);
}

// The --help group of the TLS options (refused without --proto tls).
inline constexpr const char* kTlsGroup = "TLS (with --proto tls)";

// The client's described option blocks: each field's flag, help, bounds and (through the HELLO)
// the server's check come from its block's field list; the parser, the --help group, the JSON
// options block and the CSV walk this one list. A new block is one line here.
template <typename Options, typename Visit>
  requires DescribesAs<Options, ClientOptions>
void for_each_option_block(Options& o, Visit&& visit) {
  visit("run", "Run", o);
  visit("payload", "Payload", o.payload);
  visit("tuning", "Engines", o.tuning);
  visit("socket", "Transport", o.socket);
  visit("tls", kTlsGroup, o.tls);
}

struct PayloadCommand {
  PayloadSpec payload;
  std::string out;  // the stream to this file; or one of:
  bool list = false;   // the cache's payloads, most recently used first
  bool clear = false;  // remove every cached payload
  bool quiet = false;  // no progress line while the payload is built
};

// `iobench payload`'s own options (its payload's are PayloadSpec's).
template <typename Self, typename Visit>
  requires DescribesAs<Self, PayloadCommand>
void describe(Self& c, Visit&& visit) {
  visit(Field{.name = "out",
              .flag = "--out",
              .help = "Write the payload to this file",
              .short_flag = "-o",
              .value_name = "FILE"},
        c.out);
  visit(Field{.name = "list",
              .flag = "--list",
              .help = "List the cached payloads, most recently used first"},
        c.list);
  visit(Field{.name = "clear", .flag = "--clear", .help = "Remove every cached payload"}, c.clear);
  visit(Field{.name = "quiet",
              .flag = "--quiet",
              .help = "No progress line while the payload is built",
              .short_flag = "-q"},
        c.quiet);
}

struct DoctorCommand {};

// `iobench watch --pid PID...` (watch/watch_command.cc).
struct WatchCommand {
  std::vector<pid_t> pids;  // the processes watched, with every child they fork meanwhile
  double duration_s = 0;    // 0: until Ctrl-C, --until-exit or every watched process exits
  pid_t until_exit = 0;     // end when this process exits
  double interval_s = 0.1;  // /proc sampled this often (CPU, descriptor kinds)
  bool event_loop = false;  // also time each event-loop iteration and each large write
  uint64_t large_write = 1024;  // --event-loop: a write moving at least this many bytes
  std::string json_path, csv_path;
  bool quiet = false;
};

template <typename Self, typename Visit>
  requires DescribesAs<Self, WatchCommand>
void describe(Self& c, Visit&& visit) {
  visit(Field{.name = "pids",
              .flag = "--pid",
              .help = "A process to watch, with every child it forks (repeatable)",
              .short_flag = "-p",
              .required = true,
              .value_name = "PID"},
        c.pids);
  visit(Field{.name = "duration_s",
              .flag = "--duration",
              .help = "End after this long (e.g. 30s); default: until Ctrl-C",
              .short_flag = "-d",
              .real_min = 0,
              .real_max = 7 * 86400.0,
              .duration = true},
        c.duration_s);
  visit(Field{.name = "until_exit",
              .flag = "--until-exit",
              .help = "End when this process exits",
              .value_name = "PID"},
        c.until_exit);
  visit(Field{.name = "interval_s",
              .flag = "--interval",
              .help = "Sample /proc (CPU, descriptor kinds) this often (default 100ms)",
              .real_min = 0.01,
              .real_max = 10,
              .duration = true},
        c.interval_s);
  visit(Field{.name = "event_loop",
              .flag = "--event-loop",
              .help = "Also time every event-loop iteration (epoll wait to epoll wait) and "
                      "every large write, as histograms in microseconds"},
        c.event_loop);
  visit(Field{.name = "large_write",
              .flag = "--large-write",
              .help = "With --event-loop: a write of at least this many bytes is a large one "
                      "and marks its iteration (default 1K)",
              .min = 1,
              .max = int64_t{1} << 30,
              .size = true},
        c.large_write);
  visit(Field{.name = "json",
              .flag = "--json",
              .help = "Also write the report as JSON (-: stdout)",
              .value_name = "FILE"},
        c.json_path);
  visit(Field{.name = "csv",
              .flag = "--csv",
              .help = "Also write the report as CSV (-: stdout)",
              .value_name = "FILE"},
        c.csv_path);
  visit(Field{.name = "quiet",
              .flag = "--quiet",
              .help = "No table and no start line",
              .short_flag = "-q"},
        c.quiet);
}

// `iobench compare BASE NEW` (report/compare.h).
struct CompareCommand {
  std::string base, next;  // FILE or FILE#SIZE (a size's label: 16K, 64K, adaptive)
  std::string json_path;   // also write the comparison as JSON ("-": stdout)
  double alpha = 0.05;     // the test's significance level
};

template <typename Self, typename Visit>
  requires DescribesAs<Self, CompareCommand>
void describe(Self& c, Visit&& visit) {
  visit(Field{.name = "base", .flag = "BASE", .help = "Results JSON, or FILE#SIZE", .required = true},
        c.base);
  visit(Field{.name = "new", .flag = "NEW", .help = "Results JSON, or FILE#SIZE", .required = true},
        c.next);
  visit(Field{.name = "json",
              .flag = "--json",
              .help = "Also write the comparison as JSON (-: stdout)",
              .value_name = "FILE"},
        c.json_path);
  visit(Field{.name = "alpha",
              .flag = "--alpha",
              .help = "Significance level of the Mann-Whitney U test (default 0.05)",
              .real_min = 0,
              .real_max = 0.5,
              .above_min = true,
              .value_name = "P"},
        c.alpha);
}

}  // namespace iobench
