// The pre-authentication phase of every connection — the TLS handshake, the HELLO and the token
// check — under one deadline and one cap, as OpenSSH's LoginGraceTime and MaxStartups. A
// per-read timeout alone lets a ClientHello dripped one byte inside each read's timeout hold a
// handler for as long as the client likes; the gate's watchdog shuts the socket down at the
// deadline whatever the reads are doing. Connections still unauthenticated are capped, so a flood
// of slow handshakes cannot take the handlers a valid client needs: a new connection that finds
// every handler taken (or the cap reached) cuts the oldest pending one (a valid client finishes
// in milliseconds; the oldest is the one that has held its handler longest without saying who it
// is).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace iobench {

// Why a connection's pre-auth phase was cut short by the gate.
enum class PreAuthCut { kNone, kDeadline, kMadeRoom };

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

  // Admits the accepted socket `fd`; at the cap, the oldest pending connection is cut first.
  Ticket admit(int fd);
  // Cuts the oldest pending connection to make room for a new one; false when none is pending.
  bool cut_oldest();

  // Counted for the log: a client that presented a wrong (or no) token; one whose reads timed
  // out before the watchdog cut it (as one cut at the deadline).
  void count_refused_token();
  void count_late();
  // A summary line of the cuts and refusals since the last one, at most one per `every_s`
  // (the first at once); nullopt when nothing new or not yet due. Called by handler threads,
  // so the watchdog never writes (a blocked log must not stop the deadlines).
  std::optional<std::string> summary_due(double every_s = 10);
  // Totals since start: "N cut at the deadline, M cut to make room, K refused tokens".
  std::string totals() const;
  bool any() const;  // anything cut or refused since start

  uint32_t cap() const { return cap_; }
  double deadline_s() const { return deadline_s_; }

 private:
  struct Entry {
    int fd;
    int64_t deadline_ns;
    PreAuthCut cut = PreAuthCut::kNone;
  };
  struct Counts {
    uint64_t deadline = 0, made_room = 0, refused_tokens = 0;
  };
  void watch();
  void cut_locked(Entry& e, PreAuthCut why);
  bool cut_oldest_locked();
  PreAuthCut cut_of(uint64_t id) const;
  PreAuthCut release(uint64_t id);

  const uint32_t cap_;
  const double deadline_s_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Entry> pending_;  // by admission order: the first uncut is the oldest
  uint64_t next_id_ = 1;
  uint32_t uncut_ = 0;
  Counts total_, logged_;
  int64_t last_summary_ns_ = 0;
  bool stop_ = false;
  std::thread watchdog_;
};

}  // namespace iobench
