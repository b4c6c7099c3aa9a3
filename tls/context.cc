// TLS contexts, the ephemeral loopback identity and the kTLS probe.
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "net/socket.h"
#include "tls/tls.h"

namespace iobench::tls {
namespace {

struct CipherNames {
  const char* name;
  const char* tls13;  // SSL_CTX_set_ciphersuites
  const char* tls12;  // SSL_CTX_set_cipher_list (ECDSA and RSA certificates)
};
constexpr CipherNames kCiphers[] = {
    {"AES-128-GCM", "TLS_AES_128_GCM_SHA256",
     "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256"},
    {"AES-256-GCM", "TLS_AES_256_GCM_SHA384",
     "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384"},
    {"CHACHA20-POLY1305", "TLS_CHACHA20_POLY1305_SHA256",
     "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"},
};

const CipherNames* find_cipher(const std::string& name) {
  for (const auto& c : kCiphers)
    if (name == c.name) return &c;
  return nullptr;
}

template <typename T, void (*F)(T*)>
struct Deleter {
  void operator()(T* p) const { F(p); }
};
using BioPtr = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using CtxPtr = std::unique_ptr<SSL_CTX, Deleter<SSL_CTX, SSL_CTX_free>>;

std::string bio_to_string(BIO* b) {
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  return std::string(data, static_cast<size_t>(n));
}

// Reads one byte, so a missing file, a permission problem and a directory all name their cause.
Status readable(const std::string& path, const char* option) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  char byte;
  if (fd < 0 || ::read(fd, &byte, 1) < 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    return fail(fmt::format("cannot read {} '{}': {}", option, path, std::strerror(err)));
  }
  ::close(fd);
  return {};
}

Status set_ciphers(SSL_CTX* ctx, const TlsOptions& o, bool all) {
  std::string suites, list;
  for (const auto& c : kCiphers) {
    if (!all && o.cipher != c.name) continue;
    if (!suites.empty()) suites.push_back(':');
    suites.append(c.tls13);
    if (!list.empty()) list.push_back(':');
    list.append(c.tls12);
  }
  if (SSL_CTX_set_ciphersuites(ctx, suites.c_str()) != 1 ||
      SSL_CTX_set_cipher_list(ctx, list.c_str()) != 1)
    return fail(last_ssl_error(fmt::format("cipher '{}' not supported by this OpenSSL", o.cipher)));
  return {};
}

}  // namespace

std::string library_version() { return OpenSSL_version(OPENSSL_VERSION); }

std::string last_ssl_error(const std::string& fallback) {
  unsigned long e = ERR_get_error();
  std::string out = fallback;
  if (e != 0) {
    const char* reason = ERR_reason_error_string(e);
    out = reason ? reason : fmt::format("OpenSSL error {:x}", e);
  }
  ERR_clear_error();
  return out;
}

Status validate(const TlsOptions& o) {
  if (!find_cipher(o.cipher))
    return fail(fmt::format(
        "invalid --cipher '{}': expected AES-128-GCM, AES-256-GCM or CHACHA20-POLY1305", o.cipher));
  if (auto st = check_fields(o.records, true); !st) return st;
  if (o.ktls == Ktls::kOn && o.io == TlsIo::kBio)
    return fail("--ktls on needs --tls-io socket: the kernel cannot encrypt memory BIO output");
  return {};
}

Result<Identity> make_ephemeral_identity() {
  PkeyPtr key(EVP_EC_gen("P-256"));
  X509Ptr cert(X509_new());
  if (!key || !cert) return fail(last_ssl_error("cannot create a key"));
  X509_set_version(cert.get(), 2);
  uint64_t serial = 0;
  RAND_bytes(reinterpret_cast<unsigned char*>(&serial), sizeof serial);
  ASN1_INTEGER_set_uint64(X509_get_serialNumber(cert.get()), serial >> 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 86400);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("iobench ephemeral"), -1, -1,
                             0);
  X509_set_issuer_name(cert.get(), name);
  X509V3_CTX v3;
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, cert.get(), cert.get(), nullptr, nullptr, 0);
  X509_EXTENSION* san =
      X509V3_EXT_conf_nid(nullptr, &v3, NID_subject_alt_name, "IP:127.0.0.1,IP:::1,DNS:localhost");
  if (!san) return fail(last_ssl_error("cannot add subjectAltName"));
  X509_add_ext(cert.get(), san, -1);
  X509_EXTENSION_free(san);
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0)
    return fail(last_ssl_error("cannot sign the certificate"));
  BioPtr cb(BIO_new(BIO_s_mem())), kb(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(cb.get(), cert.get());
  PEM_write_bio_PrivateKey(kb.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  return Identity{bio_to_string(cb.get()), bio_to_string(kb.get())};
}

const KtlsProbe& probe_ktls() {
  static const KtlsProbe probe = [] {
    KtlsProbe p;
    // The ULP can only be attached to an established TCP socket, so make one on loopback.
    auto listener = listen_on(HostPort{"127.0.0.1", 0});
    if (!listener) {
      p.reason = "probe failed: " + listener.error().message;
      return p;
    }
    auto client = connect_to(HostPort{"127.0.0.1", local_port(listener->get())}, 2, {});
    if (!client) {
      p.reason = "probe failed: " + client.error().message;
      return p;
    }
    std::string peer;
    auto server = accept_client(listener->get(), peer);
    if (setsockopt(client->get(), SOL_TCP, TCP_ULP, "tls", 3) == 0) {
      p.available = true;
    } else {
      p.reason = fmt::format("kernel has no tls ULP: setsockopt TCP_ULP \"tls\": {}",
                             std::strerror(errno));
    }
    return p;
  }();
  return probe;
}

Context::Context(Context&& o) noexcept
    : ctx_(std::exchange(o.ctx_, nullptr)),
      opts_(std::move(o.opts_)),
      ktls_enabled_(o.ktls_enabled_),
      ktls_status_(std::move(o.ktls_status_)) {}

Context& Context::operator=(Context&& o) noexcept {
  if (this != &o) {
    SSL_CTX_free(ctx_);
    ctx_ = std::exchange(o.ctx_, nullptr);
    opts_ = std::move(o.opts_);
    ktls_enabled_ = o.ktls_enabled_;
    ktls_status_ = std::move(o.ktls_status_);
  }
  return *this;
}

Context::~Context() { SSL_CTX_free(ctx_); }

namespace {

// kTLS: enabled only where the kernel has the ULP; `on` without it is an error naming the cause.
Status setup_ktls(SSL_CTX* ctx, const TlsOptions& o, bool& enabled, std::string& status) {
  if (o.ktls == Ktls::kOff) {
    status = "off";
    return {};
  }
  if (o.io == TlsIo::kBio) {
    status = "not used (--tls-io bio)";
    return {};
  }
  const KtlsProbe& p = probe_ktls();
  if (!p.available) {
    if (o.ktls == Ktls::kOn) return fail("--ktls on: " + p.reason);
    status = "unavailable (" + p.reason + ")";
    return {};
  }
  SSL_CTX_set_options(ctx, SSL_OP_ENABLE_KTLS);
  enabled = true;
  status = "requested";
  return {};
}

}  // namespace

Result<Context> Context::client(const TlsOptions& o, const Identity* pinned) {
  if (auto st = validate(o); !st) return std::unexpected(st.error());
  CtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) return fail(last_ssl_error("SSL_CTX_new failed"));
  const int v = o.version == TlsVersion::k12 ? TLS1_2_VERSION : TLS1_3_VERSION;
  SSL_CTX_set_min_proto_version(ctx.get(), v);
  SSL_CTX_set_max_proto_version(ctx.get(), v);
  if (auto st = set_ciphers(ctx.get(), o, false); !st) return std::unexpected(st.error());
  SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
  if (o.insecure) {
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
  } else {
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
    if (pinned) {
      // Loopback: trust exactly the certificate the forked server holds, nothing else.
      BioPtr b(BIO_new_mem_buf(pinned->cert_pem.data(), static_cast<int>(pinned->cert_pem.size())));
      X509Ptr cert(PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr));
      X509_STORE* store = SSL_CTX_get_cert_store(ctx.get());
      if (!cert || X509_STORE_add_cert(store, cert.get()) != 1)
        return fail(last_ssl_error("cannot pin the loopback certificate"));
      X509_STORE_set_flags(store, X509_V_FLAG_PARTIAL_CHAIN);
    } else if (!o.ca_file.empty()) {
      if (auto st = readable(o.ca_file, "--tls-ca"); !st) return std::unexpected(st.error());
      if (SSL_CTX_load_verify_locations(ctx.get(), o.ca_file.c_str(), nullptr) != 1)
        return fail(fmt::format("--tls-ca '{}': {}", o.ca_file, last_ssl_error("unusable")));
    } else {
      SSL_CTX_set_default_verify_paths(ctx.get());
    }
  }
  Context c(ctx.release(), o);
  if (auto st = setup_ktls(c.ctx_, o, c.ktls_enabled_, c.ktls_status_); !st)
    return std::unexpected(st.error());
  return c;
}

Result<Context> Context::server(const TlsOptions& o, const Identity* identity) {
  CtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx) return fail(last_ssl_error("SSL_CTX_new failed"));
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_max_proto_version(ctx.get(), TLS1_3_VERSION);
  if (auto st = set_ciphers(ctx.get(), o, true); !st) return std::unexpected(st.error());
  // No resumption: a ticket would be extra bytes on the wire after the handshake.
  SSL_CTX_set_num_tickets(ctx.get(), 0);
  SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
  if (identity) {
    BioPtr cb(
        BIO_new_mem_buf(identity->cert_pem.data(), static_cast<int>(identity->cert_pem.size())));
    BioPtr kb(
        BIO_new_mem_buf(identity->key_pem.data(), static_cast<int>(identity->key_pem.size())));
    X509Ptr cert(PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr));
    PkeyPtr key(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr));
    if (!cert || !key || SSL_CTX_use_certificate(ctx.get(), cert.get()) != 1 ||
        SSL_CTX_use_PrivateKey(ctx.get(), key.get()) != 1)
      return fail(last_ssl_error("cannot load the ephemeral identity"));
  } else {
    if (o.cert_file.empty() || o.key_file.empty())
      return fail("a TLS server needs both --tls-cert and --tls-key");
    if (auto st = readable(o.cert_file, "--tls-cert"); !st) return std::unexpected(st.error());
    if (auto st = readable(o.key_file, "--tls-key"); !st) return std::unexpected(st.error());
    if (SSL_CTX_use_certificate_chain_file(ctx.get(), o.cert_file.c_str()) != 1)
      return fail(fmt::format("--tls-cert '{}': {}", o.cert_file, last_ssl_error("unusable")));
    if (SSL_CTX_use_PrivateKey_file(ctx.get(), o.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      const std::string why = last_ssl_error("unusable");
      if (why == "key values mismatch")
        return fail(fmt::format("--tls-key '{}' does not match --tls-cert '{}' ({})", o.key_file,
                                o.cert_file, why));
      return fail(fmt::format("--tls-key '{}': {}", o.key_file, why));
    }
  }
  if (SSL_CTX_check_private_key(ctx.get()) != 1)
    return fail(fmt::format("--tls-key '{}' does not match --tls-cert '{}': {}", o.key_file,
                            o.cert_file, last_ssl_error("mismatch")));
  // kTLS is decided before any client speaks: the keys reach the kernel at the handshake's end.
  Context c(ctx.release(), o);
  if (auto st = setup_ktls(c.ctx_, o, c.ktls_enabled_, c.ktls_status_); !st)
    return std::unexpected(st.error());
  return c;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  unsigned char da[EVP_MAX_MD_SIZE], db[EVP_MAX_MD_SIZE];
  unsigned int la = 0, lb = 0;
  if (EVP_Digest(a.data(), a.size(), da, &la, EVP_sha256(), nullptr) != 1 ||
      EVP_Digest(b.data(), b.size(), db, &lb, EVP_sha256(), nullptr) != 1 || la != lb)
    return false;
  return CRYPTO_memcmp(da, db, la) == 0;
}

}  // namespace iobench::tls
