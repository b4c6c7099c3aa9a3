// OpenSSL for iobench: contexts (certificates, verification, versions, ciphers), an ephemeral
// self-signed identity for loopback, kTLS detection, and the TLS Stream in two I/O models.
// The only place that includes OpenSSL headers.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "net/stream.h"
#include "tls/options.h"
#include "util/result.h"

using SSL_CTX = struct ssl_ctx_st;
using SSL = struct ssl_st;

namespace iobench::tls {

// A key and self-signed certificate (PEM) made in memory: SAN IP:127.0.0.1, IP:::1, localhost.
struct Identity {
  std::string cert_pem;
  std::string key_pem;
};
Result<Identity> make_ephemeral_identity();

struct KtlsProbe {
  bool available = false;
  std::string reason;  // why not, when not
};
// Asks the kernel for the "tls" ULP on a connected loopback socket (once per process).
const KtlsProbe& probe_ktls();

class Context {
 public:
  // Client: verifies the chain against `ca_file` (or only `pinned` when given) and the name.
  static Result<Context> client(const TlsOptions& o, const Identity* pinned);
  // Server: cert and key from files, or `identity` (loopback).
  static Result<Context> server(const TlsOptions& o, const Identity* identity);
  Context(Context&&) noexcept;
  Context& operator=(Context&&) noexcept;
  ~Context();
  SSL_CTX* get() const { return ctx_; }
  const TlsOptions& options() const { return opts_; }
  bool ktls_enabled() const { return ktls_enabled_; }
  const std::string& ktls_status() const { return ktls_status_; }

 private:
  Context(SSL_CTX* ctx, TlsOptions o) : ctx_(ctx), opts_(std::move(o)) {}
  SSL_CTX* ctx_ = nullptr;
  TlsOptions opts_;
  bool ktls_enabled_ = false;
  std::string ktls_status_ = "off";
};

// What the handshake negotiated and how the data phase runs, for the report.
struct MemBioState;

class TlsStream final : public Stream, private WireCodec {
 public:
  ~TlsStream() override;
  // Client handshake on a connected blocking socket; `host` is verified unless insecure.
  static Result<std::unique_ptr<TlsStream>> connect(const Context& ctx, int fd,
                                                    const std::string& host);
  // Server handshake; the socket's receive timeout bounds it.
  static Result<std::unique_ptr<TlsStream>> accept(const Context& ctx, int fd);

  // Applies the data-phase model once the HELLO has set it: "bio" swaps the socket BIO for
  // memory BIOs, and every syscall then moves up to `net_buf_bytes`.
  Status configure(TlsIo io, bool read_ahead, uint64_t max_fragment,
                   uint64_t net_buf_bytes) override;

  IoResult read(std::span<std::byte> buf) override;
  IoResult write(std::span<const std::byte> buf) override;
  IoResult flush() override;
  WireCodec* wire_codec() override { return bio_model_ ? this : nullptr; }
  int fd() const override { return fd_; }
  Proto proto() const override { return Proto::kTls; }
  StreamCounters counters() const override { return counters_; }
  std::string describe(const IoResult& r) const override;
  void close() override;
  std::optional<TlsInfo> tls_info() const override;

 private:
  TlsStream(SSL* ssl, int fd, const Context& ctx);
  // Runs SSL_connect or SSL_accept to the end (EINTR retried), timing it.
  int handshake(int (*step)(SSL*));
  IoResult fail_from(int ret);
  IoResult flush_wbio();
  IoResult fill_rbio();

  // WireCodec (bio model only): the memory BIOs' buffers, handed to an engine.
  Status seal(std::span<const std::byte> plain) override;
  std::span<const std::byte> outbox() const override;
  void sent(size_t n) override;
  std::span<std::byte> inbox_space(size_t n) override;
  void received(size_t n) override;
  size_t inbox_pending() const override;
  IoResult open(std::span<std::byte> plain) override;

  SSL* ssl_;
  int fd_;
  bool bio_model_ = false;
  std::unique_ptr<MemBioState> mem_;  // bio model: ciphertext in and out
  std::string ktls_status_;
  std::string last_error_;
  int64_t handshake_ns_ = 0;
  uint64_t max_fragment_ = 16384;
  bool verified_ = false;
  StreamCounters counters_;

  friend struct Callbacks;
};

// "OpenSSL 3.0.19 27 Jan 2026", for reports.
std::string library_version();

// Equal strings, in time that depends on neither content nor length (SHA-256 of each, then
// CRYPTO_memcmp): for the server's --auth-token check.
bool constant_time_equal(std::string_view a, std::string_view b);

// The pre-auth challenge (tls/auth.cc): a fresh 32-byte nonce in hex (empty if the random
// generator failed), and the proof of a token for this session: HMAC-SHA256(token,
// "iobench-auth-v2" NUL server_nonce NUL client_nonce NUL hello), `hello` the HELLO frame as
// sent, in hex. Both sides' nonces make every proof new (a fake server cannot pick what the
// client signs), the HELLO ties it to the request. Compare proofs with proof_matches.
std::string random_nonce();
std::string auth_proof(std::string_view token, std::string_view server_nonce,
                       std::string_view client_nonce, std::string_view hello);
// Whether a presented proof is the expected one. Fails closed: an expected proof that could not
// be computed (empty: HMAC failed) matches nothing, an empty presented proof included.
bool proof_matches(std::string_view expected, std::string_view presented);

// OpenSSL's reason for the most recent failure on this thread, or `fallback`.
std::string last_ssl_error(const std::string& fallback);

}  // namespace iobench::tls
