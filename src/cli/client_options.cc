#include "cli/client_options.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>

#include "adaptive/policy.h"
#include "cli/engine_options.h"
#include "payload/window.h"
#include "probe/syscall_counter.h"
#include "util/size.h"

namespace iobench {
namespace {

// The described blocks' text (enums, sizes, durations) and every field's bounds (the first bad
// value is reported); each side's engine is --engine unless given.
Status parse_named(ClientOptions& o, const RawClient& raw) {
  Status blocks;
  for_each_option_block(o, [&](const char*, const char*, auto& block) {
    if (blocks) blocks = read_described(block, raw);
  });
  if (!blocks) return blocks;
  if (!raw.typed("--send-engine")) o.send_engine = o.engine;
  if (!raw.typed("--recv-engine")) o.recv_engine = o.engine;
  return {};
}

Result<std::vector<uint64_t>> optional_list(const std::string& text, std::string_view what) {
  if (text.empty()) return std::vector<uint64_t>{};
  return parse_size_list(text, what, kMinBuf, kMaxBuf);
}

// --buf with 'adaptive' entries: one size per position (0 where adaptive), and which were.
Result<std::vector<uint64_t>> buf_list(const std::string& text, std::vector<bool>& adaptive) {
  std::vector<uint64_t> out;
  if (text.empty()) return out;
  for (std::string_view item : split_commas(text)) {
    adaptive.push_back(item == "adaptive");
    if (item == "adaptive") {
      out.push_back(0);
      continue;
    }
    auto v = parse_size(item, "--buf", kMinBuf, kMaxBuf);
    if (!v) return std::unexpected(v.error());
    out.push_back(*v);
  }
  return out;
}

}  // namespace

void add_client_options(CLI::App& app, ClientOptions& o, RawClient& raw) {
  add_described(app, raw, raw, "Run");
  for_each_option_block(o, [&](const char*, const char* group, auto& block) {
    add_described(app, block, raw, group);
  });
  raw.queue_depth = app.get_option("--qd");
  raw.auth_token = app.get_option("--auth-token");
  raw.verbose = app.get_option("--verbose");
  // Every option of the TLS group is refused without --proto tls.
  raw.tls_options = app.get_options([](CLI::Option* opt) { return opt->get_group() == kTlsGroup; });
}

namespace {

// A whole number in lo..hi, or an error naming the option and the value.
Result<int> parse_count(const std::string& text, const char* name, int lo, int hi) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < lo || v > hi)
    return fail(fmt::format("invalid {} '{}': expected {}..{}", name, text, lo, hi));
  return static_cast<int>(v);
}

// --repeat N, or auto with --max-repeat and --target-ci (refused without it).
Status parse_repeat(ClientOptions& o, const RawClient& raw) {
  if (o.time_s > 0) {  // -t: runs until the time is reached, up to the --repeat bound
    if (raw.repeat != "1" || !raw.max_repeat.empty() || !raw.target_ci.empty())
      return fail("--time sizes the runs by time: give it or --repeat, not both");
    o.repeat = 100000;
    return {};
  }
  o.repeat_auto = raw.repeat == "auto";
  if (!o.repeat_auto) {
    for (auto [text, name] : {std::pair{&raw.max_repeat, "--max-repeat"},
                              {&raw.target_ci, "--target-ci"}})
      if (!text->empty()) return fail(fmt::format("{} needs --repeat auto", name));
    auto n = parse_count(raw.repeat, "--repeat", 1, 100000);
    if (!n) return fail(fmt::format("invalid --repeat '{}': expected 1..100000 or auto", raw.repeat));
    o.repeat = *n;
    return {};
  }
  auto most = parse_count(raw.max_repeat.empty() ? "30" : raw.max_repeat, "--max-repeat",
                          ClientOptions::kAutoMinRuns, 100000);
  if (!most) return std::unexpected(most.error());
  o.repeat = *most;
  if (!raw.target_ci.empty()) {
    std::string pct = raw.target_ci;
    if (pct.ends_with('%')) pct.pop_back();
    char* end = nullptr;
    const double v = std::strtod(pct.c_str(), &end);
    if (pct.empty() || *end != '\0' || !(v > 0 && v < 100))
      return fail(fmt::format("invalid --target-ci '{}': expected a percentage in (0, 100), e.g. 2%",
                              raw.target_ci));
    o.target_ci = v / 100;
  }
  return {};
}

// The first line of @FILE's FILE, opened without following a link and refused when another
// user could have written it (group- or world-writable, or owned by someone other than this
// user or root): a token anyone may set authenticates no one.
Result<std::string> read_token_file(const std::string& token) {
  const std::string path = token.substr(1);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return fail(fmt::format("--auth-token '{}': cannot read {}: {}", token, path,
                            errno == ELOOP ? "it is a symbolic link" : std::strerror(errno)));
  struct stat st {};
  std::string why;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    why = "not a regular file";
  else if (st.st_uid != ::geteuid() && st.st_uid != 0)
    why = fmt::format("it is owned by uid {}, neither this user ({}) nor root", st.st_uid,
                      ::geteuid());
  else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    why = fmt::format("its mode {:o} lets others write it (chmod 600 or 640)", st.st_mode & 07777);
  std::string content(258, '\0');
  ssize_t n = why.empty() ? ::read(fd, content.data(), content.size()) : 0;
  const int err = errno;
  ::close(fd);
  if (!why.empty()) return fail(fmt::format("--auth-token '{}': {} refused: {}", token, path, why));
  if (n < 0)
    return fail(fmt::format("--auth-token '{}': cannot read {}: {}", token, path,
                            std::strerror(err)));
  content.resize(static_cast<size_t>(n));
  if (content.empty()) return fail(fmt::format("--auth-token '{}': cannot read {}: it is empty", token, path));
  std::string line = content.substr(0, content.find('\n'));
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.empty()) return fail(fmt::format("--auth-token '{}': its first line is empty", token));
  return line;
}

}  // namespace

Status resolve_token(std::string& token, bool allow_short, bool given) {
  // An empty token would silently mean "no authentication": refused wherever it comes from.
  if (given && token.empty())
    return fail("--auth-token '': an empty token would mean no authentication (leave the "
                "option out to run without one)");
  if (token.empty())
    if (const char* env = std::getenv("IOBENCH_AUTH_TOKEN")) {
      if (*env == '\0')
        return fail("IOBENCH_AUTH_TOKEN is set but empty: an empty token would mean no "
                    "authentication (unset it to run without one)");
      token = env;
    }
  const bool literal = given && !token.empty() && !token.starts_with('@');
  if (token.starts_with('@')) {  // @FILE: the token is FILE's first line (a service's token file)
    auto line = read_token_file(token);
    if (!line) return std::unexpected(line.error());
    token = std::move(*line);
  }
  if (token.size() > 256)
    return fail(fmt::format("--auth-token of {} bytes: at most 256", token.size()));
  if (!token.empty() && token.size() < kMinTokenBytes && !allow_short)
    return fail(fmt::format(
        "--auth-token of {} bytes: at least {} (a fake server could try every short token "
        "against one proof offline; `openssl rand -hex 32` makes a good one; "
        "--allow-short-token to use it anyway)",
        token.size(), kMinTokenBytes));
  // Once the token is good (an error stays the one line it is).
  if (literal)
    fmt::print(stderr,
               "iobench: warning: a literal --auth-token can be read by every user of this host "
               "(/proc/PID/cmdline); use --auth-token @FILE or $IOBENCH_AUTH_TOKEN\n");
  return {};
}

namespace {

// --buf, --send-buf and --recv-buf: one BufPair per run size.
Status parse_bufs(ClientOptions& o, const RawClient& raw) {
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
  return {};
}

// --source-window: whole pages, shorter than the stream, and a stream whose repeats a decoder
// or the fan-out writer do not read.
Status validate_source_window(const ClientOptions& o) {
  const uint64_t w = o.source_window;
  if (w == 0) return {};
  if (w % kWindowAlign != 0)
    return fail(fmt::format("invalid --source-window '{}': a multiple of 4K", format_size(w)));
  if (w > o.payload.bytes)
    return fail(fmt::format("--source-window {} is larger than --bytes {}", format_size(w),
                            format_size(o.payload.bytes)));
  if (o.decompress)
    return fail("--source-window repeats one window: not with --decompress (the decoder would "
                "time one hot window over and over, not a replica applying a stream)");
  if (o.fanout != FanoutShape::kOff)
    return fail("--source-window: the --fanout writer streams the payload itself");
  return {};
}

// --connect HOST:PORT[,HOST:PORT...]: several servers only for a group that reaches each.
Status parse_servers(ClientOptions& o) {
  if (o.connect.empty()) return {};
  auto servers = parse_host_ports(o.connect, "--connect", kDefaultPort, false);
  if (!servers) return std::unexpected(servers.error());
  if (servers->size() > 1 && servers->size() > o.conns)
    return fail(fmt::format("--connect names {} servers: give --conns {} or more (connection i "
                            "goes to server i mod {})",
                            servers->size(), servers->size(), servers->size()));
  o.servers = std::move(*servers);
  return {};
}

}  // namespace

Status validate_client(ClientOptions& o, RawClient& raw) {
  if (auto st = parse_named(o, raw); !st) return st;
  if (auto st = tls::validate(o.tls); !st) return st;
  if (o.proto == Proto::kTcp) {
    for (const CLI::Option* opt : raw.tls_options) {
      if (opt->count() > 0) return fail(fmt::format("{} needs --proto tls", opt->get_name()));
    }
  }
  if (auto st = validate_engines(o); !st) return st;
  if (auto st = parse_cpus(raw.cpus, o); !st) return st;
  if (auto st = parse_bufs(o, raw); !st) return st;
  if (auto st = validate_conns(o, raw); !st) return st;
  if (auto st = validate_fanout(o, raw.typed("--source-rate")); !st) return st;
  if (auto st = parse_servers(o); !st) return st;
  if (auto st = refuse_no_effect(o, {.queue_depth = raw.queue_depth->count() > 0,
                                     .auth_token = raw.auth_token->count() > 0,
                                     .stagger = raw.typed("--stagger"),
                                     .verbose = raw.verbose->count() > 0});
      !st)
    return st;

  if (auto st = parse_repeat(o, raw); !st) return st;
  if (!o.connect.empty() && o.reverse && !o.payload.file.empty())
    return fail(fmt::format(
        "--payload '{}' with --reverse needs the server to send a local file: only in loopback",
        o.payload.file));
  if (auto st = validate_source_window(o); !st) return st;
  if (o.json_path == "-" && o.csv_path == "-")
    return fail("--json - and --csv - cannot both write to stdout");
  if (auto st = validate_write_pattern(o); !st) return st;
  // Last: its warning (a literal token) only for a command that runs.
  return resolve_token(o.auth_token, o.allow_short_token, raw.auth_token->count() > 0);
}

}  // namespace iobench
