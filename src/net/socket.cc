#include "net/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>

#include "net/stream.h"

namespace iobench {
namespace {

struct AddrInfoDeleter {
  void operator()(addrinfo* a) const { freeaddrinfo(a); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

Result<AddrInfoPtr> resolve(const HostPort& where, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(where.port);
  int rc = getaddrinfo(where.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0)
    return fail(fmt::format("cannot resolve host '{}': {}", where.host, gai_strerror(rc)));
  return AddrInfoPtr(res);
}

std::string sockaddr_str(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
    return fmt::format("{}:{}", host, port);
  }
  if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    port = ntohs(in6->sin6_port);
    return fmt::format("[{}]:{}", host, port);
  }
  return "?";
}

int get_int_opt(int fd, int level, int name) {
  int v = 0;
  socklen_t len = sizeof v;
  if (getsockopt(fd, level, name, &v, &len) != 0) return -1;
  return v;
}

}  // namespace

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<Fd> listen_on(const HostPort& where) {
  auto ai = resolve(where, true);
  if (!ai) return std::unexpected(ai.error());
  int last_errno = 0;
  for (addrinfo* a = ai->get(); a; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd) {
      last_errno = errno;
      continue;
    }
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd.get(), 128) == 0) return fd;
    last_errno = errno;
  }
  return fail(fmt::format("cannot listen on {}: {}", where.str(), std::strerror(last_errno)));
}

namespace {

// TCP_CONGESTION by name; the error lists what this kernel has.
Status set_congestion(int fd, const std::string& name) {
  if (name.empty()) return {};
  if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(),
                 static_cast<socklen_t>(name.size())) == 0)
    return {};
  const int err = errno;
  std::string available;
  std::ifstream list("/proc/sys/net/ipv4/tcp_available_congestion_control");
  std::getline(list, available);
  return fail(fmt::format("setsockopt TCP_CONGESTION={}: {}{}", name, std::strerror(err),
                          available.empty() ? "" : " (this kernel has: " + available + ")"));
}

}  // namespace

Status apply_socket_options(int fd, const SocketOptions& req) {
  // Socket buffer sizes are requested before connect so the window scale is negotiated for them.
  auto set = [&](int level, int name, int value, const char* what) -> Status {
    if (setsockopt(fd, level, name, &value, sizeof value) != 0)
      return fail(fmt::format("setsockopt {}={}: {}", what, value, std::strerror(errno)));
    return {};
  };
  if (req.sndbuf) {
    if (auto s = set(SOL_SOCKET, SO_SNDBUF, static_cast<int>(req.sndbuf), "SO_SNDBUF"); !s)
      return s;
  }
  if (req.rcvbuf) {
    if (auto s = set(SOL_SOCKET, SO_RCVBUF, static_cast<int>(req.rcvbuf), "SO_RCVBUF"); !s)
      return s;
  }
  if (auto s = set(IPPROTO_TCP, TCP_NODELAY, req.nodelay ? 1 : 0, "TCP_NODELAY"); !s) return s;
  // Before connect on the client, so its SYN advertises it and both directions are clamped.
  if (req.mss) {
    if (auto s = set(IPPROTO_TCP, TCP_MAXSEG, static_cast<int>(req.mss), "TCP_MAXSEG"); !s)
      return s;
  }
  return set_congestion(fd, req.congestion);
}

void sample_send_queue(int fd, StreamCounters& c) {
  if (c.sys_writes % kQueueSampleEvery != 0) return;
  // The write's errno is the caller's to read next: the ioctl (which a non-TCP socket refuses)
  // must not replace it.
  const int saved = errno;
  int unsent = 0;
  if (::ioctl(fd, SIOCOUTQNSD, &unsent) == 0 && unsent >= 0) {
    ++c.queue_samples;
    c.queue_unsent_bytes += static_cast<uint64_t>(unsent);
  }
  errno = saved;
}

Status set_notsent_lowat(int fd, uint32_t bytes) {
  if (setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &bytes, sizeof bytes) != 0)
    return fail(fmt::format("setsockopt TCP_NOTSENT_LOWAT={}: {}", bytes, std::strerror(errno)));
  return {};
}

Result<Fd> connect_to(const HostPort& where, double timeout_s, const SocketOptions& req) {
  auto ai = resolve(where, false);
  if (!ai) return std::unexpected(ai.error());
  std::string last = "no address";
  for (addrinfo* a = ai->get(); a; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!fd) {
      last = std::strerror(errno);
      continue;
    }
    if (auto s = apply_socket_options(fd.get(), req); !s) return std::unexpected(s.error());
    // Non-blocking connect bounded by the timeout, so an unroutable host cannot hang the client.
    int rc = ::connect(fd.get(), a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd.get(), POLLOUT, 0};
      int n;
      do {
        n = ::poll(&p, 1, static_cast<int>(timeout_s * 1000));
      } while (n < 0 && errno == EINTR);
      if (n == 0) {
        last = "connection timed out";
        continue;
      }
      int err = get_int_opt(fd.get(), SOL_SOCKET, SO_ERROR);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      last = std::strerror(errno);
      continue;
    }
    int flags = fcntl(fd.get(), F_GETFL);
    fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
    return fd;
  }
  return fail(fmt::format("cannot connect to {}: {}", where.str(), last));
}

void cut_with_reset(int fd) {
  const linger reset{1, 0};
  (void)::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  ::shutdown(fd, SHUT_RDWR);
}

Result<Fd> accept_client(int listen_fd, std::string& peer) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    return std::unexpected(Error{fmt::format("accept: {}", std::strerror(e)), ErrorKind::kOther, e});
  }
  peer = sockaddr_str(reinterpret_cast<sockaddr*>(&ss));
  return Fd(fd);
}

SocketInfo query_socket_info(int fd) {
  SocketInfo info;
  info.sndbuf_bytes = get_int_opt(fd, SOL_SOCKET, SO_SNDBUF);
  info.rcvbuf_bytes = get_int_opt(fd, SOL_SOCKET, SO_RCVBUF);
  info.nodelay = get_int_opt(fd, IPPROTO_TCP, TCP_NODELAY) > 0;
  info.notsent_lowat_bytes =
      static_cast<uint32_t>(get_int_opt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT));
  char cc[16] = {};  // TCP_CA_NAME_MAX
  socklen_t cc_len = sizeof cc;
  if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, &cc_len) == 0)
    info.congestion.assign(cc, strnlen(cc, cc_len));
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  info.mtu_bytes = ss.ss_family == AF_INET6 ? get_int_opt(fd, IPPROTO_IPV6, IPV6_MTU)
                                            : get_int_opt(fd, IPPROTO_IP, IP_MTU);
  info.mss_bytes = get_int_opt(fd, IPPROTO_TCP, TCP_MAXSEG);
  return info;
}

Status set_io_timeout(int fd, double seconds) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(seconds);
  tv.tv_usec = static_cast<suseconds_t>((seconds - std::floor(seconds)) * 1e6);
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0)
    return fail(fmt::format("setsockopt timeout: {}", std::strerror(errno)));
  // A blocking write that copied part of its buffer and then waited out SO_SNDTIMEO returns the
  // part, and the next write waits again; an error RESULT queued behind unsent data waits once
  // more. TCP_USER_TIMEOUT ends it where it starts: data unacknowledged this long (a silent
  // link, a dead host, a black-holed MTU) aborts the connection, and every engine's pending
  // call returns ETIMEDOUT at once.
  const auto ms = static_cast<unsigned>(std::ceil(seconds * 1000));
  if (setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof ms) != 0)
    return fail(fmt::format("setsockopt TCP_USER_TIMEOUT: {}", std::strerror(errno)));
  return {};
}

std::optional<double> unacknowledged_abort_s(int fd) {
  unsigned user_timeout_ms = 0;
  socklen_t ulen = sizeof user_timeout_ms;
  tcp_info info{};
  socklen_t len = sizeof info;
  if (getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, &ulen) != 0 ||
      user_timeout_ms == 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0)
    return std::nullopt;
  // The timer runs from the oldest unacknowledged segment, sent just after the last ACK that
  // came: the silence it measured is close to, never far below, the user timeout.
  if (info.tcpi_state != TCP_CLOSE || info.tcpi_last_ack_recv < user_timeout_ms * 8 / 10)
    return std::nullopt;
  return static_cast<double>(info.tcpi_last_ack_recv) / 1000.0;
}

uint16_t local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

std::string local_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return sockaddr_str(reinterpret_cast<sockaddr*>(&ss));
}

bool is_loopback_socket(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return false;
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (ss.ss_family != AF_INET6) return false;
  const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr;
  return IN6_IS_ADDR_LOOPBACK(&a) || (IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127);
}

// --- FdStream ---------------------------------------------------------------------------------

IoResult io_result_from_syscall(ssize_t n, bool nonblocking) {
  if (n > 0) return {IoResult::State::kOk, static_cast<size_t>(n), 0};
  if (n == 0) return {IoResult::State::kEof, 0, 0};
  // EAGAIN: "not now" on a non-blocking socket; SO_RCVTIMEO/SO_SNDTIMEO expiring on a blocking one.
  if (errno == EAGAIN || errno == EWOULDBLOCK)
    return {nonblocking ? IoResult::State::kWouldBlock : IoResult::State::kTimedOut, 0, errno};
  // TCP_USER_TIMEOUT (set_io_timeout) aborted the connection: no progress, as above.
  if (errno == ETIMEDOUT) return {IoResult::State::kTimedOut, 0, errno};
  return {IoResult::State::kError, 0, errno};
}

Status Stream::set_nonblocking(bool on) {
  const int flags = fcntl(fd(), F_GETFL);
  if (flags < 0 || fcntl(fd(), F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK) != 0)
    return fail(fmt::format("fcntl O_NONBLOCK: {}", std::strerror(errno)));
  nonblocking_ = on;
  return {};
}

IoResult FdStream::read(std::span<std::byte> buf) {
  ssize_t n;
  do {
    ++counters_.sys_reads;
    n = ::read(fd_, buf.data(), buf.size());
  } while (n < 0 && errno == EINTR);
  return io_result_from_syscall(n, nonblocking_);
}

IoResult FdStream::send_flags(std::span<const std::byte> buf, int flags) {
  ssize_t n;
  do {
    ++counters_.sys_writes;
    n = ::send(fd_, buf.data(), buf.size(), flags | MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  sample_send_queue(fd_, counters_);
  if (n == 0) return {IoResult::State::kError, 0, EIO};
  return io_result_from_syscall(n, nonblocking_);
}

IoResult FdStream::write(std::span<const std::byte> buf) {
  ssize_t n;
  do {
    ++counters_.sys_writes;
    n = ::write(fd_, buf.data(), buf.size());
  } while (n < 0 && errno == EINTR);
  sample_send_queue(fd_, counters_);
  if (n == 0) return {IoResult::State::kError, 0, EIO};
  return io_result_from_syscall(n, nonblocking_);
}

StreamCounters operator-(const StreamCounters& a, const StreamCounters& b) {
  return fields_minus(a, b);
}

std::string Stream::describe(const IoResult& r) const { return describe_io(r); }

IoResult Stream::send_flags(std::span<const std::byte> /*buf*/, int /*flags*/) {
  return {IoResult::State::kError, 0, EOPNOTSUPP};
}

std::string describe_io(const IoResult& r) {
  switch (r.state) {
    case IoResult::State::kOk:
      return "ok";
    case IoResult::State::kEof:
      return "peer closed the connection";
    case IoResult::State::kWouldBlock:
      return "would block";
    case IoResult::State::kTimedOut:
      return "timed out (no progress)";
    case IoResult::State::kError:
      return r.err ? std::strerror(r.err) : "I/O error";
  }
  return "?";
}

}  // namespace iobench
