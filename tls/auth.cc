// The token proven, never sent (protocol 13): the server's CHALLENGE nonce, the client's nonce and
// the HELLO under one HMAC in the client's AUTH. Tokens are random and at least 16 bytes (the
// package's and the sweeps' are 32), so an HMAC a sniffer or a fake server saw reveals nothing
// it could reuse or feasibly invert. It does not stop a relay on the path: only TLS does.
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <string>
#include <string_view>

#include "tls/tls.h"

namespace iobench::tls {
namespace {

std::string hex(const unsigned char* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[p[i] >> 4];
    out += kDigits[p[i] & 15];
  }
  return out;
}

}  // namespace

std::string random_nonce() {
  unsigned char b[32];
  if (RAND_bytes(b, sizeof b) != 1) return {};  // the caller refuses an empty nonce
  return hex(b, sizeof b);
}

std::string auth_proof(std::string_view token, std::string_view server_nonce,
                       std::string_view client_nonce, std::string_view hello) {
  std::string msg = "iobench-auth-v2";
  for (std::string_view part : {server_nonce, client_nonce, hello}) {
    msg += '\0';
    msg += part;
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
            reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), md, &len))
    return {};
  return hex(md, len);
}

bool proof_matches(std::string_view expected, std::string_view presented) {
  return !expected.empty() && constant_time_equal(expected, presented);
}

}  // namespace iobench::tls
