// What one session asks the server to hold, counted from its HELLO before anything is
// allocated, and taken from the server's --memory-budget (memory_budget.h); --session-memory
// bounds a session's own buffers (--qd x --buf above all) whatever the budget has free.
#pragma once

#include <cstdint>
#include <string>

#include "config/server_options.h"
#include "proto/messages.h"
#include "util/memory_budget.h"
#include "session/plan.h"
#include "util/result.h"

namespace iobench {

struct SessionMemory {
  uint64_t buffers = 0;  // the engine's and stream's buffers: --session-memory bounds them
  uint64_t copies = 0;   // a --fixed-buffers copy of the payload (--max-bytes bounds it)
  uint64_t frames = 0;   // the largest control frame it makes the server read, one at a time
  uint64_t decoder = 0;  // a decompressing receiver's zstd decoder (its window bounded)
  std::string what;      // how the buffers add up, for a refusal
  uint64_t total() const { return buffers + copies + frames + decoder; }
};

// This side's session as planned from `h` (the payload, shared between sessions, is counted
// apart by the payload cache).
SessionMemory session_memory(const SidePlan& plan, const proto::Hello& h);

// The session's memory taken from `budget`, or why not: past --session-memory, or the budget
// full with what the sessions hold.
Result<MemoryBudget::Hold> take_session_memory(const SessionMemory& m, const ServerOptions& o,
                                               MemoryBudget& budget);

}  // namespace iobench
