// One accepted connection on the server's side, and its admission: the transport the client
// chose, its HELLO, the token's proof and the request's bounds, all under the pre-auth gate,
// then a session slot (server_admit.cc). What follows admission is server.cc's.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "net/stream.h"
#include "proto/messages.h"
#include "server/server.h"
#include "server/server_state.h"
#include "server/session_slot.h"
#include "session/session.h"

namespace iobench {

// One accepted connection: where log lines and refusals go.
struct ServerSession {
  const ServerConfig& cfg;
  std::string peer;
  std::string client;  // what fair shares count it as (client_key)
  int fd;
  std::unique_ptr<Stream> stream;
  int64_t hello_deadline_ns = 0;  // the HELLO's, and the AUTH's: --handshake-timeout from greet
  ClientLogLimit* failure_lines = nullptr;  // set once authenticated: its failures are limited
  void log(const std::string& text) const {
    // A session that ended well, or one a stopping server aborted, always has its line.
    if (failure_lines && !text.starts_with("ok:") && !text.starts_with("aborted:")) {
      std::vector<std::string> summaries;
      const bool mine = failure_lines->may_log(client, summaries);
      for (const std::string& line : summaries) log_line(cfg, "-", line);
      if (!mine) return;
    }
    log_line(cfg, peer, text);
  }
  // Logged unless `logged` is false (the gate's limit: the summary counts it); sent when the
  // stream is up.
  void reject(const std::string& why, bool logged = true) {
    if (logged) log("rejected: " + why);
    if (!stream) return;
    (void)send_message(*stream, proto::ErrorMsg{why});
    stream->close();
  }
};

// An authorised client: its HELLO and its session slot.
struct Admitted {
  proto::Hello hello;
  SessionSlot slot;
};

// Accept and authorise, under the gate: the HELLO of an authorised client and its slot, or
// nothing (one line logged: the refusal, or the gate's cut whatever the cut made the reads
// see; the reason sent when the stream is up; the gate's summary when due).
std::optional<Admitted> admit(ServerSession& s, PreAuthGate::Ticket& ticket, ServerState& state);

}  // namespace iobench
