#include "tls/crypto_cost.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <time.h>

#include <array>
#include <memory>
#include <vector>

namespace iobench::tls {
namespace {

int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1'000'000'000 + ts.tv_nsec;
}

const EVP_CIPHER* evp_for(const std::string& cipher) {
  if (cipher == "AES-128-GCM") return EVP_aes_128_gcm();
  if (cipher == "AES-256-GCM") return EVP_aes_256_gcm();
  if (cipher == "CHACHA20-POLY1305") return EVP_chacha20_poly1305();
  return nullptr;
}

// Seconds of CPU per GiB to seal (or open) 16 KiB records, each with its own nonce and tag, as
// a TLS 1.3 record layer does.
Result<double> time_records(const EVP_CIPHER* evp, bool encrypt, size_t record) {
  constexpr int64_t kMinNs = 15'000'000;
  std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)> ctx(EVP_CIPHER_CTX_new(),
                                                                       EVP_CIPHER_CTX_free);
  std::array<unsigned char, 32> key{};
  std::array<unsigned char, 12> iv{};
  std::array<unsigned char, 16> tag{};
  std::vector<unsigned char> in(record, 0x5a), out(record + 32);
  if (!ctx || EVP_CipherInit_ex(ctx.get(), evp, nullptr, key.data(), iv.data(), encrypt) != 1)
    return fail("cannot set up the cipher for the crypto cost");
  uint64_t records = 0;
  const int64_t start = thread_cpu_ns();
  int64_t spent = 0;
  while (spent < kMinNs || records < 64) {
    iv[11] = static_cast<unsigned char>(records);
    int n = 0;
    if (EVP_CipherInit_ex(ctx.get(), nullptr, nullptr, nullptr, iv.data(), encrypt) != 1 ||
        EVP_CipherUpdate(ctx.get(), out.data(), &n, in.data(), static_cast<int>(record)) != 1)
      return fail("the cipher failed while timing the crypto cost");
    if (encrypt) {
      (void)EVP_CipherFinal_ex(ctx.get(), out.data() + n, &n);
      (void)EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_GET_TAG, 16, tag.data());
    }
    // Opening random bytes fails the tag check at Final; the work timed is the same.
    ++records;
    spent = thread_cpu_ns() - start;
  }
  const double bytes = static_cast<double>(records * record);
  return static_cast<double>(spent) / 1e9 / (bytes / static_cast<double>(1ull << 30));
}

}  // namespace

Result<CryptoCost> measure_crypto_cost(const std::string& cipher, uint64_t record_bytes) {
  const EVP_CIPHER* evp = evp_for(cipher);
  if (!evp) return fail(fmt::format("no crypto cost for cipher '{}'", cipher));
  if (record_bytes < 64 || record_bytes > 16384)
    return fail(fmt::format("no crypto cost for {}-byte records (64..16384)", record_bytes));
  auto enc = time_records(evp, true, record_bytes);
  if (!enc) return std::unexpected(enc.error());
  auto dec = time_records(evp, false, record_bytes);
  if (!dec) return std::unexpected(dec.error());
  return CryptoCost{cipher, record_bytes, *enc, *dec};
}

}  // namespace iobench::tls
