// Each session's bound on progress: after --idle-timeout of grace, the bytes a session moved
// over the last --idle-timeout (read from the kernel: TCP_INFO's bytes acknowledged by the peer
// and bytes received) must be at least --min-rate's worth, or a watchdog shuts its socket down
// (nginx's client_body_timeout, measured on progress). --idle-timeout alone sees a reader that
// takes 64 KiB a second as making progress, and an allowance from the bytes a session announced
// lets one that moves 20 bytes hold its slot for the 1 GiB it claimed: neither holds a slot
// here. The whole-time allowance (grace + the announced bytes at the rate) stays an outer bound.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace iobench {

// Seconds a session of `bytes` may take: `grace_s`, plus the bytes at `min_rate` bytes a second
// (0: no bound).
double session_allowance_s(uint64_t bytes, uint64_t min_rate, double grace_s);

class SessionDeadlines {
 public:
  SessionDeadlines();
  ~SessionDeadlines();
  SessionDeadlines(const SessionDeadlines&) = delete;
  SessionDeadlines& operator=(const SessionDeadlines&) = delete;

  // One session under watch: released before its descriptor closes (a number reused since is
  // never shut down).
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& o) noexcept : owner_(o.owner_), id_(o.id_) { o.owner_ = nullptr; }
    Ticket& operator=(Ticket&&) = delete;
    Ticket(const Ticket&) = delete;
    ~Ticket() { release(); }
    // Leaves the watch; why the watchdog cut the session, if it did.
    std::optional<std::string> release();

   private:
    friend class SessionDeadlines;
    Ticket(SessionDeadlines* owner, uint64_t id) : owner_(owner), id_(id) {}
    SessionDeadlines* owner_ = nullptr;
    uint64_t id_ = 0;
  };

  // What a session is held to: `whole_s` from now at most (infinite or non-positive: no whole
  // bound); after `grace_s`, at least `min_rate` bytes a second over every `grace_s` window.
  struct Bound {
    double whole_s = 0;
    uint64_t min_rate = 0;
    double grace_s = 0;
    std::string whole_why;  // the log's words for a cut at whole_s ("--max-session-time 600 s")
    std::string rate_why;   // and before the rate's figures ("slower than --min-rate 128 KiB/s")
  };
  Ticket watch(int fd, const Bound& bound);

 private:
  struct Sample {
    int64_t ns;
    uint64_t bytes;
  };
  struct Entry {
    int fd;
    int64_t deadline_ns;  // INT64_MAX: none
    int64_t grace_end_ns;
    int64_t window_ns;
    uint64_t min_rate;
    std::deque<Sample> samples;  // the last window's progress (rate-watched sessions)
    int64_t due_ns;              // when the watchdog looks at it next
    std::string cut;             // why it was cut (empty: not cut)
    std::string whole_why, rate_why;
  };
  void run();
  // The next time `e` must be looked at, after checking it at `now` (cut when due).
  int64_t check(Entry& e, int64_t now);
  std::optional<std::string> release(uint64_t id);

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Entry> entries_;
  uint64_t next_id_ = 1;
  bool stop_ = false;
  std::thread watchdog_;  // started by the first watch()
};

// A session's bound under the server's options: the whole time its bytes at `min_rate` allow
// after `grace_s`, or `max_session_s` when that is sooner (0: no such bound), and the rate.
SessionDeadlines::Bound session_bound(uint64_t bytes, uint64_t min_rate, double grace_s,
                                      double max_session_s);

}  // namespace iobench
