// TLS settings as the command line gives them; plain data, no OpenSSL, so cli/ can hold them.
#pragma once

#include <cstdint>
#include <string>

#include "net/stream.h"
#include "util/result.h"

namespace iobench::tls {

struct TlsOptions {
  std::string version = "1.3";         // "1.2" or "1.3" (client: exactly this; server: both)
  std::string cipher = "AES-128-GCM";  // AES-128-GCM, AES-256-GCM, CHACHA20-POLY1305
  TlsIo io = TlsIo::kAuto;
  bool read_ahead = false;
  uint64_t max_fragment = 16384;    // SSL_set_max_send_fragment, 512..16384
  Ktls ktls = Ktls::kAuto;
  std::string ca_file;              // client: trust anchors (default: the system's)
  bool insecure = false;            // client: skip verification (reported)
  std::string server_name;          // client: name or IP to verify; default the --connect host
  std::string cert_file, key_file;  // server
};

// Checks option values; the error names the bad value.
Status validate(const TlsOptions& o);

// The I/O model a side whose engine issues its own socket I/O (io_uring) or not runs: the
// former needs the memory BIOs; the others take --tls-io as given (auto: socket, as Valkey).
inline TlsIo io_model_for(const TlsOptions& o, bool engine_moves_records) {
  if (o.io != TlsIo::kAuto) return o.io;
  return engine_moves_records ? TlsIo::kBio : TlsIo::kSocket;
}

}  // namespace iobench::tls
