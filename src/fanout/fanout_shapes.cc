// The fan-out writer's two shapes of a round (docs/fanout.md):
//  - connset: Valkey's dual-channel sync (rio.c rioConnsetWrite): the chunk is written to
//    replica 1, 2, …, N in turn with blocking writes bounded by a send timeout; a replica whose
//    write fails or times out is dropped and the others go on.
//  - event-loop: Redis's and Valkey's disk-less sync without it (replication.c
//    rdbPipeReadHandler / rdbPipeWriteHandler): a non-blocking write to every replica; one whose
//    socket is full gets a writable handler (EPOLLOUT), and the source is not read again until
//    every replica has drained its chunk: the slowest paces all. A replica that takes nothing
//    for --timeout is dropped (repl-timeout).
#include <fmt/format.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fanout/fanout.h"
#include "probe/probe.h"

namespace iobench {
namespace {

// A blocking write that lasted this long slept for room in the socket (copying 64 KiB takes
// tens of microseconds): connset's count of stalls.
constexpr int64_t kSlowWriteNs = 1'000'000;

class ConnsetLoop final : public FanoutShapeLoop {
 public:
  explicit ConnsetLoop(double timeout_s) : timeout_s_(timeout_s) {}
  void round(std::span<FanoutReplicaState* const> live, FanoutCounts& c) override {
    for (FanoutReplicaState* r : live) write_chunk(*r, c);
  }

 private:
  void write_chunk(FanoutReplicaState& r, FanoutCounts& c) const {
    IoCounters& io = *r.io;
    while (r.off < r.chunk_end) {
      const size_t want = r.chunk_end - r.off;
      const int64_t t = monotonic_ns();
      const IoResult res = r.stream->write(r.data.subspan(r.off, want));
      const int64_t dt = monotonic_ns() - t;
      ++io.calls;
      ++c.writes;
      r.fig.stall_ns += dt;
      if (dt > kSlowWriteNs) ++r.fig.stalls;
      if (!res.ok()) {
        drop_replica(r, fmt::format("connset: its write failed: {} (send timeout {:g} s)",
                                    r.stream->describe(res), timeout_s_));
        return;
      }
      if (res.bytes < want) ++io.short_writes;
      r.off += res.bytes;
      io.bytes += res.bytes;
    }
    if (r.off < r.data.size()) return;
    // A blocking TLS stream in the memory-BIO model has written its records in write().
    if (const IoResult f = r.stream->flush(); !f.ok()) {
      drop_replica(r, fmt::format("connset: {}", r.stream->describe(f)));
      return;
    }
    r.finished = true;
  }
  double timeout_s_;
};

class EpollLoop final : public FanoutShapeLoop {
 public:
  EpollLoop(int epfd, double timeout_s)
      : epfd_(epfd), timeout_ns_(static_cast<int64_t>(timeout_s * 1e9)) {}
  ~EpollLoop() override { ::close(epfd_); }
  EpollLoop(const EpollLoop&) = delete;
  EpollLoop& operator=(const EpollLoop&) = delete;

  void round(std::span<FanoutReplicaState* const> live, FanoutCounts& c) override {
    for (FanoutReplicaState* r : live)
      if (drain(*r, c)) watch(*r);
    while (!pending_.empty()) wait_and_drain(c);
  }

 private:
  // Writes what the socket takes of the replica's chunk; true while some of it is left.
  bool drain(FanoutReplicaState& r, FanoutCounts& c) {
    IoCounters& io = *r.io;
    while (r.off < r.chunk_end) {
      const size_t want = r.chunk_end - r.off;
      const IoResult res = r.stream->write(r.data.subspan(r.off, want));
      ++io.calls;
      ++c.writes;
      if (res.ok()) {
        if (res.bytes < want) ++io.short_writes;
        r.off += res.bytes;
        io.bytes += res.bytes;
        if (r.pending_since_ns != 0) r.last_progress_ns = monotonic_ns();
        continue;
      }
      if (res.state == IoResult::State::kWouldBlock) {
        ++io.would_block;
        ++r.fig.stalls;
        return true;
      }
      drop_replica(r, fmt::format("event-loop: its write failed: {}", r.stream->describe(res)));
      return false;
    }
    if (r.off < r.data.size()) return false;
    // TLS, memory-BIO model: records accepted by write() may still wait for the socket.
    const IoResult f = r.stream->flush();
    if (f.state == IoResult::State::kWouldBlock) {
      ++io.would_block;
      return true;
    }
    if (!f.ok()) {
      drop_replica(r, fmt::format("event-loop: {}", r.stream->describe(f)));
      return false;
    }
    r.finished = true;
    return false;
  }

  // The replica's writable handler: installed when its socket is full (as connSetWriteHandler).
  void watch(FanoutReplicaState& r) {
    epoll_event ev{};
    ev.events = EPOLLOUT;
    ev.data.ptr = &r;
    if (epoll_ctl(epfd_, EPOLL_CTL_ADD, r.stream->fd(), &ev) != 0) {
      drop_replica(r, fmt::format("event-loop: epoll_ctl ADD: {}", std::strerror(errno)));
      return;
    }
    r.pending_since_ns = r.last_progress_ns = monotonic_ns();
    pending_.push_back(&r);
  }

  void unwatch(FanoutReplicaState& r) {
    epoll_ctl(epfd_, EPOLL_CTL_DEL, r.stream->fd(), nullptr);
    r.fig.stall_ns += monotonic_ns() - r.pending_since_ns;
    r.pending_since_ns = 0;
    std::erase(pending_, &r);
  }

  void wait_and_drain(FanoutCounts& c) {
    events_.resize(pending_.size());
    // Short slices, so a silent replica is found within --timeout plus one slice.
    const int slice_ms = static_cast<int>(std::clamp<int64_t>(timeout_ns_ / 1'000'000, 1, 250));
    int n;
    do {
      ++c.waits;
      n = epoll_wait(epfd_, events_.data(), static_cast<int>(events_.size()), slice_ms);
    } while (n < 0 && errno == EINTR);
    for (int i = 0; i < n; ++i) {
      auto& r = *static_cast<FanoutReplicaState*>(events_[static_cast<size_t>(i)].data.ptr);
      if (!drain(r, c)) unwatch(r);
    }
    const int64_t now = monotonic_ns();
    for (FanoutReplicaState* r : std::vector(pending_)) {
      if (now - r->last_progress_ns <= timeout_ns_) continue;
      unwatch(*r);
      drop_replica(*r, fmt::format("event-loop: its socket took nothing for {:.1f} s (--timeout); "
                                   "the other replicas waited for it",
                                   static_cast<double>(now - r->last_progress_ns) / 1e9));
    }
  }

  int epfd_;
  int64_t timeout_ns_;
  std::vector<FanoutReplicaState*> pending_;
  std::vector<epoll_event> events_;
};

}  // namespace

std::unique_ptr<FanoutShapeLoop> make_connset_loop(double timeout_s) {
  return std::make_unique<ConnsetLoop>(timeout_s);
}

Result<std::unique_ptr<FanoutShapeLoop>> make_event_loop(double timeout_s) {
  const int fd = epoll_create1(EPOLL_CLOEXEC);
  if (fd < 0) return fail(fmt::format("epoll_create1: {}", std::strerror(errno)));
  return std::unique_ptr<FanoutShapeLoop>(std::make_unique<EpollLoop>(fd, timeout_s));
}

}  // namespace iobench
