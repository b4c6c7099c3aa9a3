#include "net/local_peer.h"

#include <fmt/format.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "net/address.h"
#include "net/socket.h"

namespace iobench {
namespace {

// A socket's address as inet_diag wants it: family, 16 bytes of address, port (network order).
// An IPv4 peer on a dual-stack socket (::ffff:a.b.c.d) is an AF_INET socket to the kernel.
struct DiagAddr {
  uint8_t family = 0;
  uint32_t addr[4] = {};
  uint16_t port = 0;
};

std::optional<DiagAddr> diag_addr(const sockaddr_storage& ss) {
  DiagAddr a;
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    a.family = AF_INET;
    std::memcpy(a.addr, &in->sin_addr, 4);
    a.port = in->sin_port;
    return a;
  }
  if (ss.ss_family != AF_INET6) return std::nullopt;
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
  a.port = in6->sin6_port;
  if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
    a.family = AF_INET;
    std::memcpy(a.addr, &in6->sin6_addr.s6_addr[12], 4);
  } else {
    a.family = AF_INET6;
    std::memcpy(a.addr, &in6->sin6_addr, 16);
  }
  return a;
}

}  // namespace

std::optional<uint32_t> local_peer_uid(int fd) {
  sockaddr_storage mine{}, theirs{};
  socklen_t ml = sizeof mine, tl = sizeof theirs;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &ml) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&theirs), &tl) != 0)
    return std::nullopt;
  const auto local = diag_addr(mine), peer = diag_addr(theirs);
  if (!local || !peer || local->family != peer->family) return std::nullopt;
  // The peer's socket: its source is the peer's address and port, its destination ours.
  struct {
    nlmsghdr nlh;
    inet_diag_req_v2 req;
  } msg{};
  msg.nlh.nlmsg_len = sizeof msg;
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST;
  msg.req.sdiag_family = peer->family;
  msg.req.sdiag_protocol = IPPROTO_TCP;
  msg.req.idiag_states = ~0u;
  msg.req.id.idiag_sport = peer->port;
  msg.req.id.idiag_dport = local->port;
  std::memcpy(msg.req.id.idiag_src, peer->addr, sizeof peer->addr);
  std::memcpy(msg.req.id.idiag_dst, local->addr, sizeof local->addr);
  msg.req.id.idiag_cookie[0] = msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  const Fd nl(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (nl.get() < 0) return std::nullopt;
  const timeval bound{0, 100'000};  // the kernel answers at once; never a hang in accept
  (void)::setsockopt(nl.get(), SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(nl.get(), &msg, sizeof msg, 0, reinterpret_cast<sockaddr*>(&kernel),
               sizeof kernel) != static_cast<ssize_t>(sizeof msg))
    return std::nullopt;
  alignas(nlmsghdr) char buf[1024];
  const ssize_t n = ::recv(nl.get(), buf, sizeof buf, 0);
  if (n < static_cast<ssize_t>(sizeof(nlmsghdr))) return std::nullopt;
  const auto* h = reinterpret_cast<const nlmsghdr*>(buf);
  if (!NLMSG_OK(h, static_cast<unsigned>(n)) || h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
      h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg)))
    return std::nullopt;  // NLMSG_ERROR: no such socket here (a remote peer)
  const auto* d = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
  return d->idiag_uid;
}

std::string client_key(int fd, const std::string& peer, int v4_bits, int v6_bits) {
  if (const auto uid = local_peer_uid(fd)) return fmt::format("uid {} (this host)", *uid);
  return network_block(peer, v4_bits, v6_bits);
}

}  // namespace iobench
