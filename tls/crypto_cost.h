// What the record protection itself costs on this host: one cipher's encrypt and decrypt, timed
// in-process on records of a given size (as `openssl speed -evp -bytes N` does), so a TLS report
// can split a side's CPU into the crypto it cannot avoid and the rest (record handling,
// syscalls). Small records cost more per byte: each has its own nonce set-up and tag.
#pragma once

#include <cstdint>
#include <string>

#include "util/result.h"

namespace iobench::tls {

struct CryptoCost {
  std::string cipher;              // --cipher's name: AES-128-GCM, AES-256-GCM, CHACHA20-POLY1305
  uint64_t record_bytes = 0;       // plaintext per record timed
  double encrypt_s_per_gib = 0;    // CPU seconds per GiB of records sealed
  double decrypt_s_per_gib = 0;    // ... and opened
};

// Times `cipher` on records of `record_bytes` (64..16384) for about 30 ms of CPU on this thread
// (15 ms each way); an unknown name is an error.
Result<CryptoCost> measure_crypto_cost(const std::string& cipher, uint64_t record_bytes);

}  // namespace iobench::tls
