#include "fanout/fanout.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>

#include "probe/probe.h"

namespace iobench {

// A connection's engine under --fanout: its data phase is the writer's; it waits for it.
class FanoutEngine final : public Engine {
 public:
  FanoutEngine(FanoutWriter& writer, uint32_t index, EngineKind kind)
      : writer_(writer), index_(index), kind_(kind) {}
  std::string_view name() const override { return name_of(kind_); }
  Status send(Stream& s, std::span<const std::byte> data, IoBuffer& buf, IoCounters& io) override {
    return writer_.hand_over(index_, s, data, buf, io);
  }
  Status recv(Stream&, uint64_t, IoBuffer&, ByteSink&, IoCounters&) override {
    return fail("--fanout: a replica connection only receives on the server's side");
  }

 private:
  FanoutWriter& writer_;
  uint32_t index_;
  EngineKind kind_;
};

void drop_replica(FanoutReplicaState& r, const std::string& why) {
  const int64_t now = monotonic_ns();
  r.status = fail(fmt::format("fan-out writer dropped replica {} at byte {} of {}: {}", r.index,
                              r.off, r.data.size(), why));
  r.fig.dropped = true;
  r.fig.drop_reason = why;
  r.fig.done_ns = now;
  r.finished = true;
  // As a primary frees a replica's client: nothing more is written or read on it, and the
  // session's own close cannot block behind a full socket.
  ::shutdown(r.stream->fd(), SHUT_RDWR);
}

FanoutWriter::FanoutWriter(FanoutShape shape, EngineKind engine, uint32_t replicas,
                           bool wait_for_all, double timeout_s, uint64_t source_rate)
    : shape_(shape),
      engine_(engine),
      replicas_(replicas),
      wait_for_all_(wait_for_all),
      timeout_s_(timeout_s),
      source_rate_(source_rate),
      slots_(replicas),
      left_(replicas, false) {
  fig_.shape = shape;
  fig_.engine = std::string(name_of(engine));
  fig_.source_rate = source_rate;
  thread_ = std::thread([this] { run(); });
}

FanoutWriter::~FanoutWriter() { finish(); }

void FanoutWriter::finish() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    for (uint32_t i = 0; i < replicas_; ++i)
      if (!left_[i]) {
        left_[i] = true;
        ++accounted_;
      }
  }
  cv_.notify_all();
  thread_.join();
}

std::unique_ptr<Engine> FanoutWriter::engine_for(uint32_t index) {
  return std::make_unique<FanoutEngine>(*this, index, engine_);
}

void FanoutWriter::leave(uint32_t index) {
  {
    std::lock_guard lock(mu_);
    if (left_[index] || slots_[index]) {
      left_[index] = true;
      return;
    }
    left_[index] = true;
    ++accounted_;
  }
  cv_.notify_all();
}

Status FanoutWriter::hand_over(uint32_t index, Stream& s, std::span<const std::byte> data,
                               IoBuffer& buf, IoCounters& io) {
  std::unique_lock lock(mu_);
  if (slots_[index] || left_[index]) return fail("--fanout: a connection handed over twice");
  auto r = std::make_unique<FanoutReplicaState>();
  r->index = index;
  r->stream = &s;
  r->data = data;
  r->buf = &buf;
  r->io = &io;
  FanoutReplicaState& mine = *r;
  slots_[index] = std::move(r);
  ++accounted_;
  arrived_.push_back(&mine);
  cv_.notify_all();
  // The writer ends every replica it adopted: written, or dropped after --timeout without
  // progress. The wait is on it, not on the network.
  cv_.wait(lock, [&mine] { return mine.released; });
  return mine.status;
}

// Moves the replicas that arrived into the live set; false when there is nothing left to do.
// Waits (unlocked) until there is a replica to write to, or every connection has left.
bool FanoutWriter::adopt_arrivals(std::unique_lock<std::mutex>& lock) {
  cv_.wait(lock, [this] {
    if (accounted_ == replicas_) return true;
    if (!live_.empty()) return true;
    return !arrived_.empty() && !wait_for_all_;
  });
  for (FanoutReplicaState* r : arrived_) {
    if (r->data.empty()) {  // nothing to send: done at once
      r->finished = r->released = true;
      continue;
    }
    if (shape_ == FanoutShape::kEventLoop && engine_ == EngineKind::kEpoll)
      if (auto st = r->stream->set_nonblocking(true); !st) {
        r->status = st;
        r->finished = r->released = true;
        continue;
      }
    r->fig.joined_ns = monotonic_ns();
    live_.push_back(r);
  }
  if (!arrived_.empty()) cv_.notify_all();  // some may have been released at once
  arrived_.clear();
  return !live_.empty() || accounted_ < replicas_;
}

Result<std::unique_ptr<FanoutShapeLoop>> FanoutWriter::make_loop() const {
  if (shape_ == FanoutShape::kConnset) return make_connset_loop(timeout_s_);
  if (engine_ == EngineKind::kUring) return make_uring_loop(timeout_s_, replicas_);
  return make_event_loop(timeout_s_);
}

void FanoutWriter::start_clock() {
  start_ = probe_now(true);
}

void FanoutWriter::stop_clock() {
  fig_.probe = probe_now(true) - start_;
}

// How far each live replica is behind the one furthest ahead, at the start of a round.
void FanoutWriter::note_lag() {
  uint64_t ahead = 0;
  for (const FanoutReplicaState* r : live_) ahead = std::max(ahead, r->off);
  for (FanoutReplicaState* r : live_)
    r->fig.lag_max_bytes = std::max(r->fig.lag_max_bytes, ahead - r->off);
}

// --source-rate: the round's furthest chunk must have been produced, at the source's rate since
// the first chunk, before it is written.
void FanoutWriter::wait_for_source() {
  if (source_rate_ == 0) return;
  uint64_t produced = 0;
  for (const FanoutReplicaState* r : live_) produced = std::max(produced, r->chunk_end);
  const auto ready_ns =
      start_.wall_ns +
      static_cast<int64_t>(static_cast<double>(produced) * 1e9 / static_cast<double>(source_rate_));
  const int64_t now = monotonic_ns();
  if (ready_ns <= now) return;
  std::this_thread::sleep_for(std::chrono::nanoseconds(ready_ns - now));
  fig_.source_wait_ns += monotonic_ns() - now;
}

void FanoutWriter::run() {
  bool started = false;
  std::unique_lock lock(mu_);
  while (adopt_arrivals(lock)) {
    if (live_.empty()) continue;
    lock.unlock();
    if (!started) {
      started = true;
      start_clock();
      for (FanoutReplicaState* r : live_) r->fig.joined_ns = start_.wall_ns;
      if (auto l = make_loop(); l) {
        loop_ = std::move(*l);
      } else {
        loop_error_ = l.error().message;
      }
    }
    fig_.peak_live = std::max<uint32_t>(fig_.peak_live, static_cast<uint32_t>(live_.size()));
    note_lag();
    for (FanoutReplicaState* r : live_) {
      if (!loop_) {
        drop_replica(*r, "the writer's event loop could not be created: " + loop_error_);
        continue;
      }
      const uint64_t n = std::min<uint64_t>(r->buf->size(), r->data.size() - r->off);
      r->chunk_end = r->off + n;
      counts_.peak_chunk_bytes = std::max(counts_.peak_chunk_bytes, n);
    }
    wait_for_source();
    if (loop_) loop_->round(live_, counts_);
    ++fig_.chunks;
    lock.lock();
    // The finished move to the end, in order (remove_if would leave that end unspecified).
    const auto done = std::ranges::stable_partition(live_, [](const FanoutReplicaState* r) {
      return !r->finished;
    });
    for (FanoutReplicaState* r : done) {
      if (!r->fig.dropped) r->fig.done_ns = monotonic_ns();
      if (r->stream->nonblocking()) (void)r->stream->set_nonblocking(false);
      r->buf->done();  // it leaves the live count now: the others' next chunk may grow
      r->released = true;
    }
    if (!done.empty()) cv_.notify_all();
    live_.erase(done.begin(), done.end());
  }
  if (started) stop_clock();
}

FanoutWriterFigures FanoutWriter::figures() const {
  std::lock_guard lock(mu_);
  FanoutWriterFigures f = fig_;
  f.writes = counts_.writes;
  f.waits = counts_.waits;
  f.peak_chunk_bytes = counts_.peak_chunk_bytes;
  for (const auto& r : slots_) {
    if (!r) continue;
    ++f.replicas;
    if (r->fig.dropped) ++f.dropped;
    f.delivered_bytes += r->off;
  }
  return f;
}

std::optional<FanoutReplica> FanoutWriter::replica(uint32_t index) const {
  std::lock_guard lock(mu_);
  const auto& r = slots_.at(index);
  if (!r || r->fig.joined_ns == 0) return std::nullopt;
  FanoutReplica f = r->fig;
  f.joined_ns -= start_.wall_ns;
  f.done_ns -= start_.wall_ns;
  return f;
}

}  // namespace iobench
