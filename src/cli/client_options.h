// The client's and the payload command's options: how they are declared on the command line
// and checked. Internal to src/cli (options.cc assembles the commands).
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string_view>
#include <string>
#include <vector>

#include "config/options.h"
#include "util/result.h"

namespace iobench {

// Raw strings as typed; sizes are parsed by our own parser so errors name the value and range.
struct RawPayload {
  std::string cache_max;
  // Fields of the described blocks typed as text (enum names, sizes, durations), by flag.
  std::map<std::string, std::string> described;
  bool typed(std::string_view flag) const {
    const auto it = described.find(std::string(flag));
    return it != described.end() && !it->second.empty();
  }
};

// The client's text: its described blocks' (in `described`, RawPayload's) and the rest.
struct RawClient : RawPayload {
  std::string buf, send_buf, recv_buf;
  std::string cpus;
  // Named values, turned into their enums by validate_client (the error names the value).
  std::string tls_io = "auto", ktls = "auto", tls_version = "1.3";
  std::vector<CLI::Option*> tls_options;
  std::string repeat = "1", max_repeat, target_ci;
  CLI::Option* queue_depth = nullptr;
  CLI::Option* auth_token = nullptr;
  CLI::Option* verbose = nullptr;
};

// CLI11 reads "-1" into an unsigned option as 2^64-1: refuse a sign instead.
CLI::Option* unsigned_option(CLI::Option* opt);
void add_cache_options(CLI::App& app, std::string& dir, std::string& max);
// --payload and the cache; `described`: PayloadSpec's described fields too (`iobench payload`;
// the client declares them with its other blocks).
void add_payload_options(CLI::App& app, PayloadSpec& p, RawPayload& raw, bool described);
void add_client_options(CLI::App& app, ClientOptions& o, RawClient& raw);
// --conns, --stagger, --fanout, --source-rate, --bytes-spread and the adaptive limits
// (conn_options.cc, declared with the "run" block): checked against each other and the buffers.
Status validate_conns(ClientOptions& o, const RawClient& raw);
Status parse_cache_max(const std::string& text, uint64_t& max);
Status validate_payload(PayloadSpec& p, const RawPayload& raw);
// --auth-token, else the environment; bounded so it fits a HELLO field.
Status resolve_token(std::string& token);
Status validate_client(ClientOptions& o, RawClient& raw);

}  // namespace iobench
