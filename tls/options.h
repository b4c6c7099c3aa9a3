// TLS settings as the command line gives them; plain data, no OpenSSL, so cli/ can hold them.
#pragma once

#include <cstdint>
#include <string>

#include "net/stream.h"
#include "util/fields.h"
#include "util/result.h"

namespace iobench::tls {

// How a session's records are read and written, which both sides apply. Described once: the
// command line, the HELLO, the server's check, the JSON options and the CSV walk this list.
struct TlsRecords {
  bool read_ahead = false;
  uint64_t max_fragment = 16384;  // SSL_set_max_send_fragment
};

template <typename Self, typename Visit>
  requires DescribesAs<Self, TlsRecords>
void describe(Self& r, Visit&& visit) {
  visit(Field{.name = "tls_read_ahead",
              .flag = "--tls-read-ahead",
              .help = "Let OpenSSL read ahead (fewer read calls)"},
        r.read_ahead);
  visit(Field{.name = "tls_max_fragment",
              .flag = "--tls-max-fragment",
              .help = "Largest record sent, 512..16384 (default 16384)",
              .min = 512,
              .max = 16384,
              .size = true},
        r.max_fragment);
}

struct TlsOptions {
  TlsVersion version = TlsVersion::k13;  // client: exactly this; server: both
  std::string cipher = "AES-128-GCM";  // AES-128-GCM, AES-256-GCM, CHACHA20-POLY1305
  TlsIo io = TlsIo::kAuto;
  TlsRecords records;  // --tls-read-ahead, --tls-max-fragment: both sides
  Ktls ktls = Ktls::kAuto;
  std::string ca_file;              // client: trust anchors (default: the system's)
  bool insecure = false;            // client: skip verification (reported)
  std::string server_name;          // client: name or IP to verify; default the --connect host
  std::string cert_file, key_file;  // server
};

// The TLS settings a client asks for, described once: its --help group, the JSON options block
// and the CSV (the server's certificate and key are its own options: config/options.h).
template <typename Self, typename Visit>
  requires DescribesAs<Self, TlsOptions>
void describe(Self& o, Visit&& visit) {
  visit(Field{.name = "tls_version", .flag = "--tls-version", .help = "1.2 or 1.3 (default)"},
        o.version);
  visit(Field{.name = "tls_cipher",
              .flag = "--cipher",
              .help = "AES-128-GCM (default), AES-256-GCM, CHACHA20-POLY1305",
              .value_name = "NAME"},
        o.cipher);
  visit(Field{.name = "tls_io",
              .flag = "--tls-io",
              .help = "auto (default: bio for uring, socket otherwise), socket (OpenSSL on the "
                      "fd) or bio (memory BIOs)"},
        o.io);
  visit(Field{.name = "ktls", .flag = "--ktls", .help = "Kernel TLS: auto (default), on, off"},
        o.ktls);
  visit(Field{.name = "tls_ca",
              .flag = "--tls-ca",
              .help = "CA file to verify the server (default: system CAs)",
              .unreported = true,
              .value_name = "FILE"},
        o.ca_file);
  visit(Field{.name = "tls_insecure",
              .flag = "--tls-insecure",
              .help = "Do not verify the server (the report says so)"},
        o.insecure);
  visit(Field{.name = "tls_server_name",
              .flag = "--tls-server-name",
              .help = "Name to verify (default: the host)",
              .zero_is_unset = true,
              .value_name = "NAME"},
        o.server_name);
  visit(Field{.name = "records", .flatten = true}, o.records);
}

// Checks option values; the error names the bad value.
Status validate(const TlsOptions& o);

// The I/O model a side whose engine issues its own socket I/O (io_uring) or not runs: the
// former needs the memory BIOs; the others take --tls-io as given (auto: socket, as Valkey).
inline TlsIo io_model_for(const TlsOptions& o, bool engine_moves_records) {
  if (o.io != TlsIo::kAuto) return o.io;
  return engine_moves_records ? TlsIo::kBio : TlsIo::kSocket;
}

}  // namespace iobench::tls
