#include "tls/memory_pair.h"

#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

namespace iobench::tls {

Result<std::unique_ptr<MemoryPair>> MemoryPair::create(TlsVersion version,
                                                       const std::string& cipher) {
  auto id = make_ephemeral_identity();
  if (!id) return std::unexpected(id.error());
  TlsOptions o;
  o.version = version;
  o.cipher = cipher;
  o.ktls = Ktls::kOff;
  auto cctx = Context::client(o, &*id);
  if (!cctx) return std::unexpected(cctx.error());
  auto sctx = Context::server(o, &*id);
  if (!sctx) return std::unexpected(sctx.error());
  std::unique_ptr<MemoryPair> p(new MemoryPair);
  p->client_ctx_ = std::make_unique<Context>(std::move(*cctx));
  p->server_ctx_ = std::make_unique<Context>(std::move(*sctx));
  p->client_ = SSL_new(p->client_ctx_->get());
  p->server_ = SSL_new(p->server_ctx_->get());
  BIO *c = nullptr, *s = nullptr;
  // Room for a whole 64 KiB buffer's records in flight.
  if (!p->client_ || !p->server_ || BIO_new_bio_pair(&c, 256 << 10, &s, 256 << 10) != 1)
    return fail(last_ssl_error("cannot create the memory pair"));
  SSL_set_bio(p->client_, c, c);
  SSL_set_bio(p->server_, s, s);
  X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(p->client_), "127.0.0.1");
  SSL_set_connect_state(p->client_);
  SSL_set_accept_state(p->server_);
  for (int i = 0; i < 100; ++i) {
    const int rc = SSL_do_handshake(p->client_);
    const int rs = SSL_do_handshake(p->server_);
    if (rc == 1 && rs == 1) return p;
  }
  return fail(last_ssl_error("in-memory handshake did not finish"));
}

MemoryPair::~MemoryPair() {
  SSL_free(client_);
  SSL_free(server_);
}

Status MemoryPair::roundtrip(std::span<const std::byte> data, std::span<std::byte> out) {
  if (SSL_write(client_, data.data(), static_cast<int>(data.size())) !=
      static_cast<int>(data.size()))
    return fail(last_ssl_error("SSL_write failed"));
  size_t got = 0;
  while (got < data.size()) {
    const int n = SSL_read(server_, out.data() + got, static_cast<int>(out.size() - got));
    if (n <= 0) return fail(last_ssl_error("SSL_read failed"));
    got += static_cast<size_t>(n);
  }
  return {};
}

std::string MemoryPair::cipher() const { return SSL_get_cipher_name(client_); }

}  // namespace iobench::tls
