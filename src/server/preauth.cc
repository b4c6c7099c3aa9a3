#include "server/preauth.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include <chrono>

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
  ++(why == PreAuthCut::kDeadline ? total_.deadline : total_.made_room);
}

bool PreAuthGate::cut_oldest_locked() {
  for (auto& [id, e] : pending_) {
    if (e.cut != PreAuthCut::kNone) continue;
    cut_locked(e, PreAuthCut::kMadeRoom);
    return true;
  }
  return false;
}

bool PreAuthGate::cut_oldest() {
  std::lock_guard lock(mu_);
  return cut_oldest_locked();
}

PreAuthGate::Ticket PreAuthGate::admit(int fd) {
  const int64_t deadline = monotonic_ns() + static_cast<int64_t>(deadline_s_ * 1e9);
  std::lock_guard lock(mu_);
  if (uncut_ >= cap_) (void)cut_oldest_locked();
  const uint64_t id = next_id_++;
  pending_.emplace(id, Entry{fd, deadline});
  ++uncut_;
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

void PreAuthGate::count_refused_token() {
  std::lock_guard lock(mu_);
  ++total_.refused_tokens;
}

void PreAuthGate::count_late() {
  std::lock_guard lock(mu_);
  ++total_.deadline;
}

std::optional<std::string> PreAuthGate::summary_due(double every_s) {
  std::lock_guard lock(mu_);
  const int64_t now = monotonic_ns();
  const Counts d{total_.deadline - logged_.deadline, total_.made_room - logged_.made_room,
                 total_.refused_tokens - logged_.refused_tokens};
  if (d.deadline + d.made_room + d.refused_tokens == 0) return std::nullopt;
  if (last_summary_ns_ != 0 && now - last_summary_ns_ < static_cast<int64_t>(every_s * 1e9))
    return std::nullopt;
  const double since_s =
      last_summary_ns_ == 0 ? 0 : static_cast<double>(now - last_summary_ns_) / 1e9;
  last_summary_ns_ = now;
  logged_ = total_;
  return fmt::format(
      "pre-auth: {} cut at --handshake-timeout {} s, {} cut to make room (at most {} "
      "unauthenticated at once), {} refused token(s){}",
      d.deadline, deadline_s_, d.made_room, cap_, d.refused_tokens,
      since_s > 0 ? fmt::format(" in the last {:.0f} s", since_s) : "");
}

bool PreAuthGate::any() const {
  std::lock_guard lock(mu_);
  return total_.deadline + total_.made_room + total_.refused_tokens > 0;
}

std::string PreAuthGate::totals() const {
  std::lock_guard lock(mu_);
  return fmt::format("{} cut at --handshake-timeout, {} cut to make room, {} refused token(s)",
                     total_.deadline, total_.made_room, total_.refused_tokens);
}

}  // namespace iobench
