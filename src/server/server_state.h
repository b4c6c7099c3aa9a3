// What the server's session threads share: the last payload built, and the groups of --conns
// runs in progress.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config/server_options.h"
#include "payload/window_cache.h"
#include "proto/messages.h"
#include "util/escape.h"
#include "util/memory_budget.h"
#include "server/client_shares.h"
#include "server/payload_cache.h"
#include "server/preauth.h"
#include "server/session_deadline.h"
#include "session/group.h"
#include "util/result.h"

namespace iobench {

// The groups of --conns runs in progress, by the id the client drew for the run.
class GroupTable {
 public:
  // The group for this HELLO, created by its first connection; a HELLO that disagrees with the
  // group's first about the run's shape is refused.
  Result<std::shared_ptr<GroupSide>> get(const proto::Hello& h, uint64_t fixed_buf,
                                         bool server_sends, double idle_s);
  size_t size();  // groups held (the tests)

 private:
  struct Entry {
    proto::Hello hello;
    std::shared_ptr<GroupSide> side;
  };
  std::mutex mu_;
  std::map<uint64_t, Entry> groups_;
};

// The lines a client's authenticated sessions may write when they fail or are refused: at most
// kLines a client (client_key) in each kWindowS, then one line saying how many were not
// written. Before #88 an authenticated client's failures each wrote a line echoing up to 1 KiB
// of its own text (98 MB of log in 21 s). A session that ends well always writes its line.
class ClientLogLimit {
 public:
  static constexpr uint32_t kLines = 20;
  static constexpr double kWindowS = 10;
  // Whether this client may write a failure line now; `summaries` gets the lines to write first,
  // for each client whose window ended with lines unwritten.
  bool may_log(const std::string& client, std::vector<std::string>& summaries);

 private:
  struct Window {
    int64_t start_ns = 0;
    uint32_t lines = 0;
    uint64_t unlogged = 0;
  };
  std::mutex mu_;
  std::map<std::string, Window> windows_;
};

struct ServerState {
  // --memory-budget: every byte a session makes the server hold (session_memory.h).
  MemoryBudget memory;
  // Payloads, built at most --max-builds at once, each within --max-build-time.
  PayloadCache payloads;

  explicit ServerState(const PayloadCache::Limits& builds = {}) : payloads(memory, builds) {}
  // --source-window spans, each mapped once for the sessions streaming it and counted in
  // `memory` until the last of them ends.
  WindowCache windows{&memory, false};
  SessionDeadlines deadlines;  // --min-rate: each session's whole-time bound
  ClientShares shares;         // no client past its share of slots or memory while others wait
  ClientLogLimit failure_lines;  // each client's failed and refused sessions' lines
  GroupTable groups;
  // The pre-auth deadline and cap; none when clients are served one at a time on the accepting
  // thread (loopback: its own client only, and the process must stay single-threaded).
  std::unique_ptr<PreAuthGate> preauth;
  std::atomic<uint32_t> sessions{0};       // handler threads alive
  std::atomic<uint32_t> authenticated{0};  // sessions past authorise(): what --max-conns bounds
  // Sessions past their data phase whose handler has not returned: what a counting session
  // lets finish (a connection before its HELLO is not one, however long it stays silent, nor
  // a session still streaming, however long it takes).
  std::atomic<uint32_t> ending{0};
  // Handler threads that ended after a stop signal (each counted before it leaves `sessions`).
  std::atomic<uint32_t> ended_stopping{0};
  // Handlers that ended on an exception (contained: their session closed, the server served on).
  std::atomic<uint64_t> failed_handlers{0};
};

struct ServerConfig;
class Fd;

// One line of the server's log: "[time] PEER TEXT" (nothing when cfg.log is off).
void log_line(const ServerConfig& cfg, const std::string& peer, const std::string& text);
// The same line whatever --quiet says: what the server refused, counted (the pre-auth gate).
void log_line_always(const std::string& peer, const std::string& text);
// The gate's summary of what it cut and refused, when due (PreAuthGate::summary_due): under
// --quiet, or when some events went unlogged one by one.
void log_preauth_summary(const ServerConfig& cfg, ServerState& state);
// Serves one accepted client: accept -> authorise -> plan -> run -> log (server.cc).
// `ticket`: the connection's place at the pre-auth gate (empty without a gate); `client`: what
// the gate and the fair shares count it as (client_key, read once at the accept).
void handle_client(Fd fd, PreAuthGate::Ticket ticket, const std::string& peer,
                   const std::string& client, const ServerConfig& cfg, ServerState& state);

}  // namespace iobench
