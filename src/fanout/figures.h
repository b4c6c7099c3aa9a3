// --fanout's figures: each replica as the writer saw it, and the writer's own.
#pragma once

#include <cstdint>
#include <string>

#include "config/options.h"
#include "probe/probe.h"

namespace iobench {

// --fanout: one replica as the writer saw it. Times are since the writer's first chunk.
struct FanoutReplica {
  int64_t joined_ns = 0;     // its first chunk
  int64_t done_ns = 0;       // its last byte written (or when it was dropped)
  uint64_t lag_max_bytes = 0;  // the most it was behind the replica furthest ahead, at a chunk
  uint64_t stalls = 0;       // event-loop: writes that would block; connset: writes over 1 ms
  int64_t stall_ns = 0;      // event-loop: time it kept the chunk open; connset: in its writes
  bool dropped = false;      // the writer gave up on it (no progress for --timeout)
  std::string drop_reason;
};

// --fanout: the writer thread's own figures (its CPU is exact: CLOCK_THREAD_CPUTIME_ID).
struct FanoutWriterFigures {
  FanoutShape shape = FanoutShape::kOff;
  std::string engine;             // how it waits: "blocking" (connset), "epoll", "uring"
  uint32_t replicas = 0;          // that joined
  uint32_t dropped = 0;
  ProbeDelta probe;               // first chunk to the last replica done, this thread's CPU
  uint64_t chunks = 0;            // rounds: one chunk to every live replica
  uint64_t writes = 0;            // write calls, all replicas
  uint64_t waits = 0;             // epoll_wait / io_uring waits
  uint64_t delivered_bytes = 0;   // the sum over replicas
  uint64_t peak_chunk_bytes = 0;  // the largest chunk written
  uint32_t peak_live = 0;
  uint64_t source_rate = 0;       // --source-rate (0: unbounded)
  int64_t source_wait_ns = 0;     // the writer waited this long for its source
};

}  // namespace iobench
