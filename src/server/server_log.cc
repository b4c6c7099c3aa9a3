// The server's log: one line per event, "[time] PEER TEXT". What a client sent (a HELLO's
// strings, the first bytes of a stranger) reaches the text through error messages: every byte
// that could end a line or steer a terminal is escaped here, so no client can forge a line.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

#include "server/server.h"
#include "util/escape.h"
#include "server/server_state.h"

namespace iobench {
namespace {

std::string timestamp() {
  const auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

}  // namespace

void log_line(const ServerConfig& cfg, const std::string& peer, const std::string& text) {
  if (cfg.log) log_line_always(peer, text);
}

void log_preauth_summary(const ServerConfig& cfg, ServerState& state) {
  if (!state.preauth) return;
  if (auto line = state.preauth->summary_due(!cfg.log)) log_line_always("-", *line);
}

void log_line_always(const std::string& peer, const std::string& text) {
  fmt::print("[{}] {} {}\n", timestamp(), escape_for_log(peer), escape_for_log(text));
  std::fflush(stdout);
}

}  // namespace iobench
