// The token proven, never sent (protocol 12): the server's CHALLENGE nonce and the client's AUTH
// proof. Tokens are random (the package's and the sweeps' are 32 bytes), so an HMAC a sniffer
// saw reveals nothing it could reuse: each session's nonce is fresh.
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

std::string auth_proof(std::string_view token, std::string_view nonce) {
  std::string msg = "iobench-auth-v1";
  msg += '\0';
  msg += nonce;
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
