// The engine and placement options of a client run: which engine each side runs, its tuning
// (EngineTuning's field list) and the combinations that make sense, and --cpus.
#pragma once

#include <string>

#include "config/options.h"
#include "util/result.h"

namespace iobench {

// Fills --send-engine/--recv-engine from --engine and checks every engine option against the
// engines and the transport chosen. Every error is one line naming the option.
Status validate_engines(ClientOptions& o);

// --cpus SENDER[,RECEIVER]: CPU numbers; one pins both sides to it. The CPUs of the sides that
// run here must be ones this process may use (a remote server checks its own).
Status parse_cpus(const std::string& text, ClientOptions& o);

// Options the user typed that would change nothing in this run.
struct TypedOptions {
  bool queue_depth = false;
  bool auth_token = false;
  bool stagger = false;
  bool verbose = false;
};

// Refuses an option that has no effect here (--qd without uring, --auth-token in loopback, ...),
// as the engine checks refuse --sqpoll without uring.
Status refuse_no_effect(const ClientOptions& o, const TypedOptions& typed);

// --write-pattern shapes the client's writes: the client must be the sender, on an engine that
// asks for a size at every write, one connection, one row.
Status validate_write_pattern(const ClientOptions& o);

// --fanout: the client writes (no --reverse), with the engine its shape waits on; --source-rate
// only with it.
Status validate_fanout(ClientOptions& o, bool source_rate_typed);

}  // namespace iobench
