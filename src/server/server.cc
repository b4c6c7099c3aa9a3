// The server's sessions: accept -> authorise -> plan -> run -> log, each time-boxed and logged
// in one line; no client can take the server down. The connections of one --conns run form a
// group that measures the server side as a whole. The accept loops: server_loop.cc.
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
#include "server/server_state.h"
#include "net/local_peer.h"
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

// Every size the client asks for is checked against the server's own limits.
Status validate_hello(const proto::Hello& h, const ServerOptions& o) {
  // The HELLO's names, as the plan (server_choice) will read them.
  const std::optional<Proto> proto = parse_name<Proto>(h.proto);
  if (!proto) return fail(fmt::format("unsupported proto '{}'", h.proto));
  const std::optional<EngineKind> engine = parse_name<EngineKind>(h.engine);
  if (!engine)
    return fail(
        fmt::format("unknown engine '{}' (available: {})", h.engine, names_text<EngineKind>()));
  const bool tls = *proto == Proto::kTls;
  const std::optional<tls::TlsIo> io = parse_name<tls::TlsIo>(h.tls_io);
  if (tls && (!io || *io == tls::TlsIo::kAuto))
    return fail(fmt::format("unknown TLS I/O model '{}'", h.tls_io));
  if (tls && *engine == EngineKind::kUring && *io != tls::TlsIo::kBio)
    return fail("engine uring over TLS needs the TLS I/O model bio");
  if (h.tuning.fixed_buffers && tls) return fail("fixed buffers need proto tcp");
  if (h.tuning.sqpoll && !o.allow_sqpoll)
    return fail(
        "--sqpoll refused: its kernel thread would spin one of this server's cores for the "
        "whole session (the server allows it with --allow-sqpoll)");
  if (auto st = check_fields(h, false); !st) return st;  // bounds in the field list
  if (auto st = check_cpu_usable(static_cast<int>(h.cpu), "server"); !st)
    return fail("--cpus: " + st.error().message);
  if (h.bytes < kMinBytes || h.bytes > o.max_bytes)
    return fail(fmt::format("bytes {} outside this server's range {}..{}", h.bytes, kMinBytes,
                            o.max_bytes));
  if (h.conns > o.max_conns)
    return fail(fmt::format("{} connections asked for, this server's --max-conns is {}", h.conns,
                            o.max_conns));
  if (h.conn_index >= h.conns)
    return fail(fmt::format("connection index {} of {} connections", h.conn_index, h.conns));
  if (h.payload_bytes != 0 && (h.payload_bytes < h.bytes || h.payload_bytes > o.max_bytes))
    return fail(fmt::format("payload of {} bytes cannot hold {} bytes (limit {})", h.payload_bytes,
                            h.bytes, o.max_bytes));
  if (h.adaptive) {
    // A fan-out writer's chunk is one buffer for every replica: the budget holds one, not N.
    if (auto st = validate_limits({h.budget, h.buf_min, h.buf_max}, h.fanout ? 1 : h.conns); !st)
      return st;
  }
  return {};
}

}  // namespace

namespace {

// What an admission that failed counts as at the gate (its own cuts it counted itself).
PreAuthEvent event_of(PreAuthCut cut, const Error& e) {
  if (cut != PreAuthCut::kNone)
    return cut == PreAuthCut::kDeadline ? PreAuthEvent::kDeadline : PreAuthEvent::kMadeRoom;
  if (e.kind == ErrorKind::kTimedOut) return PreAuthEvent::kTimedOut;
  return e.kind == ErrorKind::kRefused ? PreAuthEvent::kRefusedToken : PreAuthEvent::kRejected;
}

// Why the gate cut a connection, in the words of its log line.
std::string cut_reason(PreAuthCut cut, const ServerOptions& o) {
  if (cut == PreAuthCut::kDeadline)
    return fmt::format("no hello within {} s of the accept (--handshake-timeout: the TLS "
                       "handshake, the hello and the token's challenge)",
                       o.handshake_timeout_s);
  return fmt::format("cut to make room: every handler was taken (2 x --max-conns {}) and this "
                     "connection's source held the most not yet authenticated (one of them, at "
                     "random)",
                     o.max_conns);
}

}  // namespace

namespace {

// Looks at the first byte without consuming it: 0x16 opens a TLS ClientHello, 'I' our HELLO.
Result<bool> first_byte_is_tls(int fd, double timeout_s) {
  unsigned char b = 0;
  ssize_t n;
  do {
    n = ::recv(fd, &b, 1, MSG_PEEK);
  } while (n < 0 && errno == EINTR);
  if (n == 0) return fail("peer closed before saying hello");
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return fail(fmt::format("no hello within {} s", timeout_s));
    return fail(std::strerror(errno));
  }
  return b == 0x16;
}

// Sets up the transport the client chose, or explains why not (logged, and sent when possible).
Result<std::unique_ptr<Stream>> open_stream(int fd, const ServerConfig& cfg) {
  auto is_tls = first_byte_is_tls(fd, cfg.options.handshake_timeout_s);
  if (!is_tls) return std::unexpected(is_tls.error());
  if (*is_tls && !cfg.tls && !cfg.tls_elsewhere.empty())
    return fail(fmt::format("TLS ClientHello on the TCP port: TLS is served on {}",
                            cfg.tls_elsewhere));
  if (*is_tls && !cfg.tls)
    return fail(
        "TLS ClientHello, but this server has no certificate (start it with "
        "--tls-cert/--tls-key)");
  if (!*is_tls) return std::unique_ptr<Stream>(std::make_unique<FdStream>(fd));
  auto t = tls::TlsStream::accept(*cfg.tls, fd);
  if (!t) return fail("TLS handshake failed: " + t.error().message);
  return std::unique_ptr<Stream>(std::move(*t));
}

// One accepted connection: where log lines and refusals go.
struct ServerSession {
  const ServerConfig& cfg;
  std::string peer;
  std::string client;  // what fair shares count it as (client_key)
  int fd;
  std::unique_ptr<Stream> stream;
  int64_t hello_deadline_ns = 0;  // the HELLO's, and the AUTH's: --handshake-timeout from greet
  ClientLogLimit* failure_lines = nullptr;  // set once authenticated: its failures are limited
  void log(const std::string& text) const {
    // A session that ended well, or one a stopping server aborted, always has its line.
    if (failure_lines && !text.starts_with("ok:") && !text.starts_with("aborted:")) {
      std::vector<std::string> summaries;
      const bool mine = failure_lines->may_log(client, summaries);
      for (const std::string& line : summaries) log_line(cfg, "-", line);
      if (!mine) return;
    }
    log_line(cfg, peer, text);
  }
  // Logged unless `logged` is false (the gate's limit: the summary counts it); sent when the
  // stream is up.
  void reject(const std::string& why, bool logged = true) {
    if (logged) log("rejected: " + why);
    if (!stream) return;
    (void)send_message(*stream, proto::ErrorMsg{why});
    stream->close();
  }
};

// Accept: the transport the client chose and its HELLO, both within --handshake-timeout (the
// per-read timeout here; the pre-auth gate's watchdog bounds the whole, however the bytes drip).
// Anything else is logged (and answered when it can be) here.
// The reason is logged by the caller (and sent once the stream is up): one line per connection.
Result<proto::Hello> greet(ServerSession& s) {
  const ServerOptions& o = s.cfg.options;
  const int64_t deadline = monotonic_ns() + static_cast<int64_t>(o.handshake_timeout_s * 1e9);
  s.hello_deadline_ns = deadline;
  if (auto st = set_io_timeout(s.fd, o.handshake_timeout_s); !st) return std::unexpected(st.error());
  auto opened = open_stream(s.fd, s.cfg);
  if (!opened) return std::unexpected(opened.error());
  s.stream = std::move(*opened);
  // Before authentication only a small HELLO is read (the AUTH next): anything else is refused
  // on its header.
  auto m = recv_expected(*s.stream, proto::Type::kHello, proto::kMaxPreAuthBodyBytes, deadline);
  if (!m && m.error().kind == ErrorKind::kTimedOut)
    return fail(fmt::format("no hello within {} s", o.handshake_timeout_s), ErrorKind::kTimedOut);
  if (!m) return std::unexpected(m.error());
  auto* hello = std::get_if<proto::Hello>(&*m);
  if (!hello) return fail(fmt::format("expected HELLO, got {}", proto::type_name(*m)));
  return std::move(*hello);
}

// The token proven, never sent: a fresh nonce out; back, the client's nonce and the HMAC under
// the token of both nonces and the HELLO (protocol 13), within the HELLO's deadline.
Status authenticate(const proto::Hello& h, ServerSession& s) {
  const std::string& token = s.cfg.options.auth_token;
  if (token.empty()) return {};
  if (!h.auth) return fail("this server requires --auth-token", ErrorKind::kRefused);
  const std::string nonce = tls::random_nonce();
  if (nonce.empty()) return fail("no random nonce for the token's challenge");
  if (auto st = send_message(*s.stream, proto::Challenge{nonce}); !st) return st;
  auto m = recv_expected(*s.stream, proto::Type::kAuth, proto::kMaxPreAuthBodyBytes,
                        s.hello_deadline_ns);
  if (!m && m.error().kind == ErrorKind::kTimedOut)
    return fail(fmt::format("no AUTH within {} s", s.cfg.options.handshake_timeout_s),
                ErrorKind::kTimedOut);
  if (!m) return std::unexpected(m.error());
  const auto* auth = std::get_if<proto::Auth>(&*m);
  if (!auth)
    return fail(fmt::format("expected AUTH, got {}", proto::type_name(*m)), ErrorKind::kRefused);
  // The client's nonce is its share of what is signed: fresh, and not ours sent back.
  if (auth->client_nonce.size() != nonce.size() || auth->client_nonce == nonce)
    return fail("AUTH without a nonce of the client's own", ErrorKind::kRefused);
  const std::vector<std::byte> frame = proto::encode(h);  // the HELLO as the client sent it
  const std::string expected =
      tls::auth_proof(token, nonce, auth->client_nonce,
                      {reinterpret_cast<const char*>(frame.data()), frame.size()});
  if (expected.empty()) return fail("the token's proof could not be computed (HMAC failed)");
  if (!tls::proof_matches(expected, auth->proof))
    return fail("wrong --auth-token", ErrorKind::kRefused);
  return {};
}

// Authorise: the token before anything else about the request is looked at or answered in
// detail; then the transport and the request's bounds. This server's capacity is the last
// question (admit: a SessionSlot).
Status authorise(const proto::Hello& h, ServerSession& s) {
  const ServerOptions& o = s.cfg.options;
  if (auto st = authenticate(h, s); !st) return st;  // admit counts it (event_of)
  const Proto transport = s.stream->proto();
  if (s.cfg.tls && transport != Proto::kTls)
    return fail("this server requires TLS (use --proto tls)");
  if (parse_name<Proto>(h.proto) != transport)
    return fail(
        fmt::format("HELLO asks for proto '{}' on a {} connection", h.proto, name_of(transport)));
  if (auto st = validate_hello(h, o); !st) return st;
  if (h.tuning.zerocopy && transport != Proto::kTcp) return fail("zerocopy needs proto tcp");
  return {};
}

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
  });
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

// prepare(), and when the server's memory is full, once more after a client past its share of
// the budget made room (its newest sessions cut, their memory given back as their handlers
// end: waited for as a full slot is, at most SessionSlot::kSlotWaitNs).
Result<Prepared> prepare_fairly(const proto::Hello& h, ServerSession& s, ServerState& state) {
  auto p = prepare(h, s, state);
  if (p || p.error().kind != ErrorKind::kFull) return p;
  if (state.shares.make_room(s.client, ClientShares::Resource::kMemory, state.memory.limit()) == 0)
    return p;
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

// An authorised client: its HELLO and its session slot.
struct Admitted {
  proto::Hello hello;
  SessionSlot slot;
};

// Authorise, then a session slot (the sessions already authenticated against --max-conns):
// when none is free, a client past its share of them makes room first (ClientShares).
Result<SessionSlot> authorise_and_claim(const proto::Hello& h, ServerSession& s,
                                        ServerState& state) {
  if (auto st = authorise(h, s); !st) return std::unexpected(st.error());
  const uint32_t max = s.cfg.options.max_conns;
  if (state.authenticated.load() >= max)
    state.shares.make_room(s.client, ClientShares::Resource::kSlots, max);
  if (auto slot = SessionSlot::claim(state.authenticated, max, s.hello_deadline_ns))
    return std::move(*slot);
  return fail(fmt::format("server busy: {} sessions at once (--max-conns {})",
                          state.authenticated.load(), max));
}

// Accept and authorise, under the gate: the HELLO of an authorised client, or nothing (one
// line logged: the refusal, or the gate's cut whatever the cut made the reads see; the reason
// sent when the stream is up; the gate's summary when due).
std::optional<Admitted> admit(ServerSession& s, PreAuthGate::Ticket& ticket, ServerState& state) {
  Result<proto::Hello> hello = greet(s);
  Result<SessionSlot> slot = fail("cut");  // a connection cut before authorise: replaced below
  if (!hello)
    slot = std::unexpected(hello.error());
  else if (ticket.cut() == PreAuthCut::kNone)
    slot = authorise_and_claim(*hello, s, state);
  // The cut, if the watchdog made one, explains whatever the reads saw; a connection released
  // uncut is never cut after. One the reads' own deadline beat the watchdog to counts as timed
  // out; a wrong token, a bad frame or a request past the bounds each as its own kind.
  const PreAuthCut cut = ticket.release();
  if (cut != PreAuthCut::kNone) slot = fail(cut_reason(cut, s.cfg.options));  // slot given back
  if (slot) return Admitted{std::move(*hello), std::move(*slot)};
  bool logged = true;
  if (state.preauth) {
    const PreAuthEvent event = event_of(cut, slot.error());
    if (cut == PreAuthCut::kNone) state.preauth->count(event);
    logged = state.preauth->may_log(event);
  }
  s.reject(slot.error().message, logged);
  log_preauth_summary(s.cfg, state);
  return std::nullopt;
}

}  // namespace

// accept -> authorise -> plan -> run -> log.
void handle_client(Fd fd, PreAuthGate::Ticket gate_ticket, const std::string& peer,
                   const ServerConfig& cfg, ServerState& state) {
  // Released before `fd` closes (a local, destroyed before the parameters).
  PreAuthGate::Ticket ticket = std::move(gate_ticket);
  interrupt::Registration on_signal(fd.get());  // SIGTERM aborts the session at once
  const ResetIfStopping reset_if_stopping{fd.get()};
  const ServerOptions& opts = cfg.options;
  ServerSession s{cfg, peer,
                  client_key(fd.get(), peer, static_cast<int>(opts.source_block_v4),
                             static_cast<int>(opts.source_block_v6)),
                  fd.get(), nullptr};
  const std::optional<Admitted> admitted = admit(s, ticket, state);
  if (!admitted) return;
  s.failure_lines = &state.failure_lines;
  const proto::Hello& hello = admitted->hello;
  test_throw_bad_alloc("handler");
  ClientShares::Member member = state.shares.join(s.client, s.fd);
  auto prepared = prepare_fairly(hello, s, state);
  if (!prepared) return s.reject(prepared.error().message);
  Prepared& p = *prepared;
  member.holds(p.memory.bytes(), p.payload.get(), p.payload ? p.payload->bytes().size() : 0);
  let_ended_sessions_finish(p.plan.data, state);
  if (auto st = send_message(*s.stream, proto::Ack{IOBENCH_VERSION}); !st)
    return s.log("failed: " + st.error().message);
  EndingSession ending{state.ending};
  p.plan.data.data_done = [&ending] { ending.start(); };
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
