#include "cli/client_options.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdlib>
#include <optional>

#include "adaptive/policy.h"
#include "cli/engine_options.h"
#include "payload/window.h"
#include "probe/syscall_counter.h"
#include "util/size.h"

namespace iobench {
namespace {

// One option per field of a described struct that has a flag, in its --help group: a flag for a
// bool (a negated one turns it off), else a value (an enum's name or a size's text into `raw`,
// for parse_described).
template <Described T>
void add_described(CLI::App& app, T& s, std::map<std::string, std::string>& raw,
                   const char* group) {
  describe(s, [&](const Field& f, auto& v) {
    using V = std::decay_t<decltype(v)>;
    if (f.flag.empty()) return;
    const std::string flag(f.flag), help(f.help);
    const std::string names = f.short_flag.empty() ? flag : flag + "," + std::string(f.short_flag);
    CLI::Option* opt = nullptr;
    if constexpr (NamedEnum<V>) {
      opt = app.add_option(flag, raw[flag], help);
    } else if constexpr (std::is_same_v<V, bool>) {
      opt = f.negated ? app.add_flag_function(names, [&v](std::int64_t) { v = false; }, help)
                      : app.add_flag(names, v, help);
    } else if constexpr (std::is_unsigned_v<V>) {
      opt = f.size ? app.add_option(names, raw[flag], help)->type_name("SIZE")
                   : unsigned_option(app.add_option(names, v, help));
    } else if constexpr (std::is_floating_point_v<V>) {
      opt = f.duration ? app.add_option(names, raw[flag], help)->type_name("DURATION")
                       : app.add_option(names, v, help);
    } else if constexpr (!Described<V>) {
      opt = app.add_option(names, v, help);
    }
    if (opt) opt->group(group);
  });
}

// The fields add_described read as text: enums by name, sizes by parse_size within the bounds,
// durations by parse_duration.
template <Described T>
Status parse_described(T& s, const std::map<std::string, std::string>& raw) {
  Status first;
  describe(s, [&](const Field& f, auto& v) {
    using V = std::decay_t<decltype(v)>;
    const auto it = raw.find(std::string(f.flag));
    if (!first || f.flag.empty() || it == raw.end() || it->second.empty()) return;
    if constexpr (NamedEnum<V>) {
      auto e = parse_option<V>(f.flag, it->second);
      if (e)
        v = *e;
      else
        first = std::unexpected(e.error());
    } else if constexpr (std::is_unsigned_v<V> && !std::is_same_v<V, bool>) {
      if (!f.size) return;
      if (f.zero_is_unset && it->second == "0") {  // "not set", as the default
        v = 0;
        return;
      }
      auto n = parse_size(it->second, f.flag, static_cast<uint64_t>(f.min),
                          static_cast<uint64_t>(f.max));
      if (n)
        v = static_cast<V>(*n);
      else
        first = std::unexpected(n.error());
    } else if constexpr (std::is_floating_point_v<V>) {
      if (!f.duration) return;
      auto d = parse_duration(it->second, f.flag, f.real_max);
      if (d)
        v = *d;
      else
        first = std::unexpected(d.error());
    }
  });
  return first;
}

// `text` into `out`, or the error naming the flag and the value.
template <NamedEnum E>
Status set_named(E& out, std::string_view flag, const std::string& text) {
  auto e = parse_option<E>(flag, text);
  if (!e) return std::unexpected(e.error());
  out = *e;
  return {};
}

// The described blocks' text (enums, sizes, durations) and every field's bounds, then the named
// TLS options (the first bad value is reported).
Status parse_named(ClientOptions& o, const RawClient& raw) {
  Status blocks;
  for_each_option_block(o, [&](const char*, const char*, auto& block) {
    if (blocks) blocks = parse_described(block, raw.described);
    if (blocks) blocks = check_fields(block, true);
  });
  if (!blocks) return blocks;
  // Each side's engine is --engine unless given.
  if (!raw.typed("--send-engine")) o.send_engine = o.engine;
  if (!raw.typed("--recv-engine")) o.recv_engine = o.engine;
  for (const Status& st :
       {set_named(o.tls.io, "--tls-io", raw.tls_io), set_named(o.tls.ktls, "--ktls", raw.ktls),
        set_named(o.tls.version, "--tls-version", raw.tls_version)})
    if (!st) return st;
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

CLI::Option* unsigned_option(CLI::Option* opt) {
  return opt->check(CLI::Validator(
      [](const std::string& v) -> std::string {
        if (v.find('-') == std::string::npos) return {};
        return fmt::format("'{}' is negative (expected 0 or more)", v);
      },
      "", "not negative"));
}

void add_cache_options(CLI::App& app, std::string& dir, std::string& max) {
  app.add_option("--cache-dir", dir, "Payload cache (default ~/.cache/iobench)");
  app.add_option("--cache-max", max,
                 "Bound of the payload cache; least recently used payloads go first (default " +
                     format_size(PayloadSpec{}.cache_max) + ")");
}

void add_payload_options(CLI::App& app, PayloadSpec& p, RawPayload& raw, bool described) {
  if (described) add_described(app, p, raw.described, "Payload");
  app.add_option("--payload", p.file, "Stream this file (zstd-compressed, cached) instead");
  add_cache_options(app, p.cache_dir, raw.cache_max);
}

namespace {

// The client's TLS options (refused without --proto tls).
void add_tls_options(CLI::App& app, tls::TlsOptions& tls, RawClient& raw) {
  auto& t = raw.tls_options;
  t.push_back(app.add_option("--tls-io", raw.tls_io,
                             "auto (default: bio for uring, socket otherwise), socket (OpenSSL on "
                             "the fd) or bio (memory BIOs)"));
  t.push_back(app.add_option("--tls-version", raw.tls_version, "1.2 or 1.3 (default)"));
  t.push_back(app.add_option("--cipher", tls.cipher,
                             "AES-128-GCM (default), AES-256-GCM, CHACHA20-POLY1305"));
  t.push_back(app.add_option("--ktls", raw.ktls, "Kernel TLS: auto (default), on, off"));
  t.push_back(app.add_option("--tls-ca", tls.ca_file,
                             "CA file to verify the server (default: system CAs)"));
  t.push_back(app.add_flag("--tls-insecure", tls.insecure,
                           "Do not verify the server (the report says so)"));
  t.push_back(
      app.add_option("--tls-server-name", tls.server_name, "Name to verify (default: the host)"));
  for (CLI::Option* opt : t) opt->group(kTlsGroup);
}

}  // namespace

void add_client_options(CLI::App& app, ClientOptions& o, RawClient& raw) {
  app.add_option("--buf,-b", raw.buf,
                 "Buffer size(s) for both sides, e.g. 16k or 1k,4k,16k; 'adaptive' follows the "
                 "live connection count (--budget)");
  for_each_option_block(o, [&](const char*, const char* group, auto& block) {
    add_described(app, block, raw.described, group);
  });
  app.add_option("--cpus", raw.cpus,
                 "Pin the data phase: SENDER[,RECEIVER] CPU numbers (one: both sides on it)");
  raw.auth_token =
      app.add_option("--auth-token", o.auth_token,
                     "Shared token the server requires (default: $IOBENCH_AUTH_TOKEN)");
  raw.queue_depth = app.get_option("--qd");
  app.add_option("--send-buf", raw.send_buf, "Sender buffer size(s), overrides --buf");
  app.add_option("--recv-buf", raw.recv_buf, "Receiver buffer size(s), overrides --buf");
  add_payload_options(app, o.payload, raw, false);
  app.add_option("--repeat", raw.repeat,
                 "Measured runs per buffer size (default 1), or auto: until CPU per GiB is known "
                 "to --target-ci");
  app.add_option("--max-repeat", raw.max_repeat, "--repeat auto: at most this many (default 30)");
  app.add_option("--target-ci", raw.target_ci,
                 "--repeat auto: the 95% interval of each side's median CPU per GiB, +-PCT of it "
                 "(default 2%)");
  app.add_option("--json", o.json_path, "Write the JSON report to FILE ('-' = stdout)");
  app.add_option("--csv", o.csv_path, "Write CSV rows to FILE ('-' = stdout)");
  app.add_flag("--quiet,-q", o.quiet, "Print no table");
  raw.verbose = app.add_flag("--verbose", o.verbose, "Log server lines too (loopback)");
  add_tls_options(app, o.tls, raw);
  // Every option of the TLS group, the described blocks' too, is refused without --proto tls.
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

}  // namespace

Status parse_cache_max(const std::string& text, uint64_t& max) {
  if (text.empty()) return {};
  auto v = parse_size(text, "--cache-max", 0, uint64_t{1} << 50);
  if (!v) return std::unexpected(v.error());
  max = *v;
  return {};
}

Status validate_payload(PayloadSpec& p, const RawPayload& raw) {
  if (auto st = parse_described(p, raw.described); !st) return st;
  if (auto st = check_fields(p, true); !st) return st;
  return parse_cache_max(raw.cache_max, p.cache_max);
}

Status resolve_token(std::string& token) {
  if (token.empty())
    if (const char* env = std::getenv("IOBENCH_AUTH_TOKEN")) token = env;
  if (token.size() > 256)
    return fail(fmt::format("--auth-token of {} bytes: at most 256", token.size()));
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
  if (auto st = resolve_token(o.auth_token); !st) return st;
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

  if (auto st = parse_cache_max(raw.cache_max, o.payload.cache_max); !st) return st;
  if (auto st = parse_repeat(o, raw); !st) return st;
  if (!o.connect.empty() && o.reverse && !o.payload.file.empty())
    return fail(fmt::format(
        "--payload '{}' with --reverse needs the server to send a local file: only in loopback",
        o.payload.file));
  if (auto st = validate_source_window(o); !st) return st;
  if (o.json_path == "-" && o.csv_path == "-")
    return fail("--json - and --csv - cannot both write to stdout");
  return validate_write_pattern(o);
}

}  // namespace iobench
