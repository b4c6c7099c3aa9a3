#include "server/session_deadline.h"

#include <sys/socket.h>

#include <chrono>
#include <cmath>

#include "probe/probe.h"
#include "util/test_throw.h"

namespace iobench {

double session_allowance_s(uint64_t bytes, uint64_t min_rate, double grace_s) {
  if (min_rate == 0) return INFINITY;
  return grace_s + static_cast<double>(bytes) / static_cast<double>(min_rate);
}

SessionDeadlines::SessionDeadlines() = default;

SessionDeadlines::~SessionDeadlines() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

SessionDeadlines::Ticket SessionDeadlines::watch(int fd, double seconds) {
  if (!(seconds > 0) || std::isinf(seconds)) return Ticket{};
  std::lock_guard lock(mu_);
  // Started with the first bounded session: a server without --min-rate (loopback's, which
  // must stay one thread) never has it.
  if (!watchdog_.joinable()) {
    test_throw_no_thread("deadline-watch");
    watchdog_ = std::thread([this] { run(); });  // may throw: the handler's catch contains it
  }
  const uint64_t id = next_id_++;
  entries_.emplace(id, Entry{fd, monotonic_ns() + static_cast<int64_t>(seconds * 1e9)});
  cv_.notify_one();
  return Ticket(this, id);
}

// Sessions are few (at most --max-conns): a scan for the earliest deadline costs nothing.
void SessionDeadlines::run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    Entry* next = nullptr;
    for (auto& [id, e] : entries_)
      if (!e.cut && (!next || e.deadline_ns < next->deadline_ns)) next = &e;
    if (!next) {
      cv_.wait(lock);
      continue;
    }
    const int64_t now = monotonic_ns();
    if (now >= next->deadline_ns) {
      // Closed with a reset: the kernel drops what the slow reader left queued rather than
      // trickling it out after the session has ended. Every blocked call on it returns at
      // once; the handler logs why.
      const linger reset{1, 0};
      (void)::setsockopt(next->fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
      ::shutdown(next->fd, SHUT_RDWR);
      next->cut = true;
      continue;
    }
    cv_.wait_for(lock, std::chrono::nanoseconds(next->deadline_ns - now));
  }
}

bool SessionDeadlines::release(uint64_t id) {
  std::lock_guard lock(mu_);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  const bool cut = it->second.cut;
  entries_.erase(it);
  return cut;
}

bool SessionDeadlines::Ticket::release() {
  const bool cut = owner_ && owner_->release(id_);
  owner_ = nullptr;
  return cut;
}

}  // namespace iobench
