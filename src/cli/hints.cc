#include "cli/hints.h"

#include <fmt/format.h>

#include <string_view>

namespace iobench {
namespace {

struct Habit {
  std::string_view flag;
  std::string_view hint;
};

// iperf3's flags that mean something else, or nothing, to iobench: the iobench spelling.
constexpr Habit kHabits[] = {
    {"-c", "iperf3's -c HOST is `iobench client --connect HOST:PORT` (the server: `iobench "
           "server`)"},
    {"-s", "iperf3's -s is `iobench server [--listen ADDR:PORT]`"},
    {"-l", "iperf3's -l SIZE is --buf SIZE (both sides; --send-buf/--recv-buf for one)"},
    {"-P", "iperf3's -P N is --conns N"},
    {"-A", "iperf3's -A CPU is --cpus SENDER[,RECEIVER]"},
    {"-p", "iperf3's -p PORT: `iobench server --listen ADDR:PORT`, `iobench client --connect "
           "HOST:PORT`"},
    {"-w", "iperf3's -w SIZE is --sndbuf SIZE / --rcvbuf SIZE"},
    {"-J", "iperf3's -J is --json - (or --json FILE)"},
    {"-u", "iobench measures TCP and TLS streams (--proto tcp|tls); there is no UDP mode"},
};

bool known(const CLI::App& app, std::string_view flag) {
  return app.get_option_no_throw(std::string(flag)) != nullptr;
}

// How many times argv names `opt` (as -x, --long or --long=value).
int times_given(const CLI::Option& opt, int argc, const char* const* argv) {
  int n = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    for (const std::string& l : opt.get_lnames())
      if (a == "--" + l || a.starts_with("--" + l + "=")) ++n;
    for (const std::string& s : opt.get_snames())
      if (a == "-" + s) ++n;
  }
  return n;
}

}  // namespace

std::optional<std::string> explain_parse_error(const CLI::App& app, int argc,
                                               const char* const* argv, const CLI::Error& e) {
  for (int i = 1; i < argc; ++i) {
    for (const Habit& h : kHabits)
      if (argv[i] == h.flag && !known(app, h.flag)) return std::string(h.hint);
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) == nullptr) return std::nullopt;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_expected_max() != 1) continue;
    if (const int n = times_given(*opt, argc, argv); n > 1)
      return fmt::format(
          "{} given {} times: give it once (several sizes are one comma-separated list, e.g. "
          "--buf 1k,16k)",
          opt->get_name(), n);
  }
  return std::nullopt;
}

}  // namespace iobench
