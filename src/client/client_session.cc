// A client's session set-up: the HELLO it sends, the connection, the TLS handshake, and the
// server's first answer (PROGRESS while it builds the payload, then ACK or ERROR).
#include <fmt/format.h>

#include <algorithm>

#include "client/client_internal.h"
#include "session/progress.h"
#include "session/session.h"
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

}  // namespace

proto::Hello make_hello(const ClientOptions& o, const BufPair& buf) {
  proto::Hello hello;
  hello.client_sends = !o.reverse;
  hello.bytes = o.payload.bytes;
  hello.send_buf_bytes = buf.send_bytes;
  hello.recv_buf_bytes = buf.recv_bytes;
  hello.socket = o.socket;
  hello.decompress = o.decompress;
  hello.source_window = o.source_window;
  hello.seed = o.payload.seed;
  hello.zstd_level = o.payload.zstd_level;
  hello.proto = name_of(o.proto);
  hello.engine = name_of(o.server_engine());
  hello.timeout_s = o.timeout_s;
  hello.tls_io = name_of(tls::io_model_for(o.tls, o.server_engine() == EngineKind::kUring));
  hello.tls_records = o.tls.records;
  hello.kernel_syscalls = o.syscalls != SyscallsMode::kOff;
  hello.tuning = o.tuning;
  hello.cpu = o.server_cpu();
  hello.auth = !o.auth_token.empty();
  hello.conns = o.conns;
  hello.adaptive = buf.adaptive;
  hello.fanout = o.fanout != FanoutShape::kOff;
  if (buf.adaptive) {
    hello.budget = o.budget;
    hello.buf_min = o.buf_min;
    hello.buf_max = o.buf_max;
  }
  return hello;
}

SideChoice client_choice(const ClientOptions& o) {
  return {o.client_engine(), tls::io_model_for(o.tls, o.client_engine() == EngineKind::kUring),
          o.client_cpu(), o.timeout_s};
}

Result<ClientSession> open_session(const ClientOptions& o, const HostPort& server,
                                   const tls::Context* tls_ctx, const proto::Hello& hello,
                                   SidePlan& plan, Engine& engine, const Payload* payload) {
  ClientSession cs;
  auto fd = connect_to(server, o.timeout_s, plan.socket);
  if (!fd) return std::unexpected(fd.error());
  cs.fd = std::move(*fd);
  cs.on_signal.emplace(cs.fd.get());
  // Until the server's first answer: a peer that accepts and says nothing is not an iobench
  // server, and is not given the whole --timeout.
  const double hello_timeout_s = std::min(o.hello_timeout_s, o.timeout_s);
  if (auto st = set_io_timeout(cs.fd.get(), hello_timeout_s); !st)
    return std::unexpected(st.error());
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
  if (auto st = prepare_side(plan, stream, engine, payload); !st) return std::unexpected(st.error());
  if (auto st = send_message(stream, hello); !st) return std::unexpected(st.error());
  auto reply = recv_message(stream);
  if (reply && std::holds_alternative<proto::Challenge>(*reply)) {
    // The server requires the token: its proof for this nonce goes back, the token never does.
    if (o.auth_token.empty())
      return fail(fmt::format("server {} asked for a token this client does not have",
                              server.str()));
    const auto& nonce = std::get<proto::Challenge>(*reply).nonce;
    if (auto st = send_message(stream, proto::Auth{tls::auth_proof(o.auth_token, nonce)}); !st)
      return std::unexpected(st.error());
    reply = recv_message(stream);
  }
  if (!reply) return fail(first_answer_error(server, reply.error(), hello_timeout_s));
  if (auto st = set_io_timeout(cs.fd.get(), o.timeout_s); !st) return std::unexpected(st.error());
  if (std::holds_alternative<proto::Progress>(*reply)) {
    // The server builds the payload it will send first (--reverse, not in its cache).
    ProgressLine shown(fmt::format("server {} is building the payload", server.str()), "",
                       o.quiet);
    while (reply && std::holds_alternative<proto::Progress>(*reply)) {
      const auto& p = std::get<proto::Progress>(*reply);
      shown.update(p.done_bytes, p.total_bytes, static_cast<double>(p.elapsed_ns) / 1e9);
      reply = recv_message(stream);
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
