// TLS settings as the command line gives them; plain data, no OpenSSL, so cli/ can hold them.
#pragma once

#include <cstdint>
#include <string>

#include "util/result.h"

namespace iobench::tls {

struct TlsOptions {
  std::string version = "1.3";         // "1.2" or "1.3" (client: exactly this; server: both)
  std::string cipher = "AES-128-GCM";  // AES-128-GCM, AES-256-GCM, CHACHA20-POLY1305
  // "socket" (OpenSSL on the fd), "bio" (memory BIOs) or "auto": bio where the engine moves
  // the records itself (uring), socket otherwise.
  std::string io = "auto";
  bool read_ahead = false;
  uint64_t max_fragment = 16384;    // SSL_set_max_send_fragment, 512..16384
  std::string ktls = "auto";        // auto, on, off
  std::string ca_file;              // client: trust anchors (default: the system's)
  bool insecure = false;            // client: skip verification (reported)
  std::string server_name;          // client: name or IP to verify; default the --connect host
  std::string cert_file, key_file;  // server
};

// Checks option values; the error names the bad value.
Status validate(const TlsOptions& o);

// The I/O model a side with `engine` runs: io_uring issues the socket I/O itself, so it needs
// the memory BIOs; the others take --tls-io as given (auto: socket, as Valkey).
inline std::string io_model_for(const TlsOptions& o, const std::string& engine) {
  if (o.io != "auto") return o.io;
  return engine == "uring" ? "bio" : "socket";
}

}  // namespace iobench::tls
