// A client's session set-up: the HELLO it sends, the connection, the TLS handshake, and the
// server's first answer (PROGRESS while it builds the payload, then ACK or ERROR).
#include <fmt/format.h>

#include <algorithm>

#include "client/client_internal.h"
#include "session/progress.h"
#include "session/session.h"
#include "session/test_hooks.h"
#include "tls/tls.h"

namespace iobench {
namespace {

// A handshake that dies this way usually met a server without TLS.
std::string tls_hint(const std::string& why) {
  for (const char* s :
       {"truncated", "wrong version number", "peer closed", "record layer", "reset by peer"})
    if (why.find(s) != std::string::npos)
      return " (is the server running with --tls-cert/--tls-key, and is this its TLS port? A "
             "server with --tls-listen serves TLS on that port only)";
  return "";
}

// Why the server's first answer did not come: silence, or another protocol.
std::string first_answer_error(const HostPort& server, const Error& why, double limit_s) {
  const std::string& text = why.message;
  if (why.kind == ErrorKind::kNotPeer)
    return fmt::format("{} is not an iobench server{}", server.str(),
                       text.starts_with(proto::kNotIobenchPeer)
                           ? text.substr(proto::kNotIobenchPeer.size())
                           : ": " + text);
  if (why.kind == ErrorKind::kTimedOut)
    return fmt::format(
        "no answer from server {} within {} s of the HELLO (--hello-timeout): not an iobench "
        "server, or a TLS server asked for TCP",
        server.str(), limit_s);
  return fmt::format("no answer from server {}: {}", server.str(), text);
}

// The AUTH answering a CHALLENGE: a nonce of this client's, and the proof over both nonces and
// the HELLO as sent (protocol 13).
Result<proto::Auth> prove_token(const std::string& token, const std::string& server_nonce,
                                const proto::Hello& hello) {
  proto::Auth auth;
  auth.client_nonce = tls::random_nonce();
  if (auth.client_nonce.empty()) return fail("no random nonce (the random generator failed)");
  const std::vector<std::byte> frame = proto::encode(hello);
  auth.proof = tls::auth_proof(token, server_nonce, auth.client_nonce,
                               {reinterpret_cast<const char*>(frame.data()), frame.size()});
  if (auth.proof.empty()) return fail("it could not be computed (HMAC failed)");
  return auth;
}

}  // namespace

Result<ClientSession> open_session(const ClientPlan& plan, const ClientReach& reach,
                                   const ConnPlan& conn, uint64_t group_id,
                                   const tls::Context* tls_ctx, Engine& engine) {
  const ClientAccess& access = plan.access;
  const HostPort& server = reach.servers[conn.server];
  ClientSession cs;
  cs.side = conn.side;
  auto fd = connect_to(server, access.timeout_s, cs.side.socket);
  if (!fd) return std::unexpected(fd.error());
  cs.fd = std::move(*fd);
  cs.on_signal.emplace(cs.fd.get());
  // Until the server's first answer: a peer that accepts and says nothing is not an iobench
  // server, and is not given the whole --timeout.
  const double hello_timeout_s = std::min(access.hello_timeout_s, access.timeout_s);
  if (auto st = set_io_timeout(cs.fd.get(), hello_timeout_s); !st)
    return std::unexpected(st.error());
  client_slow_handshake_step();
  if (tls_ctx) {
    auto t = tls::TlsStream::connect(*tls_ctx, cs.fd.get(), server.host);
    if (!t)
      return fail(fmt::format("TLS handshake with {} failed: {}{}", server.str(), t.error().message,
                              tls_hint(t.error().message)));
    cs.stream = std::move(*t);
  } else {
    cs.stream = std::make_unique<FdStream>(cs.fd.get());
  }
  Stream& stream = *cs.stream;
  // Before the HELLO: the server's receive clock starts once it has sent its ACK.
  if (auto st = prepare_side(cs.side, stream, engine, reach.payload, client_windows()); !st)
    return std::unexpected(st.error());
  proto::Hello hello = conn.hello;
  hello.group_id = group_id;  // the run's identity, drawn when it starts: not a plan
  client_slow_handshake_step();
  if (auto st = send_message(stream, hello); !st) return std::unexpected(st.error());
  // The ACK comes by --build-timeout however the server reports or drips its frames.
  const int64_t ack_deadline =
      monotonic_ns() + static_cast<int64_t>(access.build_timeout_s * 1e9);
  auto reply = recv_message(
      stream, std::min(ack_deadline, monotonic_ns() + static_cast<int64_t>(hello_timeout_s * 1e9)));
  if (reply && std::holds_alternative<proto::Challenge>(*reply)) {
    // The server requires the token: its proof for this nonce goes back, the token never does.
    if (access.auth_token.empty())
      return fail(fmt::format("server {} asked for a token this client does not have",
                              server.str()));
    auto auth = prove_token(access.auth_token, std::get<proto::Challenge>(*reply).nonce, hello);
    if (!auth) return fail(fmt::format("the token's proof for server {}: {}", server.str(),
                                       auth.error().message));
    if (auto st = send_message(stream, *auth); !st) return std::unexpected(st.error());
    reply = recv_message(stream, ack_deadline);
  }
  if (!reply) return fail(first_answer_error(server, reply.error(), hello_timeout_s));
  if (auto st = set_io_timeout(cs.fd.get(), access.timeout_s); !st) return std::unexpected(st.error());
  if (std::holds_alternative<proto::Progress>(*reply)) {
    // The server builds the payload it will send first (--reverse, not in its cache).
    ProgressLine shown(fmt::format("server {} is building the payload", server.str()), "",
                       access.quiet);
    while (reply && std::holds_alternative<proto::Progress>(*reply)) {
      const auto& p = std::get<proto::Progress>(*reply);
      shown.update(p.done_bytes, p.total_bytes, static_cast<double>(p.elapsed_ns) / 1e9);
      if (monotonic_ns() > ack_deadline)
        return fail(fmt::format("server {} reported progress but sent no ACK within "
                                "--build-timeout {} s of the HELLO",
                                server.str(), access.build_timeout_s));
      reply = recv_message(stream, ack_deadline);
    }
  }
  if (!reply)
    return fail(fmt::format("no answer from server {}: {}", server.str(), reply.error().message));
  if (auto* e = std::get_if<proto::ErrorMsg>(&*reply))
    return fail(fmt::format("server {} refused: {}", server.str(), e->message));
  if (!std::holds_alternative<proto::Ack>(*reply))
    return fail(fmt::format("server {} answered {} instead of ACK", server.str(),
                            proto::type_name(*reply)));
  return cs;
}

}  // namespace iobench
