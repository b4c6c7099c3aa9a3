// The server's log: one line per event, "[time] PEER TEXT". What a client sent (a HELLO's
// strings, the first bytes of a stranger) reaches the text through error messages: every byte
// that could end a line or steer a terminal is escaped here, so no client can forge a line.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

#include "server/server.h"
#include "probe/probe.h"
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

bool ClientLogLimit::may_log(const std::string& client, std::vector<std::string>& summaries) {
  const int64_t now = monotonic_ns();
  const auto window_ns = static_cast<int64_t>(kWindowS * 1e9);
  const auto summary = [](const std::string& who, const Window& w) {
    return fmt::format("{} failed or refused session line(s) of {} not written in {} s (at most "
                       "{} a client in {} s)",
                       w.unlogged, who, kWindowS, kLines, kWindowS);
  };
  std::lock_guard lock(mu_);
  // Windows that ended are said (when lines went unwritten) and forgotten, so the map holds
  // the clients active in the last window only.
  std::erase_if(windows_, [&](const auto& w) {
    if (w.first == client || now - w.second.start_ns <= window_ns) return false;
    if (w.second.unlogged) summaries.push_back(summary(w.first, w.second));
    return true;
  });
  Window& w = windows_[client];
  if (now - w.start_ns > window_ns) {
    if (w.unlogged) summaries.push_back(summary(client, w));
    w = Window{now, 0, 0};
  }
  if (w.lines < kLines) {
    ++w.lines;
    return true;
  }
  ++w.unlogged;
  return false;
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
