/* The adaptive chunk rule for one writer streaming a full sync to N replicas, as plain C with no
 * iobench types, so a server can take this header as it is (docs/connections.md says why, and
 * the Valkey patch of docs/replication.md uses it).
 *
 * One writer pays each chunk's fixed cost once per replica, and the chunk is one buffer that all
 * replicas are written from: its memory does not grow with N. So the chunk starts at the size
 * that is enough for one replica (`min_chunk`, the one-replica knee) and doubles with each
 * doubling of the live replicas, up to `max_chunk` (a stated maximum: the socket send buffer a
 * replica's write may fill, 64K by default): 1 replica min, 2 twice it, 3-4 four times ...
 * It grows at once when replicas join and holds when they leave (`prev_chunk`: the chunk in use,
 * 0 at the start of a sync): a larger chunk costs the writer no more CPU per byte and no more
 * memory than it already holds, so a sync whose replicas finish one by one keeps its chunk. */
#ifndef IOBENCH_ADAPTIVE_CHUNK_RULE_H
#define IOBENCH_ADAPTIVE_CHUNK_RULE_H

#include <stddef.h>

static inline size_t replication_chunk_size(unsigned live_replicas, size_t prev_chunk,
                                            size_t min_chunk, size_t max_chunk) {
  size_t target = min_chunk;
  unsigned covered = 1;
  while (covered < live_replicas && target < max_chunk) {
    target *= 2;
    covered *= 2;
  }
  if (target > max_chunk) target = max_chunk;
  if (prev_chunk > target && prev_chunk <= max_chunk) target = prev_chunk; /* holds */
  if (target < min_chunk) target = min_chunk;
  return target;
}

#endif /* IOBENCH_ADAPTIVE_CHUNK_RULE_H */
