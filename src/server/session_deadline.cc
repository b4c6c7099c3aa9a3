#include "server/session_deadline.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "net/socket.h"
#include "net/tcp_segments.h"
#include "probe/probe.h"
#include "util/size.h"
#include "util/test_throw.h"

namespace iobench {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

}  // namespace

double session_allowance_s(uint64_t bytes, uint64_t min_rate, double grace_s) {
  if (min_rate == 0) return INFINITY;
  return grace_s + static_cast<double>(bytes) / static_cast<double>(min_rate);
}

SessionDeadlines::Bound session_bound(uint64_t bytes, uint64_t min_rate, double grace_s,
                                      double max_session_s) {
  SessionDeadlines::Bound b{session_allowance_s(bytes, min_rate, grace_s), min_rate, grace_s, {}, {}};
  b.rate_why = fmt::format("slower than --min-rate {}/s after --idle-timeout {} s",
                           format_bytes_human(min_rate), grace_s);
  b.whole_why = fmt::format(
      "its whole-time allowance, {:.0f} s (--idle-timeout {} s, then its {} at --min-rate {}/s)",
      b.whole_s, grace_s, format_bytes_human(bytes), format_bytes_human(min_rate));
  if (max_session_s > 0 && max_session_s < b.whole_s) {
    b.whole_s = max_session_s;
    b.whole_why = fmt::format("--max-session-time {} s", max_session_s);
  }
  return b;
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

SessionDeadlines::Ticket SessionDeadlines::watch(int fd, const Bound& b) {
  const bool whole = b.whole_s > 0 && !std::isinf(b.whole_s);
  const std::optional<uint64_t> now_bytes = bytes_moved(fd);
  const bool rate = b.min_rate > 0 && b.grace_s > 0 && now_bytes;
  if (!whole && !rate) return Ticket{};
  std::lock_guard lock(mu_);
  // Started with the first bounded session: a server without --min-rate (loopback's, which
  // must stay one thread) never has it.
  if (!watchdog_.joinable()) {
    test_throw_no_thread("deadline-watch");
    watchdog_ = std::thread([this] { run(); });  // may throw: the handler's catch contains it
  }
  const int64_t now = monotonic_ns();
  const auto grace = static_cast<int64_t>(b.grace_s * 1e9);
  Entry e{fd, whole ? now + static_cast<int64_t>(b.whole_s * 1e9) : INT64_MAX,
          rate ? now + grace : INT64_MAX, grace, rate ? b.min_rate : 0, {}, now, {},
          b.whole_why, b.rate_why};
  if (rate) e.samples.push_back({now, *now_bytes});
  const uint64_t id = next_id_++;
  entries_.emplace(id, std::move(e));
  cv_.notify_one();
  return Ticket(this, id);
}

int64_t SessionDeadlines::check(Entry& e, int64_t now) {
  if (now >= e.deadline_ns) {
    e.cut = e.whole_why.empty() ? "its whole-time allowance" : e.whole_why;
    return INT64_MAX;
  }
  if (!e.min_rate) return e.deadline_ns;
  // A sample every eighth of the window (at least every second, at most ten a second).
  const int64_t step = std::clamp<int64_t>(e.window_ns / 8, kSecond / 10, kSecond);
  const std::optional<uint64_t> bytes = bytes_moved(e.fd);
  if (!bytes) return e.deadline_ns;  // the socket is going: the handler sees why
  const bool moving = *bytes != e.samples.back().bytes;
  e.samples.push_back({now, *bytes});
  // The oldest sample kept is the last one at least a window old: the rate is read over one.
  while (e.samples.size() > 2 && e.samples[1].ns <= now - e.window_ns) e.samples.pop_front();
  const Sample& base = e.samples.front();
  const int64_t span = now - base.ns;
  if (now >= e.grace_end_ns && span >= e.window_ns) {
    const double need = static_cast<double>(e.min_rate) * static_cast<double>(span) / 1e9;
    const uint64_t moved = *bytes - base.bytes;
    // A session that moved nothing since the last look has stalled, not slowed: that is
    // --idle-timeout's to report ("timed out"), whose clock starts at the last progress, so it
    // fires within a window (a link gone silent mid-window reads as slow over that window
    // until then). A trickle moves between some looks, and is cut at the next of those.
    if (moving && static_cast<double>(moved) < need) {
      e.cut = fmt::format("{}{}moved {} in its last {:.1f} s", e.rate_why,
                          e.rate_why.empty() ? "" : ": ", format_bytes_human(moved),
                          static_cast<double>(span) / 1e9);
      return INT64_MAX;
    }
  }
  return std::min(e.deadline_ns, now + step);
}

// Sessions are few (at most --max-conns): a scan of every entry costs nothing.
void SessionDeadlines::run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    const int64_t now = monotonic_ns();
    int64_t next = INT64_MAX;
    for (auto& [id, e] : entries_) {
      if (!e.cut.empty()) continue;
      if (e.due_ns <= now) {
        e.due_ns = check(e, now);
        if (!e.cut.empty()) cut_with_reset(e.fd);
      }
      if (e.cut.empty()) next = std::min(next, e.due_ns);
    }
    if (next == INT64_MAX)
      cv_.wait(lock);
    else
      cv_.wait_for(lock, std::chrono::nanoseconds(std::max<int64_t>(next - monotonic_ns(), 0)));
  }
}

std::optional<std::string> SessionDeadlines::release(uint64_t id) {
  std::lock_guard lock(mu_);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  std::optional<std::string> cut;
  if (!it->second.cut.empty()) cut = std::move(it->second.cut);
  entries_.erase(it);
  return cut;
}

std::optional<std::string> SessionDeadlines::Ticket::release() {
  auto cut = owner_ ? owner_->release(id_) : std::nullopt;
  owner_ = nullptr;
  return cut;
}

}  // namespace iobench
