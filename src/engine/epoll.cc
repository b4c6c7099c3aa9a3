#include "engine/epoll.h"

#include <fmt/format.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/zerocopy.h"

namespace iobench {

Result<std::unique_ptr<Engine>> EpollEngine::create(const EngineOptions& o) {
  if (o.edge && o.reads_per_event > 0)
    return fail(
        "--reads-per-event needs level-triggered epoll: edge-triggered must read to EAGAIN");
  const int fd = epoll_create1(EPOLL_CLOEXEC);
  if (fd < 0) return fail(fmt::format("epoll_create1: {}", std::strerror(errno)));
  return std::unique_ptr<Engine>(new EpollEngine(fd, o));
}

EpollEngine::~EpollEngine() { ::close(epfd_); }

Status EpollEngine::watch(Stream& s, uint32_t events) {
  if (auto st = s.set_nonblocking(true); !st) return st;
  epoll_event ev{};
  ev.events = events | (opts_.edge ? EPOLLET : 0u);
  ev.data.fd = s.fd();
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, s.fd(), &ev) != 0)
    return fail(fmt::format("epoll_ctl ADD: {}", std::strerror(errno)));
  return {};
}

void EpollEngine::unwatch(Stream& s) {
  epoll_ctl(epfd_, EPOLL_CTL_DEL, s.fd(), nullptr);
  (void)s.set_nonblocking(false);  // the control channel after the data phase blocks again
}

Status EpollEngine::wait(IoCounters& io, const char* what, uint64_t done, uint64_t total) {
  epoll_event ev{};
  int n;
  do {
    ++io.waits;
    n = epoll_wait(epfd_, &ev, 1, static_cast<int>(opts_.timeout_s * 1000));
  } while (n < 0 && errno == EINTR);
  if (n < 0) return fail(fmt::format("epoll_wait: {}", std::strerror(errno)));
  if (n == 0)
    return fail(
        fmt::format("{} failed after {} of {} bytes: timed out (no progress)", what, done, total));
  return {};
}

Status EpollEngine::send(Stream& s, std::span<const std::byte> data, IoBuffer& buf,
                         IoCounters& io) {
  auto enabled = ZerocopySender::enable_if(s, opts_.zerocopy);
  if (!enabled) return std::unexpected(enabled.error());
  std::optional<ZerocopySender>& zc = *enabled;
  if (auto st = watch(s, EPOLLOUT); !st) return st;
  Status result;
  size_t off = 0;
  while (off < data.size()) {
    IoResult r = write_next(s, zc, data, off, buf, io, opts_.timeout_s);
    if (r.ok()) continue;
    if (r.state == IoResult::State::kWouldBlock) {
      ++io.would_block;
      // Pending notifications make epoll report EPOLLERR: read them, or it never sleeps.
      if (zc)
        if (result = zc->reap(io, false, opts_.timeout_s); !result) break;
      if (result = wait(io, "write", off, data.size()); !result) break;
      continue;
    }
    result =
        fail(fmt::format("write failed after {} of {} bytes: {}", off, data.size(), s.describe(r)));
    break;
  }
  // TLS, memory-BIO model: records accepted by the last writes may still wait for the socket.
  while (result) {
    IoResult f = s.flush();
    if (f.ok()) break;
    if (f.state != IoResult::State::kWouldBlock) {
      result = fail(
          fmt::format("write failed after {} of {} bytes: {}", off, data.size(), s.describe(f)));
      break;
    }
    ++io.would_block;
    result = wait(io, "write", off, data.size());
  }
  unwatch(s);
  if (result && zc) result = zc->reap(io, true, opts_.timeout_s);
  return result;
}

Status EpollEngine::recv(Stream& s, uint64_t total, IoBuffer& buf, ByteSink& sink, IoCounters& io) {
  if (auto st = watch(s, EPOLLIN); !st) return st;
  Status result;
  uint64_t got = 0;
  uint32_t reads_this_event = 0;
  while (got < total) {
    // Level-triggered with a cap: yield to the loop after N reads, as Valkey caps the replication
    // link; epoll_wait then reports the socket ready again at once if data is left.
    if (opts_.reads_per_event > 0 && reads_this_event == opts_.reads_per_event) {
      reads_this_event = 0;
      if (result = wait(io, "read", got, total); !result) break;
    }
    const std::span<std::byte> mem = buf.span();
    const size_t want = static_cast<size_t>(std::min<uint64_t>(mem.size(), total - got));
    IoResult r = s.read(mem.first(want));
    ++io.calls;
    ++reads_this_event;
    if (r.ok()) {
      got += r.bytes;
      io.bytes += r.bytes;
      if (result = sink.consume(mem.first(r.bytes)); !result) break;
      continue;
    }
    if (r.state == IoResult::State::kWouldBlock) {
      ++io.would_block;
      reads_this_event = 0;
      if (result = wait(io, "read", got, total); !result) break;
      continue;
    }
    result = fail(fmt::format("read failed after {} of {} bytes: {}", got, total, s.describe(r)));
    break;
  }
  unwatch(s);
  return result;
}

}  // namespace iobench
