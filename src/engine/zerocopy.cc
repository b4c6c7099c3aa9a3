#include "engine/zerocopy.h"

#include <fmt/format.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace iobench {

Result<ZerocopySender> ZerocopySender::enable(Stream& s) {
  if (s.proto() != Proto::kTcp) return fail("--zerocopy needs a plain TCP stream (not TLS)");
  const int one = 1;
  if (setsockopt(s.fd(), SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one) != 0)
    return fail(fmt::format("setsockopt(SO_ZEROCOPY): {}", std::strerror(errno)));
  return ZerocopySender(s);
}

Result<std::optional<ZerocopySender>> ZerocopySender::enable_if(Stream& s, bool on) {
  if (!on) return std::optional<ZerocopySender>{};
  auto z = enable(s);
  if (!z) return std::unexpected(z.error());
  return std::optional<ZerocopySender>(*z);
}

IoResult ZerocopySender::send(std::span<const std::byte> data, IoCounters& io, double timeout_s) {
  while (true) {
    IoResult r = s_.send_flags(data, MSG_ZEROCOPY);
    if (r.ok()) {
      ++sent_;
      ++io.zc.sends;
      return r;
    }
    if (r.state != IoResult::State::kError || r.err != ENOBUFS) return r;
    // Pinned-page budget (optmem) spent: wait for the kernel to release some sends.
    if (auto st = reap(io, false, timeout_s); !st) return {IoResult::State::kError, 0, EIO};
    if (sent_ > notified_) {
      pollfd p{s_.fd(), 0, 0};  // POLLERR is always reported
      ::poll(&p, 1, static_cast<int>(timeout_s * 1000));
    }
  }
}

Status ZerocopySender::reap(IoCounters& io, bool wait, double timeout_s) {
  while (true) {
    char control[128];
    msghdr msg{};
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(s_.fd(), &msg, MSG_ERRQUEUE | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        return fail(fmt::format("reading zerocopy notifications: {}", std::strerror(errno)));
      if (!wait || all_notified()) return {};
      pollfd p{s_.fd(), 0, 0};
      const int rc = ::poll(&p, 1, static_cast<int>(timeout_s * 1000));
      if (rc == 0)
        return fail(fmt::format("zerocopy: {} of {} sends never notified within {} s",
                                sent_ - notified_, sent_, timeout_s));
      continue;
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (!((c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) ||
            (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR)))
        continue;
      sock_extended_err ee{};
      std::memcpy(&ee, CMSG_DATA(c), sizeof ee);
      if (ee.ee_origin != SO_EE_ORIGIN_ZEROCOPY || ee.ee_errno != 0) continue;
      // One notification covers the sends numbered ee_info..ee_data (inclusive, 32-bit ids).
      const uint64_t count = static_cast<uint32_t>(ee.ee_data - ee.ee_info) + uint64_t{1};
      ++io.zc.notifications;
      notified_ += count;
      if (ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED) io.zc.copied += count;
    }
  }
}

}  // namespace iobench
