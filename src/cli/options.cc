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
#include "cli/size.h"
#include "probe/syscall_counter.h"
#include "proto/fields.h"

namespace iobench {
namespace {

Status validate_server(ServerOptions& o, const std::string& max_bytes, const std::string& cache_max,
                       const std::string& ktls, const std::string& kernel_counter) {
  if (auto st = parse_cache_max(cache_max, o.cache_max); !st) return st;
  if (o.tls.cert_file.empty() != o.tls.key_file.empty())
    return fail(o.tls.cert_file.empty() ? "--tls-key needs --tls-cert"
                                        : "--tls-cert needs --tls-key");
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
  auto counter = parse_option<CounterKind>("--kernel-counter", kernel_counter);
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

}  // namespace

CounterKind counter_kind_of(SyscallsMode m) {
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

Result<Command> parse_command_line(int argc, const char* const* argv) {
  CLI::App app{"iobench: network I/O buffer-size benchmark (TCP, replication payload)", "iobench"};
  app.require_subcommand(0, 1);

  ClientOptions loop_opts;
  RawClient loop_raw;
  add_client_options(app, loop_opts, loop_raw);
  group_client_options(app);

  ClientOptions client_opts;
  RawClient client_raw;
  auto* client = app.add_subcommand("client", "Run against `iobench server` on another host");
  add_client_options(*client, client_opts, client_raw);
  group_client_options(*client);
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
  std::string server_cache_max;
  add_cache_options(*server, server_opts.cache_dir, server_cache_max);
  std::string server_ktls = "auto", kernel_counter = "auto";
  server->add_option("--kernel-counter", kernel_counter,
                     "Syscall counters for clients that ask: auto (eBPF, else perf tracepoints), "
                     "bpf, tracepoints or taskio (free; reads and writes only)");
  server->add_flag("--quiet,-q", server_opts.quiet, "No per-client log lines");
  server->add_option("--tls-cert", server_opts.tls.cert_file, "Certificate chain (PEM): TLS only");
  server->add_option("--tls-key", server_opts.tls.key_file, "Private key (PEM) for --tls-cert");
  server->add_option("--ktls", server_ktls, "Kernel TLS: auto (default) or off");

  PayloadCommand payload_cmd;
  RawPayload payload_raw;
  auto* payload = app.add_subcommand("payload", "Write the payload stream to a file");
  add_payload_options(*payload, payload_cmd.payload, payload_raw);
  auto* out = payload->add_option("--out,-o", payload_cmd.out, "Write the payload to this file");
  auto* list = payload->add_flag("--list", payload_cmd.list,
                                 "List the cached payloads, most recently used first");
  auto* clear = payload->add_flag("--clear", payload_cmd.clear, "Remove every cached payload");
  out->excludes(list)->excludes(clear);
  list->excludes(clear);
  payload->add_flag("-q,--quiet", payload_cmd.quiet, "No progress line while the payload is built");

  auto* doctor = app.add_subcommand("doctor", "Print what this host offers a benchmark");
  auto* protocol = app.add_subcommand(
      "protocol", "Print the control protocol's layout (JSON): version, every message's fields");
  bool version = false;
  app.add_flag("--version,-V", version, "Print iobench's version and protocol version, and exit");
  bool manpage = false;  // hidden: the build writes iobench.1 with it
  app.add_flag("--manpage", manpage, "Print the manual page (roff)")->group("");

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
  if (manpage) return HelpRequested{render_manpage(app, IOBENCH_VERSION)};
  // Loopback options typed before a subcommand would be silently ignored: refuse them.
  if (client->parsed() || server->parsed() || payload->parsed() || doctor->parsed()) {
    for (const CLI::Option* opt : app.get_options()) {
      if (opt->count() > 0)
        return fail(fmt::format("option {} must follow the subcommand", opt->get_name()));
    }
  }
  if (doctor->parsed()) return DoctorCommand{};
  if (server->parsed()) {
    if (auto s =
            validate_server(server_opts, max_bytes, server_cache_max, server_ktls, kernel_counter);
        !s)
      return std::unexpected(s.error());
    return server_opts;
  }
  if (payload->parsed()) {
    if (auto s = validate_payload(payload_cmd.payload, payload_raw); !s)
      return std::unexpected(s.error());
    if (payload_cmd.out.empty() && !payload_cmd.list && !payload_cmd.clear)
      return fail("payload needs --out FILE, --list or --clear");
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
