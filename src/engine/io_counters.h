// What an engine counts as it moves bytes: calls, waits, zero-copy and uring figures. Described
// once, so each side's RESULT carries the engine's counters whole (proto/fields.h).
#pragma once

#include <cstdint>
#include <string>

#include "util/fields.h"

namespace iobench {

// --zerocopy (sender): sends issued zero-copy, completion notifications read, and sends the
// kernel reported it copied after all.
struct ZerocopyCounts {
  uint64_t sends = 0;
  uint64_t notifications = 0;
  uint64_t copied = 0;
};

// uring: submission entries submitted, completion entries reaped.
struct UringCounts {
  uint64_t sqes = 0;
  uint64_t cqes = 0;
};

// What the engine itself did; kept current while it runs, so a failure still reports progress.
// Each side's RESULT carries it whole (its fields at the RESULT's level in the JSON).
struct IoCounters {
  uint64_t calls = 0;         // read or write calls issued on the Stream
  uint64_t bytes = 0;         // bytes those calls moved
  uint64_t short_writes = 0;  // writes the kernel accepted only in part
  uint64_t waits = 0;         // readiness waits (epoll_wait)
  uint64_t would_block = 0;   // calls that found nothing to do (EAGAIN)
  ZerocopyCounts zc;
  UringCounts uring;
  // How the engine ran where it had a choice, e.g. "recv: multishot, provided ring 8 x 16K".
  std::string path;
};

template <typename Self, typename Visit>
  requires DescribesAs<Self, ZerocopyCounts>
void describe(Self& z, Visit&& visit) {
  visit(Field{.name = "sends", .summed = true}, z.sends);
  visit(Field{.name = "notifications", .summed = true}, z.notifications);
  visit(Field{.name = "copied", .summed = true}, z.copied);
}

template <typename Self, typename Visit>
  requires DescribesAs<Self, UringCounts>
void describe(Self& u, Visit&& visit) {
  visit(Field{.name = "sqes", .summed = true}, u.sqes);
  visit(Field{.name = "cqes", .summed = true}, u.cqes);
}

// The names are the JSON's (and the CSV's columns) since before this was a block.
template <typename Self, typename Visit>
  requires DescribesAs<Self, IoCounters>
void describe(Self& io, Visit&& visit) {
  visit(Field{.name = "bytes", .summed = true}, io.bytes);
  visit(Field{.name = "io_calls", .summed = true}, io.calls);
  visit(Field{.name = "short_writes", .summed = true}, io.short_writes);
  visit(Field{.name = "engine_waits", .summed = true}, io.waits);
  visit(Field{.name = "engine_would_block", .summed = true}, io.would_block);
  visit(Field{"zerocopy"}, io.zc);
  visit(Field{"uring"}, io.uring);
  visit(Field{"engine_path"}, io.path);
}

}  // namespace iobench
