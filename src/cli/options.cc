#include "cli/options.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <optional>

#include "adaptive/policy.h"
#include "cli/client_options.h"
#include "cli/hints.h"
#include "cli/manpage.h"
#include "probe/syscall_counter.h"
#include "proto/fields.h"
#include "util/size.h"
#include "watch/proc_watch.h"

namespace iobench {
namespace {

// The server's options as typed, before validate_server reads them.
struct RawServer {
  std::string max_bytes, cache_max, ktls = "auto", kernel_counter = "auto";
};

Status validate_server(ServerOptions& o, const RawServer& raw) {
  const std::string& max_bytes = raw.max_bytes;
  const std::string& ktls = raw.ktls;
  if (auto st = parse_cache_max(raw.cache_max, o.cache_max); !st) return st;
  if (o.tls.cert_file.empty() != o.tls.key_file.empty())
    return fail(o.tls.cert_file.empty() ? "--tls-key needs --tls-cert"
                                        : "--tls-cert needs --tls-key");
  if (!o.tls_listen.empty() && o.tls.cert_file.empty())
    return fail(fmt::format("--tls-listen '{}' needs --tls-cert and --tls-key", o.tls_listen));
  // The server takes kTLS where the kernel has it, or not at all: `on` is the client's choice.
  const auto k = parse_name<tls::Ktls>(ktls);
  if (!k || *k == tls::Ktls::kOn)
    return fail(fmt::format("invalid --ktls '{}': expected auto or off", ktls));
  o.tls.ktls = *k;
  if (!max_bytes.empty()) {
    auto v = parse_size(max_bytes, "--max-bytes", kMinBytes, kMaxBytes);
    if (!v) return std::unexpected(v.error());
    o.max_bytes = *v;
  }
  if (auto st = resolve_token(o.auth_token); !st) return st;
  if (o.max_conns < 1 || o.max_conns > 4096)
    return fail(fmt::format("invalid --max-conns '{}': expected 1..4096", o.max_conns));
  auto counter = parse_option<CounterKind>("--kernel-counter", raw.kernel_counter);
  if (!counter) return std::unexpected(counter.error());
  o.kernel_counter = *counter;
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

CLI::App* add_server_command(CLI::App& app, ServerOptions& o, RawServer& raw) {
  auto* server = app.add_subcommand("server", "Serve clients until stopped");
  server->add_option("--listen,-l", o.listen,
                     "Address to listen on, ADDR[:PORT] (default 127.0.0.1:5210)");
  server->add_option("--tls-listen", o.tls_listen,
                     "Also serve TLS on ADDR[:PORT] (needs --tls-cert); --listen then serves TCP "
                     "only, as a primary's tls-port beside its port");
  server->add_option("--handshake-timeout", o.handshake_timeout_s,
                     "Seconds a client has to say hello (default 5)");
  server->add_option("--idle-timeout", o.idle_timeout_s,
                     "Seconds without progress before a session is dropped (default 30)");
  server->add_option("--max-bytes", raw.max_bytes, "Largest --bytes a client may ask for");
  server->add_option("--auth-token", o.auth_token,
                     "Refuse clients without this token (default: $IOBENCH_AUTH_TOKEN)");
  unsigned_option(server->add_option("--max-conns", o.max_conns,
                                     "Sessions served at once; more are refused (default 128)"));
  add_cache_options(*server, o.cache_dir, raw.cache_max);
  server->add_option("--kernel-counter", raw.kernel_counter,
                     "Syscall counters for clients that ask: auto (eBPF, else perf tracepoints), "
                     "bpf, tracepoints or taskio (free; reads and writes only)");
  server->add_flag("--quiet,-q", o.quiet, "No per-client log lines");
  server->add_option("--tls-cert", o.tls.cert_file, "Certificate chain (PEM): TLS only");
  server->add_option("--tls-key", o.tls.key_file, "Private key (PEM) for --tls-cert");
  server->add_option("--ktls", raw.ktls, "Kernel TLS: auto (default) or off");
  return server;
}

CLI::App* add_payload_command(CLI::App& app, PayloadCommand& c, RawPayload& raw) {
  auto* payload = app.add_subcommand("payload", "Write the payload stream to a file");
  add_payload_options(*payload, c.payload, raw, true);
  auto* out = payload->add_option("--out,-o", c.out, "Write the payload to this file");
  auto* list =
      payload->add_flag("--list", c.list, "List the cached payloads, most recently used first");
  auto* clear = payload->add_flag("--clear", c.clear, "Remove every cached payload");
  out->excludes(list)->excludes(clear);
  list->excludes(clear);
  payload->add_flag("-q,--quiet", c.quiet, "No progress line while the payload is built");
  return payload;
}

CLI::App* add_watch_command(CLI::App& app, WatchCommand& c, std::vector<std::string>& raw) {
  auto* w = app.add_subcommand(
      "watch", "Count a live process's syscalls, I/O sizes and CPU (and its children's)");
  raw.assign(3, "");
  w->add_option("--pid,-p", c.pids, "A process to watch, with every child it forks (repeatable)")
      ->required()
      ->type_name("PID");
  w->add_option("--duration,-d", raw[0], "End after this long (e.g. 30s); default: until Ctrl-C");
  w->add_option("--until-exit", raw[1], "End when this process exits")->type_name("PID");
  w->add_option("--interval", raw[2], "Sample /proc (CPU, descriptor kinds) this often (100ms)");
  w->add_option("--json", c.json_path, "Also write the report as JSON (-: stdout)");
  w->add_option("--csv", c.csv_path, "Also write the report as CSV (-: stdout)");
  w->add_flag("-q,--quiet", c.quiet, "No table and no start line");
  return w;
}

// A process that exists (a zombie counts as gone).
Status check_pid(pid_t pid, const char* option) {
  const auto st = read_proc_stat(pid);
  if (pid <= 0 || !st || st->state == 'Z')
    return fail(fmt::format("invalid {} {}: no such process", option, pid));
  return {};
}

Status validate_watch(WatchCommand& c, const std::vector<std::string>& raw) {
  for (pid_t p : c.pids)
    if (auto st = check_pid(p, "--pid"); !st) return st;
  if (!raw[0].empty()) {
    auto d = parse_duration(raw[0], "--duration", 7 * 86400.0);
    if (!d) return std::unexpected(d.error());
    c.duration_s = *d;
  }
  if (!raw[1].empty()) {
    char* end = nullptr;
    const long pid = std::strtol(raw[1].c_str(), &end, 10);
    if (end == raw[1].c_str() || *end != '\0' || pid <= 0 || pid > INT32_MAX)
      return fail(fmt::format("invalid --until-exit '{}': expected a process id", raw[1]));
    c.until_exit = static_cast<pid_t>(pid);
    if (auto st = check_pid(c.until_exit, "--until-exit"); !st) return st;
  }
  if (!raw[2].empty()) {
    auto d = parse_duration(raw[2], "--interval", 10.0);
    if (!d) return std::unexpected(d.error());
    if (*d < 0.01) return fail(fmt::format("invalid --interval '{}': at least 10ms", raw[2]));
    c.interval_s = *d;
  }
  return {};
}

// Every command and option, declared once; command() validates the one that was used.
struct CommandLine {
  CLI::App app{"iobench: network I/O buffer-size benchmark (TCP, replication payload)", "iobench"};
  ClientOptions loop_opts, client_opts;
  RawClient loop_raw, client_raw;
  ServerOptions server_opts;
  RawServer server_raw;
  PayloadCommand payload_cmd;
  RawPayload payload_raw;
  CLI::App* client = nullptr;
  CLI::App* server = nullptr;
  CLI::App* payload = nullptr;
  CLI::App* doctor = nullptr;
  CLI::App* protocol = nullptr;
  CLI::App* compare = nullptr;
  CompareCommand compare_cmd;
  CLI::App* watch = nullptr;
  WatchCommand watch_cmd;
  std::vector<std::string> watch_raw;  // --duration, --until-exit, --interval as typed
  bool version = false;
  bool manpage = false;  // hidden: the build writes iobench.1 with it

  CommandLine() {
    app.require_subcommand(0, 1);
    add_client_options(app, loop_opts, loop_raw);
    group_client_options(app);
    client = app.add_subcommand("client", "Run against `iobench server` on another host");
    add_client_options(*client, client_opts, client_raw);
    group_client_options(*client);
    client->add_option("--connect,-c", client_opts.connect, "Server address HOST:PORT")
        ->required();
    server = add_server_command(app, server_opts, server_raw);
    payload = add_payload_command(app, payload_cmd, payload_raw);
    doctor = app.add_subcommand("doctor", "Print what this host offers a benchmark");
    protocol = app.add_subcommand(
        "protocol", "Print the control protocol's layout (JSON): version, every message's fields");
    compare = app.add_subcommand(
        "compare", "Compare two results files (or two sizes: FILE#16K FILE#64K), per figure");
    compare->add_option("BASE", compare_cmd.base, "Results JSON, or FILE#SIZE")->required();
    compare->add_option("NEW", compare_cmd.next, "Results JSON, or FILE#SIZE")->required();
    compare->add_option("--json", compare_cmd.json_path, "Also write the comparison as JSON (-: stdout)");
    compare->add_option("--alpha", compare_cmd.alpha,
                        "Significance level of the Mann-Whitney U test (default 0.05)");
    watch = add_watch_command(app, watch_cmd, watch_raw);
    app.add_flag("--version,-V", version, "Print iobench's version and protocol version, and exit");
    app.add_flag("--manpage", manpage, "Print the manual page (roff)")->group("");
  }
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  // The parsed command, validated.
  Result<Command> command() {
    // Loopback options typed before a subcommand would be silently ignored: refuse them.
    if (client->parsed() || server->parsed() || payload->parsed() || doctor->parsed() ||
        compare->parsed() || watch->parsed()) {
      for (const CLI::Option* opt : app.get_options()) {
        if (opt->count() > 0)
          return fail(fmt::format("option {} must follow the subcommand", opt->get_name()));
      }
    }
    if (doctor->parsed()) return DoctorCommand{};
    if (watch->parsed()) {
      if (auto st = validate_watch(watch_cmd, watch_raw); !st) return std::unexpected(st.error());
      return watch_cmd;
    }
    if (compare->parsed()) {
      if (!(compare_cmd.alpha > 0 && compare_cmd.alpha < 1))
        return fail(fmt::format("invalid --alpha '{}': expected a level in (0, 1), e.g. 0.05",
                                compare_cmd.alpha));
      return compare_cmd;
    }
    if (server->parsed()) {
      if (auto s = validate_server(server_opts, server_raw); !s) return std::unexpected(s.error());
      return server_opts;
    }
    if (payload->parsed()) {
      if (auto s = validate_payload(payload_cmd.payload, payload_raw); !s)
        return std::unexpected(s.error());
      if (payload_cmd.out.empty() && !payload_cmd.list && !payload_cmd.clear)
        return fail("payload needs --out FILE, --list or --clear");
      return payload_cmd;
    }
    ClientOptions& o = client->parsed() ? client_opts : loop_opts;
    if (auto s = validate_client(o, client->parsed() ? client_raw : loop_raw); !s)
      return std::unexpected(s.error());
    return o;
  }
};

}  // namespace

Result<Command> parse_command_line(int argc, const char* const* argv) {
  CommandLine cl;
  try {
    cl.app.parse(argc, const_cast<char**>(argv));
  } catch (const CLI::CallForHelp&) {
    return HelpRequested{parsing(cl.app)->help()};
  } catch (const CLI::ParseError& e) {
    return fail(explain_parse_error(*parsing(cl.app), argc, argv, e).value_or(e.what()));
  }
  if (cl.version)
    return HelpRequested{fmt::format("iobench {} (commit {}, control protocol {})\n",
                                     IOBENCH_VERSION, IOBENCH_GIT_COMMIT, proto::kVersion)};
  if (cl.protocol->parsed()) return HelpRequested{proto::layout_json()};
  if (cl.manpage) return HelpRequested{render_manpage(cl.app, IOBENCH_VERSION)};
  return cl.command();
}

}  // namespace iobench
