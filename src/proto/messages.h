// The control protocol: framed, versioned, size-bounded messages exchanged before and after the
// data phase. Pure functions on byte spans (no sockets), so the decoder can be fuzzed.
//
// Frame: "IOBC" | version u16 | type u16 | body length u32 | body.
// Session: client HELLO -> server ACK (or ERROR) -> data -> receiver RESULT -> sender RESULT.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "util/result.h"

namespace iobench::proto {

inline constexpr std::array<std::byte, 4> kMagic{std::byte{'I'}, std::byte{'O'}, std::byte{'B'},
                                                 std::byte{'C'}};
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kHeaderBytes = 12;
inline constexpr uint32_t kMaxBodyBytes = 16 * 1024;  // every message is far smaller
inline constexpr size_t kMaxListEntries = 64;

enum class Type : uint16_t { kHello = 1, kAck = 2, kResult = 3, kError = 4 };

struct Hello {
  bool client_sends = true;
  uint64_t bytes = 0;
  uint64_t send_buf_bytes = 0;
  uint64_t recv_buf_bytes = 0;
  uint64_t sndbuf_bytes = 0;  // 0: kernel default
  uint64_t rcvbuf_bytes = 0;
  bool nodelay = true;
  bool decompress = false;
  uint64_t seed = 0;
  int64_t zstd_level = 0;
  std::string proto;   // "tcp"
  std::string engine;  // the server side's engine
  double timeout_s = 30;
  std::string tls_io;  // "socket" or "bio" (TLS only)
  bool tls_read_ahead = false;
  uint64_t tls_max_fragment = 16384;
  bool kernel_syscalls = true;   // count with perf_event tracepoints where the kernel allows
  bool edge = false;             // epoll engine: edge-triggered
  uint32_t reads_per_event = 0;  // epoll engine: cap (0: until EAGAIN)
  uint32_t queue_depth = 8;      // uring engine: requests per io_uring_enter
};

struct Ack {
  std::string server_version;
};

// One side's figures for one run; travels from the server so the client can print both sides.
struct SideResult {
  bool is_sender = true;
  uint64_t bytes_expected = 0;
  uint64_t bytes = 0;  // moved before the end (== expected on success)
  uint64_t buf_bytes = 0;
  int64_t wall_ns = 0;
  int64_t cpu_ns = 0;
  int64_t user_us = 0;
  int64_t sys_us = 0;
  int64_t vol_ctxsw = 0;
  int64_t invol_ctxsw = 0;
  uint64_t io_calls = 0;
  uint64_t short_writes = 0;
  uint64_t xxh3 = 0;           // sender: of the payload; receiver: of what arrived
  uint64_t decoded_bytes = 0;  // sender: payload's decoded size; receiver: decoded (if asked)
  bool decoded = false;        // receiver decoded the zstd stream
  int64_t sndbuf_bytes = 0;    // granted by the kernel (getsockopt)
  int64_t rcvbuf_bytes = 0;
  int64_t mtu_bytes = 0;
  bool nodelay = false;
  std::string engine;
  std::string error;  // empty on success
  // Underneath the engine's calls: syscalls issued by the Stream and, for TLS, records.
  uint64_t sys_reads = 0;
  uint64_t sys_writes = 0;
  uint64_t records_in = 0;
  uint64_t records_out = 0;
  // TLS only (empty version for TCP).
  std::string tls_version, tls_cipher, tls_group, tls_io, ktls;
  int64_t tls_handshake_ns = 0;
  bool tls_read_ahead = false;
  uint64_t tls_max_fragment = 0;
  bool tls_verified = false;
  // Syscalls as the kernel counted them in the data phase (perf_event tracepoints).
  std::string syscalls_source;  // "perf_event", or "counted" (the stream's own counts only)
  std::string syscalls_note;    // why not perf_event; tracepoints this kernel lacks
  uint64_t kernel_syscalls_total = 0;
  std::vector<std::pair<std::string, uint64_t>> kernel_syscalls;  // by name, non-zero
  uint64_t engine_waits = 0;        // epoll_wait calls (event-loop engines)
  uint64_t engine_would_block = 0;  // calls that returned EAGAIN
};

struct ErrorMsg {
  std::string message;
};

using Message = std::variant<Hello, Ack, SideResult, ErrorMsg>;

struct FrameHeader {
  uint16_t version = 0;
  Type type = Type::kHello;
  uint32_t body_bytes = 0;
};

// Serializes a whole frame (header + body).
std::vector<std::byte> encode(const Message& m);

// Validates magic, version, type and length bound before any body is read or allocated.
Result<FrameHeader> decode_header(std::span<const std::byte> header);
Result<Message> decode_body(const FrameHeader& h, std::span<const std::byte> body);

const char* type_name(const Message& m);

}  // namespace iobench::proto
