// Listening, connecting and socket options, each syscall wrapped once with its errno captured.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "net/address.h"
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

// What the kernel granted on a connected socket (getsockopt), for the report.
struct SocketInfo {
  int sndbuf_bytes = 0;
  int rcvbuf_bytes = 0;
  bool nodelay = false;
  int mtu_bytes = 0;  // IP_MTU / IPV6_MTU of the route
  uint32_t notsent_lowat = 0;  // TCP_NOTSENT_LOWAT (0: not set, the sysctl applies)
};

struct SocketRequest {
  uint64_t sndbuf_bytes = 0;  // 0: leave the kernel's autotuning alone
  uint64_t rcvbuf_bytes = 0;
  bool nodelay = true;
};

Result<Fd> listen_on(const HostPort& where);
Result<Fd> connect_to(const HostPort& where, double timeout_s, const SocketRequest& req);
// Blocks until a client arrives; EINTR is returned as an error so a signal can stop a server.
Result<Fd> accept_client(int listen_fd, std::string& peer);

Status apply_socket_options(int fd, const SocketRequest& req);
// TCP_NOTSENT_LOWAT: the socket reports writable (and a blocking write returns) only while less
// than `bytes` of the data it holds is unsent.
Status set_notsent_lowat(int fd, uint32_t bytes);
SocketInfo query_socket_info(int fd);
// SO_RCVTIMEO and SO_SNDTIMEO: a blocking call returns EAGAIN after this long without progress;
// TCP_USER_TIMEOUT: data unacknowledged this long aborts the connection (ETIMEDOUT).
Status set_io_timeout(int fd, double seconds);
// Set when TCP_USER_TIMEOUT ended the connection: how long the peer had acknowledged nothing
// (the error the call saw is then the kernel's last soft error: EHOSTUNREACH, EPIPE...).
std::optional<double> unacknowledged_abort_s(int fd);
uint16_t local_port(int fd);
bool is_loopback_host(const std::string& host);

}  // namespace iobench
