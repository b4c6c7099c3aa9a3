#include "cli/options.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <optional>

#include "adaptive/policy.h"
#include "cli/engine_options.h"
#include "cli/hints.h"
#include "cli/size.h"
#include "proto/fields.h"
#include "probe/syscall_counter.h"

namespace iobench {
namespace {

// Raw strings as typed; sizes are parsed by our own parser so errors name the value and range.
struct RawClient {
  std::string buf, send_buf, recv_buf, bytes = "100MiB", sndbuf, rcvbuf;
  std::string stagger, budget, buf_min, buf_max;
  bool no_nodelay = false;
  std::string max_fragment;
  std::string cpus;
  std::vector<CLI::Option*> tls_options;
  CLI::Option* queue_depth = nullptr;
  CLI::Option* auth_token = nullptr;
  CLI::Option* verbose = nullptr;
};

// CLI11 reads "-1" into an unsigned option as 2^64-1: refuse a sign instead.
CLI::Option* unsigned_option(CLI::Option* opt) {
  return opt->check(CLI::Validator(
      [](const std::string& v) -> std::string {
        if (v.find('-') == std::string::npos) return {};
        return fmt::format("'{}' is negative (expected 0 or more)", v);
      },
      "", "not negative"));
}

// One option per field of a described struct that has a flag: a flag for a bool, else a value.
template <Described T>
void add_described(CLI::App& app, T& s) {
  describe(s, [&](const Field& f, auto& v) {
    using V = std::decay_t<decltype(v)>;
    if (f.flag.empty()) return;
    if constexpr (std::is_same_v<V, bool>) {
      app.add_flag(std::string(f.flag), v, std::string(f.help));
    } else if constexpr (std::is_unsigned_v<V>) {
      unsigned_option(app.add_option(std::string(f.flag), v, std::string(f.help)));
    } else if constexpr (!Described<V>) {
      app.add_option(std::string(f.flag), v, std::string(f.help));
    }
  });
}

void add_payload_options(CLI::App& app, PayloadSpec& p, std::string& bytes) {
  app.add_option("--bytes,-n", bytes, "Payload bytes to stream (default 100MiB; 100M, 1GiB, ...)");
  unsigned_option(
      app.add_option("--seed", p.seed, "Seed of the replication-stream generator (default 1)"));
  app.add_option("--zstd-level", p.zstd_level, "zstd level of the payload (default 3)");
  app.add_option("--payload", p.file, "Stream this file (zstd-compressed, cached) instead");
  app.add_option("--cache-dir", p.cache_dir, "Payload cache (default ~/.cache/iobench)");
}

void add_client_options(CLI::App& app, ClientOptions& o, RawClient& raw) {
  app.add_option("--proto", o.proto, "Transport: tcp (default) or tls");
  app.add_option("--engine", o.engine, "I/O engine: blocking (default), epoll or uring");
  app.add_option("--send-engine", o.send_engine, "The sender's engine, overriding --engine");
  app.add_option("--recv-engine", o.recv_engine, "The receiver's engine, overriding --engine");
  add_described(app, o.tuning);
  app.add_option("--cpus", raw.cpus,
                 "Pin the data phase: SENDER[,RECEIVER] CPU numbers (one: both sides on it)");
  app.add_option("--buf,-b", raw.buf,
                 "Buffer size(s) for both sides, e.g. 16k or 1k,4k,16k; 'adaptive' follows the "
                 "live connection count (--budget)");
  unsigned_option(app.add_option("--conns", o.conns,
                                 "Connections at once, each streaming --bytes (default 1)"));
  raw.auth_token = app.add_option("--auth-token", o.auth_token,
                                  "Shared token the server requires (default: $IOBENCH_AUTH_TOKEN)");
  app.add_option("--stagger", raw.stagger, "Start connection i at i x this (e.g. 50ms)");
  raw.queue_depth = app.get_option("--qd");
  app.add_option("--bytes-spread", o.bytes_spread,
                 "Shorten each connection by a seeded random fraction up to this (0..0.9)");
  app.add_option("--budget", raw.budget,
                 "--buf adaptive: buffer memory per side, all connections (default 256K)");
  app.add_option("--buf-min", raw.buf_min, "--buf adaptive: smallest buffer (default 4K)");
  app.add_option("--buf-max", raw.buf_max, "--buf adaptive: largest buffer (default 64K)");
  app.add_option("--send-buf", raw.send_buf, "Sender buffer size(s), overrides --buf");
  app.add_option("--recv-buf", raw.recv_buf, "Receiver buffer size(s), overrides --buf");
  add_payload_options(app, o.payload, raw.bytes);
  app.add_option("--sndbuf", raw.sndbuf, "SO_SNDBUF to request on both sockets (default: kernel)");
  app.add_option("--rcvbuf", raw.rcvbuf, "SO_RCVBUF to request on both sockets (default: kernel)");
  app.add_flag("--no-nodelay", raw.no_nodelay, "Leave Nagle on (TCP_NODELAY is set by default)");
  app.add_flag("--reverse,-R", o.reverse, "Server sends, client receives");
  app.add_flag("--decompress", o.decompress, "Receiver decodes the zstd stream as it arrives");
  app.add_option("--repeat", o.repeat, "Measured runs per buffer size (default 1)");
  app.add_option("--warmup", o.warmup, "Unreported runs before the measured ones (default 0)");
  app.add_option("--json", o.json_path, "Write the JSON report to FILE ('-' = stdout)");
  app.add_option("--csv", o.csv_path, "Write CSV rows to FILE ('-' = stdout)");
  app.add_flag("--quiet,-q", o.quiet, "Print no table");
  raw.verbose = app.add_flag("--verbose", o.verbose, "Log server lines too (loopback)");
  app.add_option("--timeout", o.timeout_s,
                 "Seconds without progress before giving up (default 30)");
  app.add_option("--hello-timeout", o.hello_timeout_s,
                 "Seconds the server has to answer the HELLO, TLS handshake included (default 10)");
  app.add_option("--syscalls", o.syscalls,
                 "Syscall counting: auto (the kernel's counters where allowed: eBPF, else perf "
                 "tracepoints), bpf, tracepoints, taskio (the kernel's free read/write counts "
                 "only), off, strace or perf (also attach the tool to each side for every "
                 "session)");
  auto& t = raw.tls_options;
  t.push_back(app.add_option("--tls-io", o.tls.io,
                             "auto (default: bio for uring, socket otherwise), socket (OpenSSL on "
                             "the fd) or bio (memory BIOs)"));
  t.push_back(app.add_option("--tls-version", o.tls.version, "1.2 or 1.3 (default)"));
  t.push_back(app.add_option("--cipher", o.tls.cipher,
                             "AES-128-GCM (default), AES-256-GCM, CHACHA20-POLY1305"));
  t.push_back(app.add_flag("--tls-read-ahead", o.tls.read_ahead,
                           "Let OpenSSL read ahead (fewer read calls)"));
  t.push_back(app.add_option("--tls-max-fragment", raw.max_fragment,
                             "Largest record sent, 512..16384 (default 16384)"));
  t.push_back(app.add_option("--ktls", o.tls.ktls, "Kernel TLS: auto (default), on, off"));
  t.push_back(app.add_option("--tls-ca", o.tls.ca_file,
                             "CA file to verify the server (default: system CAs)"));
  t.push_back(app.add_flag("--tls-insecure", o.tls.insecure,
                           "Do not verify the server (the report says so)"));
  t.push_back(
      app.add_option("--tls-server-name", o.tls.server_name, "Name to verify (default: the host)"));
  for (CLI::Option* opt : t) opt->group("TLS (with --proto tls)");
}

Result<std::vector<uint64_t>> optional_list(const std::string& text, std::string_view what) {
  if (text.empty()) return std::vector<uint64_t>{};
  return parse_size_list(text, what, kMinBuf, kMaxBuf);
}

// --buf with 'adaptive' entries: one size per position (0 where adaptive), and which were.
Result<std::vector<uint64_t>> buf_list(const std::string& text, std::vector<bool>& adaptive) {
  std::vector<uint64_t> out;
  if (text.empty()) return out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    adaptive.push_back(item == "adaptive");
    if (item == "adaptive") {
      out.push_back(0);
    } else {
      auto v = parse_size(item, "--buf", kMinBuf, kMaxBuf);
      if (!v) return std::unexpected(v.error());
      out.push_back(*v);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
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
  if (o.group() && (o.syscalls == "strace" || o.syscalls == "perf"))
    return fail(
        fmt::format("--syscalls {} attaches per session: use it without --conns and "
                    "--buf adaptive (kernel counters cover those runs)",
                    o.syscalls));
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
  if (auto st = validate_limits({o.budget, o.buf_min, o.buf_max}, o.conns); !st) return st;
  for (BufPair& b : o.bufs)
    if (b.adaptive) b.send_bytes = b.recv_bytes = o.buf_max;
  return {};
}

Status validate_payload(PayloadSpec& p, const std::string& bytes) {
  auto b = parse_size(bytes, "--bytes", kMinBytes, kMaxBytes);
  if (!b) return std::unexpected(b.error());
  p.bytes = *b;
  if (p.zstd_level < 1 || p.zstd_level > 19)
    return fail(fmt::format("invalid --zstd-level '{}': expected 1..19", p.zstd_level));
  return {};
}

// --auth-token, else the environment; bounded so it fits a HELLO field.
Status resolve_token(std::string& token) {
  if (token.empty())
    if (const char* env = std::getenv("IOBENCH_AUTH_TOKEN")) token = env;
  if (token.size() > 256)
    return fail(fmt::format("--auth-token of {} bytes: at most 256", token.size()));
  return {};
}

Status validate_client(ClientOptions& o, const RawClient& raw) {
  if (auto st = resolve_token(o.auth_token); !st) return st;
  if (o.proto != "tcp" && o.proto != "tls")
    return fail(fmt::format("invalid --proto '{}': expected tcp or tls", o.proto));
  if (!raw.max_fragment.empty()) {
    auto v = parse_size(raw.max_fragment, "--tls-max-fragment", 512, 16384);
    if (!v) return std::unexpected(v.error());
    o.tls.max_fragment = *v;
  }
  if (auto st = tls::validate(o.tls); !st) return st;
  if (o.proto == "tcp") {
    for (const CLI::Option* opt : raw.tls_options) {
      if (opt->count() > 0) return fail(fmt::format("{} needs --proto tls", opt->get_name()));
    }
  }
  if (!counter_kind_from(o.syscalls) && o.syscalls != "off" && o.syscalls != "strace" &&
      o.syscalls != "perf")
    return fail(fmt::format(
        "invalid --syscalls '{}': expected auto, bpf, tracepoints, taskio, off, strace or perf",
        o.syscalls));
  if (auto st = validate_engines(o); !st) return st;
  if (auto st = parse_cpus(raw.cpus, o); !st) return st;
  std::vector<bool> adaptive;
  auto both = buf_list(raw.buf, adaptive);
  if (!both) return std::unexpected(both.error());
  const bool any_adaptive = std::find(adaptive.begin(), adaptive.end(), true) != adaptive.end();
  auto send = optional_list(raw.send_buf, "--send-buf");
  if (!send) return std::unexpected(send.error());
  auto recv = optional_list(raw.recv_buf, "--recv-buf");
  if (!recv) return std::unexpected(recv.error());
  if (any_adaptive && (!send->empty() || !recv->empty()))
    return fail("--buf adaptive sizes both sides: drop --send-buf/--recv-buf");
  size_t runs = std::max({both->size(), send->size(), recv->size(), size_t{1}});
  for (auto [list, name] :
       {std::pair{&*both, "--buf"}, {&*send, "--send-buf"}, {&*recv, "--recv-buf"}}) {
    if (list->size() > 1 && list->size() != runs)
      return fail(fmt::format("{} has {} sizes but another list has {}: lists must match", name,
                              list->size(), runs));
  }
  auto pick = [&](const std::vector<uint64_t>& own, size_t i) -> uint64_t {
    const auto& l = own.empty() ? *both : own;
    if (l.empty()) return 16 * kKiB;
    return l.size() == 1 ? l[0] : l[i];
  };
  o.bufs.clear();
  for (size_t i = 0; i < runs; ++i)
    o.bufs.push_back({pick(*send, i), pick(*recv, i), adaptive.empty() ? false : adaptive[i]});
  if (auto st = validate_conns(o, raw); !st) return st;
  if (auto st = refuse_no_effect(o, {.queue_depth = raw.queue_depth->count() > 0,
                                     .auth_token = raw.auth_token->count() > 0,
                                     .stagger = !raw.stagger.empty(),
                                     .verbose = raw.verbose->count() > 0});
      !st)
    return st;

  if (auto s = validate_payload(o.payload, raw.bytes); !s) return s;
  o.nodelay = !raw.no_nodelay;
  for (auto [text, field, name] :
       {std::tuple{&raw.sndbuf, &o.sndbuf, "--sndbuf"}, {&raw.rcvbuf, &o.rcvbuf, "--rcvbuf"}}) {
    if (text->empty()) continue;
    auto v = parse_size(*text, name, 1 * kKiB, 1 * kGiB);
    if (!v) return std::unexpected(v.error());
    *field = *v;
  }
  if (o.repeat < 1 || o.repeat > 100000)
    return fail(fmt::format("invalid --repeat '{}': expected 1..100000", o.repeat));
  if (o.warmup < 0 || o.warmup > 100000)
    return fail(fmt::format("invalid --warmup '{}': expected 0..100000", o.warmup));
  for (auto [v, name] : {std::pair{o.timeout_s, "--timeout"}, {o.hello_timeout_s, "--hello-timeout"}})
    if (!(v > 0 && v <= 3600))
      return fail(fmt::format("invalid {} '{}': expected seconds in (0, 3600]", name, v));
  if (!o.connect.empty() && o.reverse && !o.payload.file.empty())
    return fail(fmt::format(
        "--payload '{}' with --reverse needs the server to send a local file: only in loopback",
        o.payload.file));
  if (o.json_path == "-" && o.csv_path == "-")
    return fail("--json - and --csv - cannot both write to stdout");
  return {};
}

Status validate_server(ServerOptions& o, const std::string& max_bytes) {
  if (o.tls.cert_file.empty() != o.tls.key_file.empty())
    return fail(o.tls.cert_file.empty() ? "--tls-key needs --tls-cert"
                                        : "--tls-cert needs --tls-key");
  if (o.tls.ktls != "auto" && o.tls.ktls != "off")
    return fail(fmt::format("invalid --ktls '{}': expected auto or off", o.tls.ktls));
  if (!max_bytes.empty()) {
    auto v = parse_size(max_bytes, "--max-bytes", kMinBytes, kMaxBytes);
    if (!v) return std::unexpected(v.error());
    o.max_bytes = *v;
  }
  if (auto st = resolve_token(o.auth_token); !st) return st;
  if (o.max_conns < 1 || o.max_conns > 4096)
    return fail(fmt::format("invalid --max-conns '{}': expected 1..4096", o.max_conns));
  if (!counter_kind_from(o.kernel_counter))
    return fail(
        fmt::format("invalid --kernel-counter '{}': expected auto, bpf, tracepoints or taskio",
                    o.kernel_counter));
  for (auto [v, name] : {std::pair{o.handshake_timeout_s, "--handshake-timeout"},
                         {o.idle_timeout_s, "--idle-timeout"}}) {
    if (!(v > 0 && v <= 3600))
      return fail(fmt::format("invalid {} '{}': expected seconds in (0, 3600]", name, v));
  }
  return {};
}

// The subcommand that was reading argv (the top level when none).
const CLI::App* parsing(const CLI::App& app) {
  auto parsed = app.get_subcommands([](const CLI::App* sub) { return sub->parsed(); });
  return parsed.empty() ? &app : parsed.front();
}

}  // namespace

Result<Command> parse_command_line(int argc, const char* const* argv) {
  CLI::App app{"iobench: network I/O buffer-size benchmark (TCP, replication payload)", "iobench"};
  app.require_subcommand(0, 1);

  ClientOptions loop_opts;
  RawClient loop_raw;
  add_client_options(app, loop_opts, loop_raw);

  ClientOptions client_opts;
  RawClient client_raw;
  auto* client = app.add_subcommand("client", "Run against `iobench server` on another host");
  add_client_options(*client, client_opts, client_raw);
  client->add_option("--connect,-c", client_opts.connect, "Server address HOST:PORT")->required();

  ServerOptions server_opts;
  std::string max_bytes;
  auto* server = app.add_subcommand("server", "Serve clients until stopped");
  server->add_option("--listen,-l", server_opts.listen,
                     "Address to listen on, ADDR[:PORT] (default 127.0.0.1:5210)");
  server->add_option("--handshake-timeout", server_opts.handshake_timeout_s,
                     "Seconds a client has to say hello (default 5)");
  server->add_option("--idle-timeout", server_opts.idle_timeout_s,
                     "Seconds without progress before a session is dropped (default 30)");
  server->add_option("--max-bytes", max_bytes, "Largest --bytes a client may ask for");
  server->add_option("--auth-token", server_opts.auth_token,
                     "Refuse clients without this token (default: $IOBENCH_AUTH_TOKEN)");
  unsigned_option(server->add_option("--max-conns", server_opts.max_conns,
                                     "Sessions served at once; more are refused (default 128)"));
  server->add_option("--cache-dir", server_opts.cache_dir, "Payload cache directory");
  server->add_option("--kernel-counter", server_opts.kernel_counter,
                     "Syscall counters for clients that ask: auto (eBPF, else perf tracepoints), "
                     "bpf, tracepoints or taskio (free; reads and writes only)");
  server->add_flag("--quiet,-q", server_opts.quiet, "No per-client log lines");
  server->add_option("--tls-cert", server_opts.tls.cert_file, "Certificate chain (PEM): TLS only");
  server->add_option("--tls-key", server_opts.tls.key_file, "Private key (PEM) for --tls-cert");
  server->add_option("--ktls", server_opts.tls.ktls, "Kernel TLS: auto (default) or off");

  PayloadCommand payload_cmd;
  std::string payload_bytes = "100MiB";
  auto* payload = app.add_subcommand("payload", "Write the payload stream to a file");
  add_payload_options(*payload, payload_cmd.payload, payload_bytes);
  payload->add_option("--out,-o", payload_cmd.out, "Output file")->required();
  payload->add_flag("-q,--quiet", payload_cmd.quiet, "No progress line while the payload is built");

  auto* doctor = app.add_subcommand("doctor", "Print what this host offers a benchmark");
  auto* protocol = app.add_subcommand(
      "protocol", "Print the control protocol's layout (JSON): version, every message's fields");
  bool version = false;
  app.add_flag("--version,-V", version, "Print iobench's version and protocol version, and exit");

  try {
    app.parse(argc, const_cast<char**>(argv));
  } catch (const CLI::CallForHelp&) {
    return HelpRequested{parsing(app)->help()};
  } catch (const CLI::ParseError& e) {
    return fail(explain_parse_error(*parsing(app), argc, argv, e).value_or(e.what()));
  }

  if (version)
    return HelpRequested{fmt::format("iobench {} (commit {}, control protocol {})\n",
                                     IOBENCH_VERSION, IOBENCH_GIT_COMMIT, proto::kVersion)};
  if (protocol->parsed()) return HelpRequested{proto::layout_json()};
  // Loopback options typed before a subcommand would be silently ignored: refuse them.
  if (client->parsed() || server->parsed() || payload->parsed() || doctor->parsed()) {
    for (const CLI::Option* opt : app.get_options()) {
      if (opt->count() > 0)
        return fail(fmt::format("option {} must follow the subcommand", opt->get_name()));
    }
  }
  if (doctor->parsed()) return DoctorCommand{};
  if (server->parsed()) {
    if (auto s = validate_server(server_opts, max_bytes); !s) return std::unexpected(s.error());
    return server_opts;
  }
  if (payload->parsed()) {
    if (auto s = validate_payload(payload_cmd.payload, payload_bytes); !s)
      return std::unexpected(s.error());
    return payload_cmd;
  }
  if (client->parsed()) {
    if (auto s = validate_client(client_opts, client_raw); !s) return std::unexpected(s.error());
    return client_opts;
  }
  if (auto s = validate_client(loop_opts, loop_raw); !s) return std::unexpected(s.error());
  return loop_opts;
}

}  // namespace iobench
