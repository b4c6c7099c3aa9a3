#include "session/group.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstdlib>

namespace iobench {
namespace {

// Test hook (IOBENCH_TEST_HOLD_JOINS=1): each connection waits in join() until every connection
// of its side has joined (at most 10 s), so that the live count reaches --conns whatever the
// scheduling. Without it, overlap depends on how fast connections set up against how fast the
// first ones finish, which a loaded machine does not promise.
bool hold_joins() {
  static const bool on = [] {
    const char* v = std::getenv("IOBENCH_TEST_HOLD_JOINS");
    return v && *v && *v != '0';
  }();
  return on;
}

}  // namespace

GroupSide::GroupSide(std::unique_ptr<BufferPolicy> policy, bool is_sender, bool kernel_syscalls,
                     uint32_t conns)
    : policy_(std::move(policy)),
      registry_(*policy_, monotonic_ns()),
      kernel_syscalls_(kernel_syscalls),
      conns_(conns),
      last_activity_ns_(monotonic_ns()) {
  result_.is_sender = is_sender;
  result_.policy = policy_->describe();
  // The counters are opened before any connection thread exists (they follow new threads).
  if (kernel_syscalls_) (void)process_syscall_counter();
}

std::unique_ptr<LiveRegistry::Member> GroupSide::join(uint32_t conn) {
  {
    std::lock_guard lock(mu_);
    ++joined_;
    last_activity_ns_ = monotonic_ns();
    if (first_join_ns_ == 0) first_join_ns_ = last_activity_ns_;
    if (!started_ && !done_) {
      started_ = true;
      rss_reset_ = reset_peak_rss();
      if (kernel_syscalls_) {
        lease_ = CounterLease::try_take();
        if (lease_.held()) {
          process_syscall_counter().arm();  // before the clock: attaching takes up to ~20 ms
          process_syscall_counter().start();
        }
      }
      host_start_ = host_idle_now();
      start_ = probe_now();
    }
  }
  cv_.notify_all();
  auto member = registry_.join(conn);
  if (hold_joins()) {
    std::unique_lock lock(mu_);
    ++registered_;
    cv_.notify_all();
    cv_.wait_for(lock, std::chrono::seconds(10), [this] { return registered_ >= conns_ || done_; });
  }
  return member;
}

void GroupSide::end(bool ok) {
  {
    std::lock_guard lock(mu_);
    ++ended_;
    if (!ok) ++failed_;
    last_activity_ns_ = monotonic_ns();
    if (ended_ == conns_ && !done_) finish_locked("");
  }
  cv_.notify_all();
}

bool GroupSide::done() const {
  std::lock_guard lock(mu_);
  return done_;
}

bool GroupSide::idle_for(double s) const {
  std::lock_guard lock(mu_);
  return !done_ && monotonic_ns() - last_activity_ns_ > static_cast<int64_t>(s * 1e9);
}

proto::GroupResult GroupSide::wait(double idle_s) {
  std::unique_lock lock(mu_);
  const auto idle_ns = static_cast<int64_t>(idle_s * 1e9);
  while (!done_) {
    const int64_t now = monotonic_ns();
    const int64_t left = last_activity_ns_ + idle_ns - now;
    const bool missing = joined_ < conns_ && first_join_ns_ != 0;
    const int64_t to_start = missing ? first_join_ns_ + idle_ns - now : left;
    if (left <= 0) {
      finish_locked(
          fmt::format("{} of {} connections started and {} ended; none started or ended for {} s",
                      joined_, conns_, ended_, idle_s));
      break;
    }
    if (to_start <= 0) {
      finish_locked(fmt::format("{} of {} connections started within {} s of the first ({} ended)",
                                joined_, conns_, idle_s, ended_));
      break;
    }
    cv_.wait_for(lock, std::chrono::nanoseconds(std::min(left, to_start)));
  }
  return result_;
}

void GroupSide::finish_locked(const std::string& error) {
  const ProbeSample end = probe_now();
  const HostIdleSample host_end = host_idle_now();
  proto::GroupResult& g = result_;
  g.error = error;
  g.conns = joined_;
  g.conns_failed = failed_ + (joined_ - std::min(joined_, ended_));
  g.syscalls.source = SyscallSource::kCounted;
  if (started_) {
    g.probe = end - start_;
    g.host_busy = host_end - host_start_;
  }
  if (!kernel_syscalls_) {
    g.syscalls.note = "kernel counting off";
  } else if (!lease_.held()) {
    g.syscalls.note = started_ ? "another session of this process held the kernel counters"
                               : "no connection started";
  } else {
    take_kernel_counts(process_syscall_counter().stop(), g.syscalls);
    process_syscall_counter().disarm();
    lease_ = CounterLease{};
  }
  g.peak_rss_bytes = rss_reset_ ? peak_rss_bytes() : 0;
  const RegistrySnapshot s = registry_.snapshot();
  g.peak_live = s.peak_live;
  g.peak_buffer_bytes = s.peak_buffer_bytes;
  g.changes_dropped = s.changes_dropped;
  g.timeline.reserve(s.timeline.size());
  for (const LiveEvent& e : s.timeline) g.timeline.push_back({e.t_ns, e.live, e.size});
  g.changes.reserve(s.changes.size());
  for (const SizeChange& c : s.changes)
    g.changes.push_back({c.t_ns, c.conn, c.from, c.to, c.live, c.target});
  done_ = true;
}

}  // namespace iobench
