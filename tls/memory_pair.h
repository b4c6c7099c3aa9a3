// Two TLS endpoints joined by an in-memory BIO pair: the cost of records alone, no syscalls.
// For the microbenchmarks.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "tls/tls.h"
#include "util/result.h"

namespace iobench::tls {

class MemoryPair {
 public:
  static Result<std::unique_ptr<MemoryPair>> create(TlsVersion version,
                                                    const std::string& cipher);
  ~MemoryPair();
  // SSL_write of `data` on the client, then SSL_read on the server until `out` holds all of it.
  Status roundtrip(std::span<const std::byte> data, std::span<std::byte> out);
  std::string cipher() const;

 private:
  MemoryPair() = default;
  std::unique_ptr<Context> client_ctx_, server_ctx_;
  SSL* client_ = nullptr;
  SSL* server_ = nullptr;
};

}  // namespace iobench::tls
