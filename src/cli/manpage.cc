#include "cli/manpage.h"

#include <fmt/format.h>

#include <array>
#include <initializer_list>
#include <vector>

namespace iobench {
namespace {

struct Group {
  const char* name;
  std::initializer_list<const char*> flags;
};

// The client's options by what a user is deciding when they reach for them (the fields of the
// described option blocks join their block's group as they are declared: for_each_option_block).
const std::array kClientGroups{
    Group{"Sizes",
          {"--buf", "--send-buf", "--recv-buf", "--bytes", "--budget", "--buf-min", "--buf-max",
           "--write-pattern"}},
    Group{"Transport",
          {"--proto", "--reverse", "--auth-token", "--timeout", "--hello-timeout"}},
    Group{"Engines",
          {"--engine", "--send-engine", "--recv-engine"}},
    Group{"Connections", {"--conns", "--stagger", "--bytes-spread", "--fanout", "--source-rate"}},
    Group{"Payload",
          {"--seed", "--zstd-level", "--payload", "--cache-dir", "--cache-max", "--decompress",
           "--source-window"}},
    Group{"Measurement", {"--repeat", "--max-repeat", "--target-ci", "--warmup", "--syscalls", "--cpus"}},
    Group{"Output", {"--json", "--csv", "--quiet", "--verbose"}},
};

// roff: a backslash and a hyphen-minus escaped; a line may not start with '.' or '\''.
std::string roff(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\')
      out += "\\e";
    else if (c == '-')
      out += "\\-";
    else
      out += c;
  }
  if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out.insert(0, "\\&");
  return out;
}

// The option's names as typed ("-b, --buf SIZE") and its description.
void render_option(std::string& out, const CLI::Option& opt) {
  std::string names;
  for (const std::string& s : opt.get_snames()) names += (names.empty() ? "-" : ", -") + s;
  for (const std::string& l : opt.get_lnames()) names += (names.empty() ? "--" : ", --") + l;
  const std::string value = opt.get_type_size() == 0 ? "" : " " + opt.get_type_name();
  out += fmt::format(".TP\n.B {}{}\n{}\n", roff(names), roff(value), roff(opt.get_description()));
}

// The options of `app` group by group, in the order they were declared.
void render_options(std::string& out, const CLI::App& app, const char* heading) {
  std::vector<std::string> groups;
  for (const CLI::Option* opt : app.get_options()) {
    const std::string& g = opt->get_group();
    if (!g.empty() && std::find(groups.begin(), groups.end(), g) == groups.end())
      groups.push_back(g);
  }
  for (const std::string& g : groups) {
    out += fmt::format("{} {}\n", heading, roff(g));
    for (const CLI::Option* opt : app.get_options())
      if (opt->get_group() == g) render_option(out, *opt);
  }
}

}  // namespace

void group_client_options(CLI::App& app) {
  for (const Group& g : kClientGroups)
    for (const char* flag : g.flags)
      if (CLI::Option* opt = app.get_option_no_throw(flag)) opt->group(g.name);
}

std::string render_manpage(const CLI::App& app, const std::string& version) {
  std::string out = fmt::format(
      ".TH IOBENCH 1 \"\" \"iobench {}\" \"User Commands\"\n"
      ".SH NAME\niobench \\- network I/O buffer-size benchmark (TCP and TLS, replication "
      "payload)\n"
      ".SH SYNOPSIS\n.B iobench\n[\\fIOPTIONS\\fR]\n.br\n.B iobench client \\-\\-connect "
      "\\fIHOST:PORT\\fR [\\fIOPTIONS\\fR]\n.br\n.B iobench server\n[\\fIOPTIONS\\fR]\n.br\n"
      ".B iobench payload\n[\\fIOPTIONS\\fR]\n.br\n.B iobench doctor\n.br\n"
      ".B iobench compare\n\\fIBASE\\fR \\fINEW\\fR\n.br\n"
      ".B iobench watch \\-\\-pid \\fIPID\\fR [\\fIOPTIONS\\fR]\n"
      ".SH DESCRIPTION\n"
      "Without a subcommand, iobench streams the payload over loopback to a private server it "
      "starts, once per buffer size, and prints both sides' wall time, throughput, CPU and "
      "syscalls.\n",
      version);
  out += ".SH OPTIONS\n";
  render_options(out, app, ".SS");
  out += ".SH COMMANDS\n";
  for (const CLI::App* sub :
       app.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); })) {
    out += fmt::format(".SS {}\n{}\n", roff(sub->get_name()), roff(sub->get_description()));
    if (sub->get_name() == "client") {
      out += "The options of the loopback run, and:\n";
      for (const CLI::Option* opt : sub->get_options())
        if (opt->get_name() == "--connect") render_option(out, *opt);
      continue;
    }
    for (const CLI::Option* opt : sub->get_options())
      if (!opt->get_group().empty() && opt->get_name() != "--help") render_option(out, *opt);
  }
  out +=
      ".SH EXAMPLES\n"
      ".TP\n.B iobench \\-\\-proto tls \\-\\-buf 16k\n16 KiB buffers over TLS, loopback.\n"
      ".TP\n.B iobench \\-\\-buf 1k,4k,16k,64k \\-\\-repeat 5 \\-\\-cpus 0,1\n"
      "A sweep of sizes, five runs each, sender on CPU 0 and receiver on CPU 1.\n"
      ".TP\n.B iobench server \\-\\-listen 0.0.0.0:5210 \\-\\-auth-token T\n"
      "On one host; then on another:\n"
      ".B iobench client \\-\\-connect HOST:5210 \\-\\-auth-token T \\-\\-buf 16k\n"
      ".TP\n.B iobench watch \\-\\-pid $(pidof valkey-server) \\-\\-json sync.json\n"
      "A live primary's syscalls, write sizes per descriptor kind and CPU, with the child it forks "
      "for a full sync, until Ctrl-C.\n"
      ".SH SEE ALSO\niperf3(1), netperf(1), strace(1), perf-stat(1). The README and docs/ "
      "of the source tree say how each figure is measured.\n";
  return out;
}

}  // namespace iobench
