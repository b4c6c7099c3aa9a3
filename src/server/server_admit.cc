// Admission: accept -> authorise -> a session slot, each bounded by the pre-auth gate's
// deadline; the rest of a session is server.cc's.
#include <fmt/format.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "probe/placement.h"
#include "probe/probe.h"
#include "proto/fields.h"
#include "server/server_session.h"
#include "tls/tls.h"
#include "util/size.h"

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

}  // namespace

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

}  // namespace iobench
