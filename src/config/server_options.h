// The server's validated configuration (`iobench server`): what cli/ fills and server/ reads.
#pragma once

#include <cstdint>
#include <string>

#include "config/options.h"

namespace iobench {

struct ServerOptions {
  std::string listen = "127.0.0.1:5210";
  // Set: TLS is served here and `listen` serves TCP only (a primary's tls-port beside its port).
  std::string tls_listen;
  double handshake_timeout_s = 5;
  double idle_timeout_s = 30;
  // Set: the server stops (as on SIGTERM) when stdin ends or stays silent this long, so one
  // started over ssh dies with its controller even when the link dies silently.
  double stdin_lease_s = 0;
  // The largest --bytes a client may ask for: a small host holds it (--memory-budget bounds
  // the sum over sessions).
  uint64_t max_bytes = kGiB;
  // Bytes the sessions may make the server hold at once: payloads, buffers, rings, copies
  // (0: a quarter of the host's memory).
  uint64_t memory_budget = 0;
  // Bytes of one session's own buffers (receive buffer, io_uring ring, TLS buffers).
  uint64_t session_memory = 256 * kMiB;
  // Bytes a second a session must move over each --idle-timeout after the first (0: no bound).
  uint64_t min_rate = 128 * kKiB;
  // What a client may make this server build: the payload's size and zstd level, the builds
  // at once (0: one per core), a build's seconds before it is stopped (0: no bound).
  uint64_t max_payload = kGiB;
  int max_zstd_level = 9;
  uint32_t max_builds = 0;
  double max_build_time_s = 60;
  // The most any one session may last from its ACK, whatever its bytes at --min-rate allow: a
  // payload held by a reader just above the rate ends in bounded time (0: no bound).
  double max_session_time_s = 600;
  // IORING_SETUP_SQPOLL for a client's uring server side: a kernel thread that spins a core
  // for the session's whole allowance, so refused unless the operator allows it.
  bool allow_sqpoll = false;
  // A client's zstd stream may decode to at most this many times its size (0: no bound):
  // iobench's payloads decode to 1.6 times, zstd's RLE blocks to 32,768 times, which cost a
  // core 75% per MiB/s of wire inside the decoder's 2 MiB window before #88.
  uint64_t max_decode_ratio = 256;
  std::string cache_dir;
  uint64_t cache_max = PayloadSpec{}.cache_max;
  bool quiet = false;
  tls::TlsOptions tls;       // a TLS server when cert_file is set
  uint32_t max_conns = 128;  // sessions at once; a client asking for more --conns is refused
  // The pre-auth gate counts connections per network block of these prefix lengths.
  uint32_t source_block_v4 = 24;
  uint32_t source_block_v6 = 64;
  std::string auth_token;    // set: clients must present it (--auth-token or $IOBENCH_AUTH_TOKEN)
  bool allow_short_token = false;
  CounterKind kernel_counter = CounterKind::kAuto;  // syscall counters for clients that ask
};

// The server's options, described once: flag, help and bounds (checked by check_fields).
template <typename Self, typename Visit>
  requires DescribesAs<Self, ServerOptions>
void describe(Self& o, Visit&& visit) {
  visit(Field{.name = "listen",
              .flag = "--listen",
              .help = "Address to listen on, ADDR[:PORT] (default 127.0.0.1:5210)",
              .short_flag = "-l",
              .value_name = "ADDR[:PORT]"},
        o.listen);
  visit(Field{.name = "tls_listen",
              .flag = "--tls-listen",
              .help = "Also serve TLS on ADDR[:PORT] (needs --tls-cert); --listen then serves TCP "
                      "only, as a primary's tls-port beside its port",
              .value_name = "ADDR[:PORT]"},
        o.tls_listen);
  visit(Field{.name = "handshake_timeout_s",
              .flag = "--handshake-timeout",
              .help = "Seconds a client has, from the accept, to finish its TLS handshake, "
                      "hello and token challenge (default 5)",
              .real_min = 0,
              .real_max = 3600,
              .above_min = true,
              .value_name = "SECONDS"},
        o.handshake_timeout_s);
  visit(Field{.name = "idle_timeout_s",
              .flag = "--idle-timeout",
              .help = "Seconds without progress before a session is dropped (default 30; at "
                      "least 0.001: a shorter one would be no read timeout at all)",
              .real_min = 0.001,
              .real_max = 3600,
              .value_name = "SECONDS"},
        o.idle_timeout_s);
  visit(Field{.name = "stdin_lease_s",
              .flag = "--stdin-lease",
              .help = "Stop when stdin ends or has been silent this many seconds: a server "
                      "started over ssh, whose controller writes a line every few seconds, "
                      "dies with it even when the link dies silently (default 0: off)",
              .real_min = 0,
              .real_max = 3600,
              .value_name = "SECONDS"},
        o.stdin_lease_s);
  visit(Field{.name = "max_bytes",
              .flag = "--max-bytes",
              .help = "Largest --bytes a client may ask for (default 1G; at most 4G)",
              .min = kMinBytes,
              .max = kMaxBytes,
              .size = true},
        o.max_bytes);
  visit(Field{.name = "memory_budget",
              .flag = "--memory-budget",
              .help = "Memory the sessions may make this server hold at once: payloads, receive "
                      "buffers, io_uring rings, --fixed-buffers copies, TLS buffers; a session "
                      "that would pass it is refused before anything is allocated (default: a "
                      "quarter of the host's memory)",
              .min = 0,
              .max = int64_t{1} << 50,
              .size = true},
        o.memory_budget);
  visit(Field{.name = "session_memory",
              .flag = "--session-memory",
              .help = "Most one session's buffers may take (a receive buffer, an io_uring ring "
                      "of 2 x --qd x --buf, TLS buffers); a session asking for more is refused "
                      "(default 256M)",
              .min = 64 * int64_t{kKiB},
              .max = int64_t{1} << 50,
              .size = true},
        o.session_memory);
  visit(Field{.name = "min_rate",
              .flag = "--min-rate",
              .help = "Bytes a second a session must move, over every --idle-timeout after the "
                      "first, or it is cut: slow readers and writers cannot hold every slot "
                      "(default 128K; 0: no bound)",
              .min = 0,
              .max = int64_t{1} << 40,
              .size = true},
        o.min_rate);
  visit(Field{.name = "max_payload",
              .flag = "--max-payload",
              .help = "Largest payload a client may make this server build and hold: its "
                      "--bytes, or its --payload-bytes or --source-window (default 1G)",
              .min = kMinBytes,
              .max = kMaxBytes,
              .size = true},
        o.max_payload);
  visit(Field{.name = "max_zstd_level",
              .flag = "--max-zstd-level",
              .help = "Highest --zstd-level a client may make this server build a payload at "
                      "(default 9; a level-19 build takes about 30 times level 3's CPU, level 9 "
                      "about 2.5 times)",
              .min = kMinZstdLevel,
              .max = kMaxZstdLevel,
              .value_name = "LEVEL"},
        o.max_zstd_level);
  visit(Field{.name = "max_builds",
              .flag = "--max-builds",
              .help = "Payload builds at once (default 0: one per core); a session whose "
                      "payload is not in memory waits for a place, reporting progress",
              .min = 0,
              .max = 1024},
        o.max_builds);
  visit(Field{.name = "max_build_time_s",
              .flag = "--max-build-time",
              .help = "Seconds one payload build may run before it is stopped and its session "
                      "refused (default 60; 0: no bound)",
              .real_min = 0,
              .real_max = 86400,
              .value_name = "SECONDS"},
        o.max_build_time_s);
  visit(Field{.name = "max_session_time_s",
              .flag = "--max-session-time",
              .help = "Seconds one session may last from its start, however slowly it is "
                      "allowed to move its bytes (default 600; 0: no bound beyond --min-rate's)",
              .real_min = 0,
              .real_max = 86400,
              .value_name = "SECONDS"},
        o.max_session_time_s);
  visit(Field{.name = "allow_sqpoll",
              .flag = "--allow-sqpoll",
              .help = "Let clients ask for --sqpoll on this server's io_uring side (a kernel "
                      "thread spinning a core for the whole session; refused by default)"},
        o.allow_sqpoll);
  visit(Field{.name = "max_decode_ratio",
              .flag = "--max-decode-ratio",
              .help = "Most times its size a client's --decompress stream may decode to, past "
                      "its first MiB, before its session is refused (default 256: iobench's "
                      "payloads decode to 1.6, a --payload file of repeated values to more; 0: "
                      "no bound)",
              .min = 0,
              .max = int64_t{1} << 32,
              .value_name = "RATIO"},
        o.max_decode_ratio);
  visit(Field{.name = "auth_token",
              .flag = "--auth-token",
              .help = "Refuse clients without this token, or @FILE to read it from FILE's first "
                      "line (default: $IOBENCH_AUTH_TOKEN, which may be @FILE too)",
              .unreported = true,
              .value_name = "TOKEN"},
        o.auth_token);
  visit(kAllowShortTokenField, o.allow_short_token);
  visit(Field{.name = "max_conns",
              .flag = "--max-conns",
              .help = "Sessions served at once; more are refused (default 128)",
              .min = 1,
              .max = 4096},
        o.max_conns);
  visit(Field{.name = "source_block_v4",
              .flag = "--source-block-v4",
              .help = "Before authentication, connections are counted per IPv4 network block "
                      "of this many bits: addresses rotated within one share one share "
                      "(default 24; 32: each address apart)",
              .min = 8,
              .max = 32,
              .value_name = "BITS"},
        o.source_block_v4);
  visit(Field{.name = "source_block_v6",
              .flag = "--source-block-v6",
              .help = "The same per IPv6 network block (default 64, one host's share of a "
                      "network; 128: each address apart)",
              .min = 16,
              .max = 128,
              .value_name = "BITS"},
        o.source_block_v6);
  visit(kCacheDirField, o.cache_dir);
  visit(kCacheMaxField, o.cache_max);
  visit(Field{.name = "kernel_counter",
              .flag = "--kernel-counter",
              .help = "Syscall counters for clients that ask: auto (eBPF, else perf tracepoints), "
                      "bpf, tracepoints or taskio (free; reads and writes only)"},
        o.kernel_counter);
  visit(Field{.name = "quiet",
              .flag = "--quiet",
              .help = "No per-client log lines",
              .short_flag = "-q"},
        o.quiet);
  visit(Field{.name = "tls_cert",
              .flag = "--tls-cert",
              .help = "Certificate chain (PEM): TLS only",
              .value_name = "FILE"},
        o.tls.cert_file);
  visit(Field{.name = "tls_key",
              .flag = "--tls-key",
              .help = "Private key (PEM) for --tls-cert",
              .unreported = true,
              .value_name = "FILE"},
        o.tls.key_file);
  // The server takes kTLS where the kernel has it, or not at all: `on` is the client's choice.
  visit(Field{.name = "ktls",
              .flag = "--ktls",
              .help = "Kernel TLS: auto (default) or off",
              .choices = "auto,off"},
        o.tls.ktls);
}

}  // namespace iobench
