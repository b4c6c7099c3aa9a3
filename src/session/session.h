// One side of one session: the control exchange around a data phase, shared by client and
// server so both sides measure themselves the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "engine/engine.h"
#include "net/socket.h"
#include "net/stream.h"
#include "proto/messages.h"
#include "util/result.h"

namespace iobench {

Status send_message(Stream& s, const proto::Message& m);
// Reads one frame; the header is validated before the body is read. `deadline_ns`
// (CLOCK_MONOTONIC, 0: none) bounds the whole message, so a peer trickling bytes just inside the
// socket's per-read timeout still cannot hold the session.
Result<proto::Message> recv_message(Stream& s, int64_t deadline_ns = 0);
// The same, for a frame of `type` (or, when `or_error`, an ERROR) of at most `max_body` bytes:
// anything else is refused on its header, before its body is read or allocated.
Result<proto::Message> recv_expected(Stream& s, proto::Type type, uint32_t max_body,
                                     int64_t deadline_ns = 0, bool or_error = false);

struct DataPhase {
  bool is_sender = true;
  uint64_t bytes = 0;
  uint64_t buf_bytes = 0;
  bool decompress = false;             // receiver only
  uint64_t max_decode_ratio = 0;       // receiver: Verifier's bound (0: none; a server's own)
  // --source-window in use (0: none): the sender's payload is the window over and over, sent in
  // passes until `bytes` are out; the receiver checks the stream window by window.
  uint64_t window = 0;
  std::span<const std::byte> payload;  // sender only
  uint64_t payload_xxh3 = 0;           // sender only
  uint64_t payload_decoded_bytes = 0;  // sender only
  bool kernel_syscalls = true;         // perf_event tracepoint counts where allowed
  // One connection of several (--conns): CPU of this thread only, and the syscall counters are
  // the run's, not this connection's (kernel_syscalls is then false).
  bool thread_cpu = false;
  int cpu = -1;  // --cpus: the CPU the data phase runs on (-1: the thread's own set)
  // Set: the buffer size follows this source (adaptive mode, or a fixed size in a group run).
  BufferSizeSource* follow = nullptr;
  // Set (a sender): each write's size follows this --write-pattern, drawn with pattern_seed.
  std::string write_pattern;
  uint64_t pattern_seed = 1;
  // Called as soon as the engine returns, before the result exchange: the connection is no
  // longer live.
  std::function<void()> data_done;
};

struct SessionOutcome {
  proto::SideResult mine;
  std::optional<proto::SideResult> peer;  // absent when the exchange broke down
  std::string error;                      // empty on success (on this side)
};

// Runs the data phase and the result exchange. Wall and CPU are sampled around the data phase
// only: the sender's clock stops when the receiver's RESULT (the end-to-end acknowledgement)
// arrives; the receiver's when its last byte has been consumed.
SessionOutcome run_data_phase(Stream& s, Engine& engine, const DataPhase& d,
                              proto::SideResult base);

// This side's transport as the report shows it: what the kernel granted on the socket and, for
// TLS, what the handshake negotiated. run_data_phase fills in the rest.
proto::SideResult describe_transport(const Stream& s);

// Cross-checks sender and receiver figures: byte counts, checksum, decoded size. The error
// names both values.
Status verify_outcome(const proto::SideResult& sender, const proto::SideResult& receiver);

}  // namespace iobench
