#include "server/preauth.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include <chrono>
#include <string_view>

#include "probe/probe.h"

namespace iobench {

PreAuthGate::PreAuthGate(uint32_t cap, double deadline_s)
    : cap_(cap == 0 ? 1 : cap), deadline_s_(deadline_s), watchdog_([this] { watch(); }) {}

PreAuthGate::~PreAuthGate() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  watchdog_.join();
}

// Shuts the socket down (every blocked read or write on it returns at once); the handler sees
// the failure, reads the cut and logs it. The descriptor stays open until the ticket is released.
void PreAuthGate::cut_locked(Entry& e, PreAuthCut why) {
  ::shutdown(e.fd, SHUT_RDWR);
  e.cut = why;
  --uncut_;
  ++total_[static_cast<size_t>(why == PreAuthCut::kDeadline ? PreAuthEvent::kDeadline
                                                            : PreAuthEvent::kMadeRoom)];
}

// Per source, so a flood from one address cuts only its own; at random within it, so a flood
// sharing a valid client's address must outnumber the cap many times over during its handshake
// to cut it surely (cutting the oldest cut every handshake slower than cap arrivals).
PreAuthGate::Entry* PreAuthGate::victim_locked(const std::string& source) {
  std::map<std::string_view, uint32_t> per_source{{source, 1}};  // the newcomer counts too
  for (auto& [id, e] : pending_)
    if (e.cut == PreAuthCut::kNone) ++per_source[e.source];
  uint32_t most = 0, tied = 0;
  std::string_view busiest;
  for (const auto& [src, n] : per_source) {
    if (n > most) most = n, tied = 0;
    // Ties at random: each of the k tied sources is kept with probability 1/k (reservoir).
    if (n == most && std::uniform_int_distribution<uint32_t>(0, tied++)(rng_) == 0) busiest = src;
  }
  uint32_t pick = std::uniform_int_distribution<uint32_t>(0, most - 1)(rng_);
  for (auto& [id, e] : pending_)
    if (e.cut == PreAuthCut::kNone && e.source == busiest && pick-- == 0) return &e;
  return nullptr;  // the newcomer's own number came up (it is counted last of its source)
}

bool PreAuthGate::make_room(const std::string& source) {
  std::lock_guard lock(mu_);
  Entry* victim = victim_locked(source);
  if (victim) cut_locked(*victim, PreAuthCut::kMadeRoom);
  return victim != nullptr;
}

bool PreAuthGate::holds(const std::string& source) const {
  std::lock_guard lock(mu_);
  for (const auto& [id, e] : pending_)
    if (e.source == source) return true;
  return false;
}

PreAuthGate::Ticket PreAuthGate::admit(int fd, const std::string& source) {
  const int64_t deadline = monotonic_ns() + static_cast<int64_t>(deadline_s_ * 1e9);
  std::lock_guard lock(mu_);
  const bool full = uncut_ >= cap_;
  Entry* victim = full ? victim_locked(source) : nullptr;
  if (victim) cut_locked(*victim, PreAuthCut::kMadeRoom);
  const uint64_t id = next_id_++;
  Entry& e = pending_.emplace(id, Entry{fd, deadline, source}).first->second;
  ++uncut_;
  if (full && !victim) cut_locked(e, PreAuthCut::kMadeRoom);  // the newcomer drew itself
  cv_.notify_one();
  return Ticket(this, id);
}

// Deadlines grow with admission order, so the first uncut entry is always the next to expire.
void PreAuthGate::watch() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    Entry* next = nullptr;
    for (auto& [id, e] : pending_)
      if (e.cut == PreAuthCut::kNone) {
        next = &e;
        break;
      }
    if (!next) {
      cv_.wait(lock);
      continue;
    }
    const int64_t now = monotonic_ns();
    if (now >= next->deadline_ns) {
      cut_locked(*next, PreAuthCut::kDeadline);
      continue;
    }
    cv_.wait_for(lock, std::chrono::nanoseconds(next->deadline_ns - now));
  }
}

PreAuthCut PreAuthGate::cut_of(uint64_t id) const {
  std::lock_guard lock(mu_);
  const auto it = pending_.find(id);
  return it == pending_.end() ? PreAuthCut::kNone : it->second.cut;
}

PreAuthCut PreAuthGate::release(uint64_t id) {
  std::lock_guard lock(mu_);
  const auto it = pending_.find(id);
  if (it == pending_.end()) return PreAuthCut::kNone;
  const PreAuthCut cut = it->second.cut;
  if (cut == PreAuthCut::kNone) --uncut_;
  pending_.erase(it);
  return cut;
}

PreAuthCut PreAuthGate::Ticket::cut() const {
  return gate_ ? gate_->cut_of(id_) : PreAuthCut::kNone;
}

PreAuthCut PreAuthGate::Ticket::release() {
  const PreAuthCut cut = gate_ ? gate_->release(id_) : PreAuthCut::kNone;
  gate_ = nullptr;
  return cut;
}

void PreAuthGate::count(PreAuthEvent e) {
  std::lock_guard lock(mu_);
  ++total_[static_cast<size_t>(e)];
}

bool PreAuthGate::may_log(PreAuthEvent e) {
  std::lock_guard lock(mu_);
  const int64_t now = monotonic_ns();
  if (now - window_start_ns_ >= static_cast<int64_t>(kLogWindowS * 1e9)) {
    window_start_ns_ = now;
    lines_ = {};
  }
  if (++lines_[static_cast<size_t>(e)] <= kLinesPerKind) return true;
  ++unlogged_;
  return false;
}

namespace {

// "N cut at --handshake-timeout[ S s], M cut to make room, ..." (the order of PreAuthEvent).
std::string events_text(const std::array<uint64_t, kPreAuthEvents>& n, const std::string& deadline,
                        const std::string& cap) {
  return fmt::format(
      "{} cut at --handshake-timeout{}, {} cut to make room{}, {} timed out reading, {} refused "
      "token(s), {} rejected, {} closed with every handler busy, {} refused with no thread",
      n[0], deadline, n[1], cap, n[2], n[3], n[4], n[5], n[6]);
}

}  // namespace

std::optional<std::string> PreAuthGate::summary_due(bool quiet, double every_s) {
  std::lock_guard lock(mu_);
  const int64_t now = monotonic_ns();
  Counts d{};
  uint64_t news = 0;
  for (size_t i = 0; i < kPreAuthEvents; ++i) news += d[i] = total_[i] - summarised_[i];
  if (news == 0 || (!quiet && unlogged_ == 0)) return std::nullopt;
  if (last_summary_ns_ != 0 && now - last_summary_ns_ < static_cast<int64_t>(every_s * 1e9))
    return std::nullopt;
  const double since_s =
      last_summary_ns_ == 0 ? 0 : static_cast<double>(now - last_summary_ns_) / 1e9;
  std::string line = "pre-auth: " +
                     events_text(d, fmt::format(" {} s", deadline_s_),
                                 fmt::format(" (at most {} unauthenticated at once)", cap_)) +
                     (since_s > 0 ? fmt::format(" in the last {:.0f} s", since_s) : "") +
                     (unlogged_ > 0 ? fmt::format(" ({} not logged one by one)", unlogged_) : "");
  last_summary_ns_ = now;
  summarised_ = total_;
  unlogged_ = 0;
  return line;
}

bool PreAuthGate::any() const {
  std::lock_guard lock(mu_);
  for (const uint64_t n : total_)
    if (n > 0) return true;
  return false;
}

std::string PreAuthGate::totals() const {
  std::lock_guard lock(mu_);
  return events_text(total_, "", "");
}

}  // namespace iobench
