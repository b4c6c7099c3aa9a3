#include "net/tcp_segments.h"

#include <linux/tcp.h>  // tcp_info with tcpi_segs_out/in (glibc's lacks them)
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>

namespace iobench {

TcpSegments tcp_segments(int fd) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return {};
  return {info.tcpi_segs_out, info.tcpi_segs_in, info.tcpi_total_retrans};
}

PeerProgress peer_progress(int fd) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return {};
  return {info.tcpi_bytes_acked, info.tcpi_segs_in};
}

std::optional<uint64_t> bytes_moved(int fd) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 ||
      len < offsetof(tcp_info, tcpi_bytes_received) + sizeof info.tcpi_bytes_received)
    return std::nullopt;
  return info.tcpi_bytes_acked + info.tcpi_bytes_received;
}

}  // namespace iobench
