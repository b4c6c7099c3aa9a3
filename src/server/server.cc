// The server's sessions: accept -> authorise (server_admit.cc) -> plan -> run -> log, each
// time-boxed and logged in one line; no client can take the server down. The connections of
// one --conns run form a group that measures the server side as a whole. The accept loops: server_loop.cc.
#include <fmt/format.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "engine/engine.h"
#include "net/interrupt.h"
#include "net/socket.h"
#include "payload/payload.h"
#include "payload/window.h"
#include "probe/placement.h"
#include "probe/probe.h"
#include "probe/syscall_counter.h"
#include "proto/fields.h"
#include "server/server.h"
#include "server/server_session.h"
#include "server/server_state.h"
#include "server/session_memory.h"
#include "server/session_slot.h"
#include "session/group.h"
#include "session/plan.h"
#include "session/session.h"
#include "session/test_hooks.h"
#include "tls/tls.h"
#include "util/size.h"
#include "util/test_throw.h"

namespace iobench {
namespace {

// This side's session, set up before the ACK.
struct Prepared {
  // Taken from --memory-budget before the engine is made; given back after it is gone (the
  // members are destroyed in reverse order).
  MemoryBudget::Hold memory;
  SidePlan plan;
  std::unique_ptr<Engine> engine;
  std::shared_ptr<GroupSide> group;
  std::shared_ptr<const Payload> payload;  // held while the data phase streams it
};

// The payload this server sends for `h` (progress goes to the client while it is built).
Result<std::shared_ptr<const Payload>> payload_for(const proto::Hello& h, ServerSession& s,
                                                   ServerState& state) {
  const ServerOptions& o = s.cfg.options;
  PayloadSpec spec = s.cfg.local_payload.value_or(PayloadSpec{});
  if (!s.cfg.local_payload) {
    spec.seed = h.seed;
    spec.cache_dir = o.cache_dir;
    spec.cache_max = o.cache_max;
  }
  spec.bytes =
      window_payload_bytes(h.payload_bytes ? h.payload_bytes : h.bytes, h.source_window);
  spec.zstd_level = static_cast<int>(h.zstd_level);
  // What a build costs is bounded before it starts: its size and level (CPU), then its memory
  // (the budget) and its time (--max-build-time).
  if (spec.bytes > o.max_payload)
    return fail(fmt::format("a payload of {} is above this server's --max-payload {}",
                            format_bytes_human(spec.bytes), format_bytes_human(o.max_payload)));
  if (spec.zstd_level > o.max_zstd_level)
    return fail(fmt::format("zstd level {} is above this server's --max-zstd-level {}",
                            spec.zstd_level, o.max_zstd_level));
  return state.payloads.get(spec, [&](const proto::Progress& progress) {
    return !interrupt::received() && send_message(*s.stream, progress).has_value();
  }, s.client);
}

// Plan: the same plan the client built from this HELLO, with its engine, socket options, group
// and payload; prepared (prepare_side) so the ACK starts the client's clock on a ready side.
Result<Prepared> prepare(const proto::Hello& h, ServerSession& s, ServerState& state) {
  const ServerOptions& o = s.cfg.options;
  Prepared p;
  p.plan = plan_side(h, Side::kServer, server_choice(h, o.idle_timeout_s));
  auto memory = take_session_memory(session_memory(p.plan, h), o, state.memory);
  if (!memory) return std::unexpected(memory.error());
  p.memory = std::move(*memory);
  auto engine = make_engine(p.plan.engine, p.plan.engine_options);
  if (!engine) return std::unexpected(engine.error());
  p.engine = std::move(*engine);
  if (auto st = apply_socket_options(s.fd, p.plan.socket); !st) return std::unexpected(st.error());
  const DataPhase& d = p.plan.data;
  if (p.plan.grouped) {
    auto g = state.groups.get(h, d.buf_bytes, d.is_sender, o.idle_timeout_s);
    if (!g) return std::unexpected(g.error());
    p.group = std::move(*g);
  }
  if (d.is_sender) {
    auto payload = payload_for(h, s, state);
    if (!payload) return std::unexpected(payload.error());
    p.payload = std::move(*payload);
  }
  if (auto st = prepare_side(p.plan, *s.stream, *p.engine, p.payload.get(), state.windows); !st)
    return std::unexpected(st.error());
  return p;
}

// prepare(), and when the server's memory is full, again while sessions end: a client past its
// share of the budget made room (its newest sessions cut), or sessions past their data phase
// are closing; their memory given back as their handlers end, waited for as a full slot is
// (at most SessionSlot::kSlotWaitNs).
Result<Prepared> prepare_fairly(const proto::Hello& h, ServerSession& s, ServerState& state) {
  auto p = prepare(h, s, state);
  if (p || p.error().kind != ErrorKind::kFull) return p;
  // Sessions past their data phase give their memory back within moments (a client's next run
  // comes as soon as it has the last one's figures, as the slot's wait knows).
  const bool cut =
      state.shares.make_room(s.client, ClientShares::Resource::kMemory, state.memory.limit()) > 0;
  if (!cut && state.ending.load() == 0) return p;
  const int64_t until = monotonic_ns() + SessionSlot::kSlotWaitNs;
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    p = prepare(h, s, state);
  } while (!p && p.error().kind == ErrorKind::kFull && monotonic_ns() < until);
  return p;
}

// The kernel counters see every thread of this process. A counting session (one connection)
// lets the threads of sessions that just ended finish first — the previous session's thread
// may still be reading its client's last message, logging and closing — so their syscalls do
// not land in this window. Bounded: a truly concurrent client is not waited for (it shows in
// the counts, as any other thread of the process would). Before the ACK, so outside the clocks.
// Only sessions past their data phase are waited for: one silent connection before its HELLO
// added 1 s to every counting run (0.036 -> 1.109 s median), and so would any long session
// (a slow reader) that any client can hold open.
void let_ended_sessions_finish(const DataPhase& d, const ServerState& state) {
  if (!d.kernel_syscalls) return;
  for (int i = 0; i < 1000 && state.ending.load() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// A session from the end of its data phase to its handler's return, counted in
// ServerState::ending (started by the data phase's data_done).
class EndingSession {
 public:
  explicit EndingSession(std::atomic<uint32_t>& n) : n_(n) {}
  EndingSession(const EndingSession&) = delete;
  EndingSession& operator=(const EndingSession&) = delete;
  ~EndingSession() {
    if (started_) --n_;
  }
  void start() {
    if (!std::exchange(started_, true)) ++n_;
  }

 private:
  std::atomic<uint32_t>& n_;
  bool started_ = false;
};

// Log: one line saying how the session ended.
void log_outcome(const ServerSession& s, const SidePlan& plan, const SideOutcome& ended) {
  const SessionOutcome& out = ended.session;
  const std::string what =
      fmt::format("{} {} buf {} over {}", plan.data.is_sender ? "sent" : "received",
                  format_bytes_human(out.mine.io.bytes), format_size(plan.data.buf_bytes),
                  out.mine.tls.version.empty() ? "tcp" : out.mine.tls.version);
  if (!out.error.empty()) {
    if (const int sig = interrupt::received())
      s.log(fmt::format("aborted: server stopping on {}: {} ({})", interrupt::name(sig), out.error,
                        what));
    else
      s.log(fmt::format("failed: {} ({})", out.error, what));
    return;
  }
  if (!out.peer) return s.log(fmt::format("failed: no result from the client ({})", what));
  if (!ended.mismatch.empty()) return s.log(fmt::format("failed: {} ({})", ended.mismatch, what));
  const double secs = static_cast<double>(out.mine.probe.wall_ns) / 1e9;
  s.log(fmt::format("ok: {} in {:.4f} s ({:.2f} Gbit/s), cpu {:.3f} s, {} calls, xxh3 ok", what,
                    secs, secs > 0 ? static_cast<double>(out.mine.io.bytes) * 8 / secs / 1e9 : 0.0,
                    static_cast<double>(out.mine.probe.cpu_ns) / 1e9, out.mine.io.calls));
}

// Aborted by a signal: close with a reset, so a peer blocked in write() (our receive window
// full) learns at once instead of at its own timeout.
class ResetIfStopping {
 public:
  explicit ResetIfStopping(int fd) : fd_(fd) {}
  ResetIfStopping(const ResetIfStopping&) = delete;
  ResetIfStopping& operator=(const ResetIfStopping&) = delete;
  ~ResetIfStopping() {
    if (!interrupt::received()) return;
    linger l{1, 0};
    setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  }

 private:
  int fd_;
};

}  // namespace

// accept -> authorise -> plan -> run -> log.
void handle_client(Fd fd, PreAuthGate::Ticket gate_ticket, const std::string& peer,
                   const std::string& client, const ServerConfig& cfg, ServerState& state) {
  // Released before `fd` closes (a local, destroyed before the parameters).
  PreAuthGate::Ticket ticket = std::move(gate_ticket);
  interrupt::Registration on_signal(fd.get());  // SIGTERM aborts the session at once
  const ResetIfStopping reset_if_stopping{fd.get()};
  ServerSession s{cfg, peer, client, fd.get(), nullptr};
  const std::optional<Admitted> admitted = admit(s, ticket, state);
  if (!admitted) return;
  s.failure_lines = &state.failure_lines;
  const proto::Hello& hello = admitted->hello;
  test_throw_bad_alloc("handler");
  ClientShares::Member member = state.shares.join(s.client, s.fd);
  // Before `prepared`: its count falls only once this session's memory is given back.
  EndingSession ending{state.ending};
  auto prepared = prepare_fairly(hello, s, state);
  if (!prepared) return s.reject(prepared.error().message);
  Prepared& p = *prepared;
  member.holds(p.memory.bytes(), p.payload.get(), p.payload ? p.payload->bytes().size() : 0);
  let_ended_sessions_finish(p.plan.data, state);
  if (auto st = send_message(*s.stream, proto::Ack{IOBENCH_VERSION}); !st)
    return s.log("failed: " + st.error().message);
  p.plan.data.data_done = [&ending] { ending.start(); };
  p.plan.data.max_decode_ratio = cfg.options.max_decode_ratio;
  const ServerOptions& o = cfg.options;
  SessionDeadlines::Ticket deadline =
      state.deadlines.watch(s.fd, session_bound(hello.bytes, o.min_rate, o.idle_timeout_s,
                                                o.max_session_time_s));
  if (auto st = set_io_timeout(s.fd, cfg.options.idle_timeout_s); !st)
    return s.log("failed: " + st.error().message);
  const std::unique_ptr<Stream> stalling = server_fault(*s.stream, hello.conn_index);
  const SideOutcome ended = run_side(stalling ? *stalling : *s.stream, *s.stream, *p.engine, p.plan,
                                     p.group.get(), hello.conn_index);
  ending.start();  // also when the data phase failed before its data_done
  // The bound is on this connection's bytes: not on the wait for its group's slower ones.
  auto cut = deadline.release();
  if (auto made_room = member.leave(); !cut) cut = std::move(made_room);
  if (cut)
    return s.log(fmt::format("failed: cut: {} ({} of {} moved in all)", *cut,
                             format_bytes_human(ended.session.mine.io.bytes),
                             format_bytes_human(hello.bytes)));
  // Every connection of a group gets the server side's figures once the last one has ended.
  if (p.group && ended.session.error.empty())
    (void)send_message(*s.stream, p.group->wait(cfg.options.idle_timeout_s));
  server_slow_end();
  s.stream->close();
  log_outcome(s, p.plan, ended);
}

}  // namespace iobench
