// MSG_ZEROCOPY on a TCP socket, for the blocking and epoll engines: each send pins the payload's
// pages instead of copying them, and the kernel later reports on the socket's error queue which
// sends it has released and whether it had to copy after all (SO_EE_CODE_ZEROCOPY_COPIED —
// always so on loopback, where the receiver gets the very pages).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>

#include "engine/engine.h"
#include "net/stream.h"
#include "util/result.h"

namespace iobench {

class ZerocopySender {
 public:
  // SO_ZEROCOPY on the stream's socket (plain TCP only).
  static Result<ZerocopySender> enable(Stream& s);
  // enable() when `on` (--zerocopy), else no sender: the engines' one way in.
  static Result<std::optional<ZerocopySender>> enable_if(Stream& s, bool on);
  // One send(MSG_ZEROCOPY). ENOBUFS (the socket's budget for pinned pages is spent) reaps
  // notifications, waiting for some, and retries.
  IoResult send(std::span<const std::byte> data, IoCounters& io, double timeout_s);
  // Reads the error queue: what it holds now, or (`wait`) until every send so far has been
  // notified, failing after `timeout_s` without news.
  Status reap(IoCounters& io, bool wait, double timeout_s);
  bool all_notified() const { return notified_ == sent_; }

 private:
  explicit ZerocopySender(Stream& s) : s_(s) {}
  Stream& s_;
  uint64_t sent_ = 0;      // sends that queued data (each takes one notification id)
  uint64_t notified_ = 0;  // of those, reported complete
};

// The blocking and epoll engines' one write: the next chunk of `data` from `off` (at most the
// buffer's size), through `zc` when zero-copy is on. Counts the call; when it succeeds, counts a
// short write and the bytes and moves `off` on (a partial write continues where the kernel
// stopped: the next call is not a new buffer). Inline: it is on every write of the data phase.
inline IoResult write_next(Stream& s, std::optional<ZerocopySender>& zc,
                           std::span<const std::byte> data, size_t& off, IoBuffer& buf,
                           IoCounters& io, double timeout_s) {
  const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), data.size() - off));
  IoResult r =
      zc ? zc->send(data.subspan(off, want), io, timeout_s) : s.write(data.subspan(off, want));
  ++io.calls;
  if (!r.ok()) return r;
  if (r.bytes < want) ++io.short_writes;
  off += r.bytes;
  io.bytes += r.bytes;
  return r;
}

}  // namespace iobench
