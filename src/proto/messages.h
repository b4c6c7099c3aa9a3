// The control protocol: framed, versioned, size-bounded messages exchanged before and after the
// data phase. Pure functions on byte spans (no sockets), so the decoder can be fuzzed.
//
// Frame: "IOBC" | version u16 | type u16 | body length u32 | body.
// Session: client HELLO -> [server CHALLENGE -> client AUTH, when the server requires a token]
// -> server ACK (or ERROR) -> data -> receiver RESULT -> sender RESULT,
// with PROGRESS messages before the ACK while the server builds a payload it had no cache of,
// then, for one connection of a --conns run, the server's GROUP once all of the run's
// connections have ended.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "engine/io_counters.h"
#include "engine/tuning.h"
#include "net/socket.h"
#include "net/stream.h"
#include "net/tcp_segments.h"
#include "probe/host_busy.h"
#include "probe/probe.h"
#include "probe/syscall_source.h"
#include "tls/options.h"
#include "util/result.h"

namespace iobench {
// Connections in one run (a HELLO's `conns`); a server may allow fewer (--max-conns).
inline constexpr uint32_t kMaxConns = 1024;
}  // namespace iobench

namespace iobench::proto {

// How decode_header's error (kind kNotPeer) begins when a frame lacks the magic: the peer
// speaks something else.
inline constexpr std::string_view kNotIobenchPeer = "not an iobench peer";
inline constexpr std::array<std::byte, 4> kMagic{std::byte{'I'}, std::byte{'O'}, std::byte{'B'},
                                                 std::byte{'C'}};
// 2: PROGRESS. 3: HELLO carries the engine tuning as one block and the server's CPU; RESULT
// the placement. 4: the tuning's notsent_lowat, and RESULT the socket's. 5: RESULT the TCP
// segments sent and received during the data phase. 6: HELLO's fanout. 7: HELLO's socket
// options as one described block (sndbuf, rcvbuf, nodelay, congestion) and the TLS record
// options as another; RESULT the socket's figures as one (the congestion control it ran
// added), its TLS figures and its probe (wall, CPU, context switches) as others. 8: GROUP's
// clocks as the same probe block (context switches added); RESULT and GROUP the host's busy
// time over their window (`host_busy`); HELLO the sender's source window. 9: HELLO's socket
// options carry the MSS (`--mss`), RESULT's socket figures the MSS the socket ran; a windowed
// stream's digest is taken window by window (payload/verifier.h). 10: RESULT's figures as
// blocks: the engine's counts (`io`), `segments` (with the segments retransmitted), the Stream's
// counts (`stream`), `syscalls` (GROUP's too) and `placement`. 11: the Stream's counts carry
// the send queue as sampled (`queue_samples`, `queue_unsent_bytes`). 12: the token is proven,
// never sent: HELLO says whether the client holds one (`auth`), a server that requires one
// answers CHALLENGE (a fresh nonce), the client AUTH (HMAC-SHA256 of the nonce under the
// token; tls::auth_proof). 13: AUTH carries the client's nonce, and the proof signs both nonces
// and the HELLO frame. Peers of different
// versions refuse each other's first frame, naming both.
// Each message's layout is its field list (proto/fields.h); a test ties it to this version.
inline constexpr uint16_t kVersion = 13;
// The layout fingerprint (layout_fingerprint(), proto/fields.h) of each version since 3: a
// layout change fails its test until kVersion is bumped and a row appended.
inline constexpr std::array<std::pair<uint16_t, uint64_t>, 11> kLayoutOfVersion{{
    {3, 0xf671e9592467f07d},
    {4, 0xaabe3ecebf220675},
    {5, 0x7d91a990b6094162},
    {6, 0x19d783e0710d6542},
    {7, 0x2f132aa734e3a892},
    {8, 0x14e7319aa74aacfa},
    {9, 0x65c61e2a8c54c8b4},
    {10, 0x36637703f331547d},
    {11, 0x3eb2848ff75884ad},
    {12, 0x41152e1dd548e212},
    {13, 0x5d9f0ed4fa101043},
}};
inline constexpr size_t kHeaderBytes = 12;
inline constexpr uint32_t kMaxBodyBytes = 16 * 1024;  // every message but GROUP is far smaller
inline constexpr uint32_t kMaxGroupBodyBytes = 160 * 1024;  // two bounded timelines
// Before authentication a server reads a HELLO (about 200 bytes) and an AUTH (about 100): a
// frame past this is refused on its header, before its body is read.
inline constexpr uint32_t kMaxPreAuthBodyBytes = 2048;
inline constexpr size_t kMaxListEntries = 64;
inline constexpr size_t kMaxTimelineEntries = 2000;

enum class Type : uint16_t {
  kHello = 1,
  kAck = 2,
  kResult = 3,
  kError = 4,
  kGroup = 5,
  kProgress = 6,
  kChallenge = 7,
  kAuth = 8
};
inline constexpr uint16_t kLastType = 8;

struct Hello {
  bool client_sends = true;
  uint64_t bytes = 0;
  uint64_t send_buf_bytes = 0;
  uint64_t recv_buf_bytes = 0;
  SocketOptions socket;  // both sides apply it to their data socket
  bool decompress = false;
  uint64_t seed = 0;
  int64_t zstd_level = 0;
  std::string proto;   // "tcp"
  std::string engine;  // the server side's engine
  double timeout_s = 30;
  std::string tls_io;  // "socket" or "bio" (TLS only)
  tls::TlsRecords tls_records;  // read-ahead and the largest record (TLS only)
  bool kernel_syscalls = true;  // count with perf_event tracepoints where the kernel allows
  EngineTuning tuning;           // the server side applies it to its own engine
  int64_t cpu = -1;              // --cpus: the server side's data phase runs on it (-1: anywhere)
  // --conns: this connection is `conn_index` of `conns` sharing `group_id` (random per run).
  uint32_t conns = 1;
  uint32_t conn_index = 0;
  uint64_t group_id = 0;
  uint64_t payload_bytes = 0;  // the payload this connection's `bytes` are a prefix of (0: same)
  // --buf adaptive: the server side's buffer follows the live count within these limits.
  bool adaptive = false;
  // --fanout: this connection is a replica of the client's one writer thread (a group even
  // when it is the only one).
  bool fanout = false;
  uint64_t source_window = 0;  // --source-window: the sender repeats this prefix (0: no)
  uint64_t budget = 0;
  uint64_t buf_min = 0;
  uint64_t buf_max = 0;
  // The client holds a token (--auth-token): it answers a CHALLENGE. The token itself is never
  // sent, so a plain-TCP HELLO carries nothing an eavesdropper could reuse.
  bool auth = false;
};

// A server that requires a token: prove it (tls::auth_proof of this nonce).
struct Challenge {
  std::string nonce;  // 32 random bytes, hex
};

struct Auth {
  std::string client_nonce;  // 32 random bytes, hex: the client's share of what is signed
  std::string proof;         // tls::auth_proof(token, CHALLENGE's nonce, client_nonce, HELLO)
};

struct Ack {
  std::string server_version;
};

// One side's figures for one run; travels from the server so the client can print both sides.
// Where a data phase ran: the CPU it was pinned to (-1: none), the CPUs it was allowed, and the
// CPUs it was seen on (sampled as it started and as it ended).
struct Placement {
  int64_t pinned_cpu = -1;
  std::string allowed_cpus;
  std::string seen_cpus;
};

struct SideResult {
  bool is_sender = true;
  uint64_t bytes_expected = 0;
  uint64_t buf_bytes = 0;
  ProbeDelta probe;  // the data phase's wall time, CPU and context switches
  HostBusy host_busy;  // over the same window: every CPU's busy time, whoever spent it
  // What the engine did: the bytes moved before the end (== expected on success), its calls,
  // waits, zero-copy and uring counts.
  IoCounters io;
  uint64_t xxh3 = 0;           // sender: of the payload; receiver: of what arrived
  uint64_t decoded_bytes = 0;  // sender: payload's decoded size; receiver: decoded (if asked)
  bool decoded = false;        // receiver decoded the zstd stream
  SocketInfo socket;           // what the kernel granted (getsockopt)
  // TCP segments this side's socket sent and received during the data phase (TCP_INFO): a
  // sender's until the receiver's RESULT arrived, a receiver's until its last byte.
  TcpSegments segments;
  std::string engine;
  std::string error;  // empty on success
  // Underneath the engine's calls: syscalls issued by the Stream and, for TLS, records.
  StreamCounters stream;
  iobench::tls::TlsInfo tls;  // TLS only (empty version for TCP)
  // Syscalls as the kernel counted them in the data phase (eBPF or perf_event tracepoints).
  SyscallCounts syscalls;
  uint64_t buf_resizes = 0;  // buffer size changes adopted during the data phase
  CpuScope cpu_scope = CpuScope::kProcess;
  Placement placement;
};

struct LivePoint {
  int64_t t_ns = 0;
  uint32_t live = 0;
  uint64_t size = 0;  // the policy's buffer size at that live count
};

struct BufChange {
  int64_t t_ns = 0;
  uint32_t conn = 0;
  uint64_t from = 0;  // 0: the connection's first size
  uint64_t to = 0;
  uint32_t live = 0;
  uint64_t target = 0;  // the policy's size for `live` (`to` is less while the budget is full)
};

// One side's figures over a whole --conns run: CPU and syscalls of the process, buffer memory
// and the live-count timeline (per-connection figures travel in each connection's RESULT).
struct GroupResult {
  bool is_sender = true;
  uint32_t conns = 0;         // connections that took part on this side
  uint32_t conns_failed = 0;  // of those, ended with an error
  // The process's clocks from the first connection's data phase start to the last one's end,
  // and the host's busy time over the same window.
  ProbeDelta probe;
  HostBusy host_busy;
  SyscallCounts syscalls;
  std::string policy;  // "fixed 16K", "adaptive: budget 256K, 4K..64K"
  uint32_t peak_live = 0;
  uint64_t peak_buffer_bytes = 0;
  uint64_t peak_rss_bytes = 0;  // 0: unknown
  std::vector<LivePoint> timeline;
  std::vector<BufChange> changes;
  uint64_t changes_dropped = 0;
  std::string error;  // why the run is incomplete on this side (empty: all arrived and ended)
};

struct ErrorMsg {
  std::string message;
};

// The server is building the payload it will send (before its ACK): how far it has got.
struct Progress {
  uint64_t done_bytes = 0;
  uint64_t total_bytes = 0;
  int64_t elapsed_ns = 0;
};

using Message =
    std::variant<Hello, Ack, SideResult, ErrorMsg, GroupResult, Progress, Challenge, Auth>;

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

// Every string the peer sent in `m` (an ERROR's text, a RESULT's error, engine and TLS names)
// escaped as the server's log escapes a client's (util/escape.h): a peer can neither forge a
// line nor reach the terminal with ESC or OSC sequences. Not the HELLO, AUTH or CHALLENGE,
// whose bytes the token's proof covers.
void escape_printable(Message& m);

const char* type_name(const Message& m);
const char* type_name(Type t);

}  // namespace iobench::proto
