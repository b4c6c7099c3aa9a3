// The whole session's bound: after --idle-timeout of grace, a session must move its bytes at
// --min-rate on average, or a watchdog shuts its socket down. --idle-timeout alone sees a reader
// that takes 64 KiB a second as making progress, so slow readers could hold every --max-conns
// slot, and the payload each streams, for as long as they like.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
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
    // Leaves the watch; true when the deadline had cut the session.
    bool release();

   private:
    friend class SessionDeadlines;
    Ticket(SessionDeadlines* owner, uint64_t id) : owner_(owner), id_(id) {}
    SessionDeadlines* owner_ = nullptr;
    uint64_t id_ = 0;
  };

  // Watches `fd` for `seconds` from now; an infinite or non-positive bound watches nothing.
  Ticket watch(int fd, double seconds);

 private:
  struct Entry {
    int fd;
    int64_t deadline_ns;
    bool cut = false;
  };
  void run();
  bool release(uint64_t id);

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Entry> entries_;
  uint64_t next_id_ = 1;
  bool stop_ = false;
  std::thread watchdog_;  // started by the first watch()
};

}  // namespace iobench
