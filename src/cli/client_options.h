// The client's options: which blocks it declares (described_options.h) and how they are
// checked against each other. Internal to src/cli (options.cc assembles the commands).
#pragma once

#include <CLI/CLI.hpp>
#include <string_view>
#include <string>
#include <vector>

#include "cli/described_options.h"
#include "config/options.h"
#include "util/result.h"

namespace iobench {

// The client's options that are lists or words, as typed: validate_client turns them into
// ClientOptions' bufs, CPUs and repeat count (the error names the value). Its described blocks'
// text (enum names, sizes, durations) is in TypedText's map.
struct RawClient : TypedText {
  std::string buf, send_buf, recv_buf;
  std::string cpus;
  std::string repeat = "1", max_repeat, target_ci;
  std::vector<CLI::Option*> tls_options;
  CLI::Option* queue_depth = nullptr;
  CLI::Option* auth_token = nullptr;
  CLI::Option* verbose = nullptr;
};

template <typename Self, typename Visit>
  requires DescribesAs<Self, RawClient>
void describe(Self& r, Visit&& visit) {
  visit(Field{.name = "buf",
              .flag = "--buf",
              .help = "Buffer size(s) for both sides, e.g. 16k or 1k,4k,16k; 'adaptive' follows "
                      "the live connection count (--budget) (default 16K)",
              .short_flag = "-b",
              .value_name = "SIZES"},
        r.buf);
  visit(Field{.name = "send_buf",
              .flag = "--send-buf",
              .help = "Sender buffer size(s), overrides --buf",
              .value_name = "SIZES"},
        r.send_buf);
  visit(Field{.name = "recv_buf",
              .flag = "--recv-buf",
              .help = "Receiver buffer size(s), overrides --buf",
              .value_name = "SIZES"},
        r.recv_buf);
  visit(Field{.name = "cpus",
              .flag = "--cpus",
              .help = "Pin the data phase: SENDER[,RECEIVER] CPU numbers (one: both sides on it)",
              .value_name = "CPUS"},
        r.cpus);
  visit(Field{.name = "repeat",
              .flag = "--repeat",
              .help = "Measured runs per buffer size (default 1), or auto: until CPU per GiB is "
                      "known to --target-ci",
              .value_name = "N|auto"},
        r.repeat);
  visit(Field{.name = "max_repeat",
              .flag = "--max-repeat",
              .help = "--repeat auto: at most this many (default 30)",
              .value_name = "N"},
        r.max_repeat);
  visit(Field{.name = "target_ci",
              .flag = "--target-ci",
              .help = "--repeat auto: the 95% interval of each side's median CPU per GiB, +-PCT "
                      "of it (default 2%)",
              .value_name = "PCT"},
        r.target_ci);
}

void add_client_options(CLI::App& app, ClientOptions& o, RawClient& raw);
// --conns, --stagger, --fanout, --source-rate, --bytes-spread and the adaptive limits
// (conn_options.cc, declared with the "run" block): checked against each other and the buffers.
Status validate_conns(ClientOptions& o, const RawClient& raw);
// --auth-token, else the environment; at most 256 bytes, at least kMinTokenBytes unless
// `allow_short` (--allow-short-token); never empty where given (`given`: on the command line).
Status resolve_token(std::string& token, bool allow_short, bool given);
Status validate_client(ClientOptions& o, RawClient& raw);

}  // namespace iobench
