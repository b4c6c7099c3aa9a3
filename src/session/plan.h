// One side's part in a session, and the lifecycle every session runs on it.
//
// The plan is derived from the HELLO by one function: the client builds it from the HELLO it
// sends, the server from the HELLO it received, so the two sides cannot set a data phase up
// differently. The lifecycle is shared by a lone client, each connection of a group and the
// server: prepare_side (TLS I/O model and buffer; the sender's payload handed to the engine)
// before the ACK, then run_side (the data phase and the result exchange, as a member of the
// group's live count when there is one, and the cross-check of both sides' figures).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "net/socket.h"
#include "net/stream.h"
#include "payload/payload.h"
#include "payload/window.h"
#include "payload/window_cache.h"
#include "proto/messages.h"
#include "session/group.h"
#include "session/session.h"
#include "tls/options.h"

namespace iobench {

// What a side chose for itself: the HELLO carries the server's choices; the client's come from
// its own options.
struct SideChoice {
  EngineKind engine = EngineKind::kBlocking;
  tls::TlsIo tls_io = tls::TlsIo::kSocket;  // the TLS I/O model this side runs
  int cpu = -1;                             // --cpus: this side's CPU (-1: anywhere)
  double timeout_s = 30;                    // no progress for this long ends the data phase
  // A client that sends: each write's size follows this --write-pattern (empty: the buffer's).
  std::string write_pattern;
  uint64_t pattern_seed = 1;
};

struct SidePlan {
  bool grouped = false;  // one connection of a --conns or --buf adaptive run
  EngineKind engine = EngineKind::kBlocking;
  EngineOptions engine_options;
  SocketOptions socket;
  tls::TlsIo tls_io = tls::TlsIo::kSocket;
  tls::TlsRecords tls_records;
  DataPhase data;  // the payload is added by prepare_side
  // The hot source prepare_side mapped (--source-window); data.payload points into it.
  std::shared_ptr<const RepeatedWindow> window;
};

enum class Side { kClient, kServer };

// The server's choices as its HELLO states them (validated: validate_hello).
SideChoice server_choice(const proto::Hello& h, double idle_timeout_s);
SidePlan plan_side(const proto::Hello& h, Side side, const SideChoice& mine);

// Before the ACK, outside the clocks: the TLS stream's I/O model, and for a sender the payload
// prefix it streams (handed to the engine, which may register it).
Status prepare_side(SidePlan& plan, Stream& s, Engine& engine, const Payload* payload,
                    WindowCache& windows);

// What a side's session ended with: the data phase's outcome and, when both sides' figures
// arrived, their cross-check (empty: they agree).
struct SideOutcome {
  SessionOutcome session;
  std::string mismatch;
  bool ok() const { return session.error.empty() && session.peer && mismatch.empty(); }
};

// The data phase and the result exchange on `data_stream` (`transport` is described for the
// report: it differs from the data stream when a test wraps it). In a group, the connection is
// a member of the live count while its data moves, and the group learns how it ended.
SideOutcome run_side(Stream& data_stream, const Stream& transport, Engine& engine,
                     const SidePlan& plan, GroupSide* group, uint32_t conn_index);

}  // namespace iobench
