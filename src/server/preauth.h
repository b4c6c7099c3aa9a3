// The pre-authentication phase of every connection — the TLS handshake, the HELLO and the token
// check — under one deadline and one cap, as OpenSSH's LoginGraceTime and MaxStartups. A
// per-read timeout alone lets a ClientHello dripped one byte inside each read's timeout hold a
// handler for as long as the client likes; the gate's watchdog shuts the socket down at the
// deadline whatever the reads are doing. Connections still unauthenticated are capped, so a flood
// of slow handshakes cannot take the handlers a valid client needs: a new connection that finds
// every handler taken (or the cap reached) makes room by cutting one connection of the source
// address holding the most pending ones, chosen at random among that source's (the newcomer
// counted with its own source). A flood from one address cuts only its own connections, however
// fast it opens them; a flood sharing the valid client's address cuts it with probability about
// 1 - e^(-n/cap) for the n arrivals during its handshake (cutting the oldest cut a handshake
// slower than cap arrivals always). docs/hardening.md has the measured rates.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>

namespace iobench {

// Why a connection's pre-auth phase was cut short by the gate.
enum class PreAuthCut { kNone, kDeadline, kMadeRoom };

// What the gate counts, each apart: its own cuts (at the deadline, to make room), a connection
// whose reads timed out before the watchdog cut it, a wrong or missing token, any other refusal
// before a session (a bad frame, a request past the server's bounds), a connection closed at
// once because every handler was busy, and one refused because no thread would start for it.
enum class PreAuthEvent {
  kDeadline,
  kMadeRoom,
  kTimedOut,
  kRefusedToken,
  kRejected,
  kClosedBusy,
  kNoThread
};
inline constexpr size_t kPreAuthEvents = 7;

class PreAuthGate {
 public:
  // At most `cap` connections pending at once; each has `deadline_s` from admission.
  PreAuthGate(uint32_t cap, double deadline_s);
  ~PreAuthGate();
  PreAuthGate(const PreAuthGate&) = delete;
  PreAuthGate& operator=(const PreAuthGate&) = delete;

  // One connection's place at the gate: released (authenticated, or the handler done) before
  // its descriptor closes, so the watchdog never shuts down a descriptor number reused since.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& o) noexcept : gate_(o.gate_), id_(o.id_) { o.gate_ = nullptr; }
    Ticket& operator=(Ticket&&) = delete;
    Ticket(const Ticket&) = delete;
    ~Ticket() { release(); }
    // The cut the gate made so far, if any.
    PreAuthCut cut() const;
    // Leaves the gate: from here on the watchdog cannot cut it. Returns the cut made before,
    // in the same step (a cut between a check and the release would go unseen otherwise).
    PreAuthCut release();

   private:
    friend class PreAuthGate;
    Ticket(PreAuthGate* gate, uint64_t id) : gate_(gate), id_(id) {}
    PreAuthGate* gate_ = nullptr;
    uint64_t id_ = 0;
  };

  // Admits the accepted socket `fd` from `source` (the peer's address, no port); at the cap,
  // room is made first (make_room), which may cut this newcomer at once.
  Ticket admit(int fd, const std::string& source);
  // Makes room for a newcomer from `source`: cuts one pending connection of the busiest source
  // (at random among its; ties between sources at random). False when the choice fell on the
  // newcomer itself, or none is pending: the caller closes it.
  bool make_room(const std::string& source);
  // Whether `source` holds any connection here, pending or cut and not yet released: a source
  // holding none has no handler of its own among the busy ones.
  bool holds(const std::string& source) const;

  // Counts an event the gate did not make itself (its cuts count themselves).
  void count(PreAuthEvent e);
  // Whether an event's own log line may be written: the first kLinesPerKind of each kind in
  // each kLogWindowS; past those, the summary says how many went unlogged (a flood of 200
  // connections a second logs about 2 lines a second, not 200).
  bool may_log(PreAuthEvent e);
  // A summary line of the events since the last one, at most one per `every_s` (the first at
  // once): when `quiet` (no line of their own) or when some went unlogged; nullopt when nothing
  // is due. Called by handler threads, so the watchdog never writes (a blocked log must not
  // stop the deadlines).
  std::optional<std::string> summary_due(bool quiet, double every_s = 10);
  // Totals since start: "N cut at --handshake-timeout, M cut to make room, ...".
  std::string totals() const;
  bool any() const;  // anything cut or refused since start
  static constexpr uint64_t kLinesPerKind = 20;
  static constexpr double kLogWindowS = 10;

  uint32_t cap() const { return cap_; }
  double deadline_s() const { return deadline_s_; }

 private:
  struct Entry {
    int fd;
    int64_t deadline_ns;
    std::string source;
    PreAuthCut cut = PreAuthCut::kNone;
  };
  using Counts = std::array<uint64_t, kPreAuthEvents>;  // by PreAuthEvent
  void watch();
  void cut_locked(Entry& e, PreAuthCut why);
  // The pending connection to cut for a newcomer from `source`: nullptr for the newcomer.
  Entry* victim_locked(const std::string& source);
  PreAuthCut cut_of(uint64_t id) const;
  PreAuthCut release(uint64_t id);

  const uint32_t cap_;
  const double deadline_s_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Entry> pending_;  // by admission order: the first uncut is the oldest
  uint64_t next_id_ = 1;
  uint32_t uncut_ = 0;
  std::mt19937_64 rng_{std::random_device{}()};
  Counts total_{}, summarised_{};  // since start; at the last summary
  Counts lines_{};                 // lines of their own in this window (kLogWindowS)
  int64_t window_start_ns_ = 0;
  uint64_t unlogged_ = 0;          // events past kLinesPerKind in this window
  int64_t last_summary_ns_ = 0;
  bool stop_ = false;
  std::thread watchdog_;
};

}  // namespace iobench
