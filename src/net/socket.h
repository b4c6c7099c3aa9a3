// Listening, connecting and socket options, each syscall wrapped once with its errno captured.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "net/address.h"
#include "util/fields.h"
#include "util/result.h"

namespace iobench {

// Owns a file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset();

 private:
  int fd_ = -1;
};

// What the kernel granted on a connected socket (getsockopt), for the report. Described once:
// it crosses in each side's RESULT and the JSON's `socket` block walks it.
struct SocketInfo {
  int64_t sndbuf_bytes = 0;
  int64_t rcvbuf_bytes = 0;
  bool nodelay = false;
  int64_t mtu_bytes = 0;                // IP_MTU / IPV6_MTU of the route
  uint32_t notsent_lowat_bytes = 0;     // TCP_NOTSENT_LOWAT (0: not set, the sysctl applies)
  std::string congestion;               // TCP_CONGESTION: the algorithm the socket runs
  int64_t mss_bytes = 0;                // TCP_MAXSEG: the segment size the socket sends
};

template <typename Self, typename Visit>
  requires DescribesAs<Self, SocketInfo>
void describe(Self& s, Visit&& visit) {
  visit(Field{"sndbuf_bytes"}, s.sndbuf_bytes);
  visit(Field{"rcvbuf_bytes"}, s.rcvbuf_bytes);
  visit(Field{"nodelay"}, s.nodelay);
  visit(Field{"mtu_bytes"}, s.mtu_bytes);
  visit(Field{.name = "notsent_lowat_bytes", .zero_is_unset = true}, s.notsent_lowat_bytes);
  visit(Field{"congestion"}, s.congestion);
  visit(Field{"mss_bytes"}, s.mss_bytes);
}

// What a client asks of both sides' data sockets. Described once (describe below): the command
// line, the HELLO, the server's check, the JSON options block and the CSV walk this list.
struct SocketOptions {
  uint64_t sndbuf = 0;  // 0: leave the kernel's autotuning alone
  uint64_t rcvbuf = 0;
  bool nodelay = true;
  std::string congestion;  // TCP_CONGESTION ("": the kernel's default)
  uint64_t mss = 0;        // TCP_MAXSEG before connect (0: the route's)
};

template <typename Self, typename Visit>
  requires DescribesAs<Self, SocketOptions>
void describe(Self& s, Visit&& visit) {
  visit(Field{.name = "sndbuf",
              .flag = "--sndbuf",
              .help = "SO_SNDBUF to request on both sockets (default: kernel)",
              .min = 0,
              .max = int64_t{1} << 30,
              .size = true,
              .zero_is_unset = true},
        s.sndbuf);
  visit(Field{.name = "rcvbuf",
              .flag = "--rcvbuf",
              .help = "SO_RCVBUF to request on both sockets (default: kernel)",
              .min = 0,
              .max = int64_t{1} << 30,
              .size = true,
              .zero_is_unset = true},
        s.rcvbuf);
  visit(Field{.name = "nodelay",
              .flag = "--no-nodelay",
              .help = "Leave Nagle on (TCP_NODELAY is set by default)",
              .negated = true},
        s.nodelay);
  visit(Field{.name = "congestion",
              .flag = "--congestion",
              .help = "TCP congestion control on both sockets, e.g. cubic or bbr (default: the "
                      "kernel's; /proc/sys/net/ipv4/tcp_available_congestion_control)",
              .value_name = "NAME"},
        s.congestion);
  visit(Field{.name = "mss",
              .flag = "--mss",
              .help = "TCP maximum segment size on both sockets (TCP_MAXSEG, as iperf3 -M; e.g. "
                      "1448 for an MTU-1500 path's segments on loopback; default: the route's)",
              .min = 88,      // TCP_MIN_MSS
              .max = 32767,  // MAX_TCP_WINDOW: the kernel refuses a larger TCP_MAXSEG
              .zero_is_unset = true,
              .value_name = "BYTES"},
        s.mss);
}

Result<Fd> listen_on(const HostPort& where);
Result<Fd> connect_to(const HostPort& where, double timeout_s, const SocketOptions& req);
// Blocks until a client arrives; EINTR is returned as an error so a signal can stop a server.
Result<Fd> accept_client(int listen_fd, std::string& peer);
// Ends a session from another thread: a reset (SO_LINGER 0), so the kernel drops what the peer
// left queued rather than trickling it out, and a shutdown, so every blocked call on it
// returns at once; the handler that owns `fd` closes it and logs why.
void cut_with_reset(int fd);

Status apply_socket_options(int fd, const SocketOptions& req);
// TCP_NOTSENT_LOWAT: the socket reports writable (and a blocking write returns) only while less
// than `bytes` of the data it holds is unsent.
Status set_notsent_lowat(int fd, uint32_t bytes);
struct StreamCounters;  // net/stream.h
// After a write(2) on `fd` counted in `c`: on every kQueueSampleEvery-th, the bytes its send
// queue holds not yet sent (SIOCOUTQNSD) into c's queue sample; nothing on a socket without it.
void sample_send_queue(int fd, StreamCounters& c);
SocketInfo query_socket_info(int fd);
// SO_RCVTIMEO and SO_SNDTIMEO: a blocking call returns EAGAIN after this long without progress;
// TCP_USER_TIMEOUT: data unacknowledged this long aborts the connection (ETIMEDOUT).
Status set_io_timeout(int fd, double seconds);
// Set when TCP_USER_TIMEOUT ended the connection: how long the peer had acknowledged nothing
// (the error the call saw is then the kernel's last soft error: EHOSTUNREACH, EPIPE...).
std::optional<double> unacknowledged_abort_s(int fd);
uint16_t local_port(int fd);
// A bound socket's own address, HOST:PORT ("?" when it has none).
std::string local_address(int fd);
// A bound socket on a loopback address (127.0.0.0/8, ::1, or ::ffff:127.x): judged from the
// address itself, not from its text ("[::1]:5210").
bool is_loopback_socket(int fd);

}  // namespace iobench
