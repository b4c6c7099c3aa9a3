#include "cli/options.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <optional>

#include "adaptive/policy.h"
#include "cli/client_options.h"
#include "cli/help_format.h"
#include "cli/hints.h"
#include "cli/manpage.h"
#include "net/address.h"
#include "probe/syscall_counter.h"
#include "proto/fields.h"
#include "util/size.h"
#include "watch/proc_watch.h"

namespace iobench {
namespace {

// `token_given`: --auth-token was on the command line (an empty one is refused).
Status validate_server(ServerOptions& o, const TypedText& typed, bool token_given) {
  if (auto st = read_described(o, typed); !st) return st;
  if (o.tls.cert_file.empty() != o.tls.key_file.empty())
    return fail(o.tls.cert_file.empty() ? "--tls-key needs --tls-cert"
                                        : "--tls-cert needs --tls-key");
  if (!o.tls_listen.empty() && o.tls.cert_file.empty())
    return fail(fmt::format("--tls-listen '{}' needs --tls-cert and --tls-key", o.tls_listen));
  return resolve_token(o.auth_token, o.allow_short_token, token_given);
}

// The subcommand that was reading argv (the top level when none).
const CLI::App* parsing(const CLI::App& app) {
  auto parsed = app.get_subcommands([](const CLI::App* sub) { return sub->parsed(); });
  return parsed.empty() ? &app : parsed.front();
}

// A subcommand whose options are the fields of `blocks`, each in its --help group.
template <Described... Blocks>
CLI::App* add_command(CLI::App& app, const char* name, const char* description, TypedText& text,
                      std::pair<const char*, Blocks*>... blocks) {
  CLI::App* sub = app.add_subcommand(name, description);
  (add_described(*sub, *blocks.second, text, blocks.first), ...);
  return sub;
}

// A process that exists (a zombie counts as gone).
Status check_pid(pid_t pid, const char* option) {
  const auto st = read_proc_stat(pid);
  if (pid <= 0 || !st || st->state == 'Z')
    return fail(fmt::format("invalid {} {}: no such process", option, pid));
  return {};
}

Status validate_watch(WatchCommand& c, const TypedText& typed) {
  if (auto st = read_described(c, typed); !st) return st;
  for (pid_t p : c.pids)
    if (auto st = check_pid(p, "--pid"); !st) return st;
  if (c.until_exit != 0)
    if (auto st = check_pid(c.until_exit, "--until-exit"); !st) return st;
  return {};
}

Status validate_payload_command(PayloadCommand& c, const TypedText& typed) {
  if (auto st = read_described(c.payload, typed); !st) return st;
  if (c.list && c.clear) return fail("--list excludes --clear");
  if (!c.out.empty() && (c.list || c.clear))
    return fail(fmt::format("--out excludes {}", c.list ? "--list" : "--clear"));
  if (c.out.empty() && !c.list && !c.clear) return fail("payload needs --out FILE, --list or --clear");
  return {};
}

// The options before any subcommand that are not the loopback run's.
struct TopLevel {
  bool version = false;
  bool manpage = false;  // hidden: the build writes iobench.1 with it
};

template <typename Self, typename Visit>
  requires DescribesAs<Self, TopLevel>
void describe(Self& t, Visit&& visit) {
  visit(Field{.name = "version",
              .flag = "--version",
              .help = "Print iobench's version and protocol version, and exit",
              .short_flag = "-V"},
        t.version);
  visit(Field{.name = "manpage",
              .flag = "--manpage",
              .help = "Print the manual page (roff)",
              .hidden = true},
        t.manpage);
}

// Every command and option, declared once; command() validates the one that was used.
struct CommandLine {
  CLI::App app{"iobench: network I/O buffer-size benchmark (TCP, replication payload)", "iobench"};
  ClientOptions loop_opts, client_opts;
  RawClient loop_raw, client_raw;
  ServerOptions server_opts;
  PayloadCommand payload_cmd;
  CompareCommand compare_cmd;
  WatchCommand watch_cmd;
  LoadCommand load_cmd;
  TopLevel top;
  TypedText server_text, payload_text, compare_text, watch_text, load_text, top_text;
  CLI::App* client = nullptr;
  CLI::App* server = nullptr;
  CLI::App* payload = nullptr;
  CLI::App* doctor = nullptr;
  CLI::App* protocol = nullptr;
  CLI::App* compare = nullptr;
  CLI::App* watch = nullptr;
  CLI::App* load = nullptr;

  CommandLine() {
    app.formatter(std::make_shared<WrappingFormatter>());  // before the subcommands copy it
    app.require_subcommand(0, 1);
    add_client_options(app, loop_opts, loop_raw);
    group_client_options(app);
    client = app.add_subcommand("client", "Run against `iobench server` on another host");
    add_client_options(*client, client_opts, client_raw);
    group_client_options(*client);
    server = add_command(app, "server", "Serve clients until stopped", server_text,
                         std::pair{"Options", &server_opts});
    payload = add_command(app, "payload", "Write the payload stream to a file", payload_text,
                          std::pair{"Options", &payload_cmd.payload},
                          std::pair{"Options", &payload_cmd});
    doctor = app.add_subcommand("doctor", "Print what this host offers a benchmark");
    protocol = app.add_subcommand(
        "protocol", "Print the control protocol's layout (JSON): version, every message's fields");
    compare = add_command(
        app, "compare", "Compare two results files (or two sizes: FILE#16K FILE#64K), per figure",
        compare_text, std::pair{"Options", &compare_cmd});
    watch = add_command(
        app, "watch", "Count a live process's syscalls, I/O sizes and CPU (and its children's)",
        watch_text, std::pair{"Options", &watch_cmd});
    load = add_command(app, "load",
                       "Open-loop RESP load on a Valkey or Redis server (latency from each "
                       "request's intended send time)",
                       load_text, std::pair{"Options", &load_cmd});
    add_described(app, top, top_text, "Options");
  }
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  // The parsed command, validated.
  Result<Command> command() {
    // Loopback options typed before a subcommand would be silently ignored: refuse them.
    if (client->parsed() || server->parsed() || payload->parsed() || doctor->parsed() ||
        compare->parsed() || watch->parsed() || load->parsed()) {
      for (const CLI::Option* opt : app.get_options()) {
        if (opt->count() > 0)
          return fail(fmt::format("option {} must follow the subcommand", opt->get_name()));
      }
    }
    if (doctor->parsed()) return DoctorCommand{};
    if (watch->parsed()) {
      if (auto st = validate_watch(watch_cmd, watch_text); !st) return std::unexpected(st.error());
      return watch_cmd;
    }
    if (load->parsed()) {
      if (auto st = read_described(load_cmd, load_text); !st) return std::unexpected(st.error());
      if (auto where = parse_host_port(load_cmd.connect, "--connect", 6379, false); !where)
        return std::unexpected(where.error());
      return load_cmd;
    }
    if (compare->parsed()) {
      if (auto st = read_described(compare_cmd, compare_text); !st)
        return std::unexpected(st.error());
      return compare_cmd;
    }
    if (server->parsed()) {
      if (auto s = validate_server(server_opts, server_text,
                                   server->get_option("--auth-token")->count() > 0);
          !s)
        return std::unexpected(s.error());
      return server_opts;
    }
    if (payload->parsed()) {
      if (auto s = validate_payload_command(payload_cmd, payload_text); !s)
        return std::unexpected(s.error());
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
  if (cl.top.version)
    return HelpRequested{fmt::format("iobench {} (commit {}, control protocol {})\n",
                                     IOBENCH_VERSION, IOBENCH_GIT_COMMIT, proto::kVersion)};
  if (cl.protocol->parsed()) return HelpRequested{proto::layout_json()};
  if (cl.top.manpage) return HelpRequested{render_manpage(cl.app, IOBENCH_VERSION)};
  return cl.command();
}

}  // namespace iobench
