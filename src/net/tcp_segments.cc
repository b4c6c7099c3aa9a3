#include "net/tcp_segments.h"

#include <linux/tcp.h>  // tcp_info with tcpi_segs_out/in (glibc's lacks them)
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <optional>
#include <utility>

namespace iobench {

namespace {

// TCP_INFO of `fd`, and how many of its bytes the kernel filled (older kernels fill fewer
// fields); nullopt where it is not a TCP socket.
std::optional<std::pair<tcp_info, socklen_t>> read_tcp_info(int fd) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return std::nullopt;
  return std::pair{info, len};
}

}  // namespace

TcpSegments tcp_segments(int fd) {
  const auto t = read_tcp_info(fd);
  if (!t) return {};
  return {t->first.tcpi_segs_out, t->first.tcpi_segs_in, t->first.tcpi_total_retrans};
}

PeerProgress peer_progress(int fd) {
  const auto t = read_tcp_info(fd);
  if (!t) return {};
  return {t->first.tcpi_bytes_acked, t->first.tcpi_segs_in};
}

std::optional<uint64_t> bytes_moved(int fd) {
  const auto t = read_tcp_info(fd);
  if (!t || t->second < offsetof(tcp_info, tcpi_bytes_received) + sizeof(uint64_t))
    return std::nullopt;
  return t->first.tcpi_bytes_acked + t->first.tcpi_bytes_received;
}

}  // namespace iobench
