// --fanout: one writer thread streams the payload to every replica connection of a run, as a
// primary's full sync does (docs/fanout.md maps both shapes to Valkey's and Redis's code).
//
// Each connection's session runs as any other — connect, HELLO, ACK, then the result exchange,
// on its own thread — but its data phase hands the stream to the writer (the engine from
// engine_for) and waits until the writer has written all of it or dropped the replica. The
// writer works in rounds: each round writes every live replica its next chunk (the chunk size is
// the replica's buffer size, which follows the live count in adaptive mode), and the next round
// starts only when every replica has taken its chunk — a primary's source is paused until then.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "fanout/figures.h"

namespace iobench {

// One replica while the writer owns its stream (internal to the writer and its shapes).
struct FanoutReplicaState {
  uint32_t index = 0;
  Stream* stream = nullptr;
  std::span<const std::byte> data;
  IoBuffer* buf = nullptr;
  IoCounters* io = nullptr;
  uint64_t off = 0;        // bytes written
  uint64_t chunk_end = 0;  // where this round's chunk ends
  bool finished = false;   // all written (status ok) or dropped (status says why)
  bool released = false;   // the writer is done with it (set under the writer's lock)
  Status status;
  int64_t pending_since_ns = 0;  // event-loop: when its chunk found the socket full
  int64_t last_progress_ns = 0;
  FanoutReplica fig;
};

// The writer's counts that the shapes add to.
struct FanoutCounts {
  uint64_t writes = 0;
  uint64_t waits = 0;
  uint64_t peak_chunk_bytes = 0;
};

// How a round is written: connset (blocking writes to each replica in turn) or the event loop.
class FanoutShapeLoop {
 public:
  virtual ~FanoutShapeLoop() = default;
  // Writes each replica of `live` the chunk [off, chunk_end) (set by the writer); on return
  // every one has taken it, finished, or been dropped (finished with an error status).
  virtual void round(std::span<FanoutReplicaState* const> live, FanoutCounts& counts) = 0;
};

std::unique_ptr<FanoutShapeLoop> make_connset_loop(double timeout_s);
Result<std::unique_ptr<FanoutShapeLoop>> make_event_loop(double timeout_s);
Result<std::unique_ptr<FanoutShapeLoop>> make_uring_loop(double timeout_s, uint32_t replicas);

// Ends a replica: the writer gives up on it (no progress, or an error) and closes its socket for
// writing and reading, as a primary frees a replica's client.
// Times in a replica's figures are CLOCK_MONOTONIC while the writer runs; figures() makes them
// relative to the first round.
void drop_replica(FanoutReplicaState& r, const std::string& why);

class FanoutWriter {
 public:
  // `wait_for_all`: the first round waits until every connection has handed its stream over (or
  // left), as a full sync serves the replicas waiting at its start; otherwise (--stagger)
  // replicas join at the next round after they arrive.
  // `source_rate`: the source produces at most this many bytes per second (0: unbounded); a
  // round waits until its furthest chunk has been produced.
  FanoutWriter(FanoutShape shape, EngineKind engine, uint32_t replicas, bool wait_for_all,
               double timeout_s, uint64_t source_rate);
  ~FanoutWriter();
  FanoutWriter(const FanoutWriter&) = delete;
  FanoutWriter& operator=(const FanoutWriter&) = delete;

  // The engine connection `index` sends through.
  std::unique_ptr<Engine> engine_for(uint32_t index);
  // Connection `index` is over, whether or not it handed its stream over. Idempotent.
  void leave(uint32_t index);
  // Waits for the writer thread to end (every connection left). Idempotent.
  void finish();
  // After finish(): the writer's figures and each replica's (absent: never joined).
  FanoutWriterFigures figures() const;
  std::optional<FanoutReplica> replica(uint32_t index) const;

 private:
  friend class FanoutEngine;
  Status hand_over(uint32_t index, Stream& s, std::span<const std::byte> data, IoBuffer& buf,
                   IoCounters& io);
  void run();
  bool adopt_arrivals(std::unique_lock<std::mutex>& lock);
  Result<std::unique_ptr<FanoutShapeLoop>> make_loop() const;
  void start_clock();
  void stop_clock();
  void note_lag();
  void wait_for_source();

  const FanoutShape shape_;
  const EngineKind engine_;
  const uint32_t replicas_;
  const bool wait_for_all_;
  const double timeout_s_;
  const uint64_t source_rate_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<FanoutReplicaState>> slots_;  // by index, set at hand-over
  std::vector<bool> left_;
  uint32_t accounted_ = 0;  // connections that handed over or left
  std::vector<FanoutReplicaState*> arrived_, live_;
  std::unique_ptr<FanoutShapeLoop> loop_;
  std::string loop_error_;
  FanoutCounts counts_;
  FanoutWriterFigures fig_;
  ProbeSample start_;  // the writer thread's clocks at the first chunk
  std::thread thread_;
};

}  // namespace iobench
