#include "engine/blocking.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/zerocopy.h"

namespace iobench {

Status BlockingEngine::send(Stream& s, std::span<const std::byte> data, IoBuffer& buf,
                            IoCounters& io) {
  auto enabled = ZerocopySender::enable_if(s, opts_.zerocopy);
  if (!enabled) return std::unexpected(enabled.error());
  std::optional<ZerocopySender>& zc = *enabled;
  size_t off = 0;
  while (off < data.size()) {
    if (IoResult r = write_next(s, zc, data, off, buf, io, opts_.timeout_s); !r.ok())
      return fail(
          fmt::format("write failed after {} of {} bytes: {}", off, data.size(), s.describe(r)));
    // Notifications pile up on the error queue: read them as we go, as a real sender must.
    if (zc && io.zc.sends % 64 == 0)
      if (auto st = zc->reap(io, false, opts_.timeout_s); !st) return st;
  }
  // No Stream::flush() here: on a blocking socket every write() has put its bytes on the wire.
  // The payload's pages are the sender's again only once every send is notified.
  if (zc) return zc->reap(io, true, opts_.timeout_s);
  return {};
}

Status BlockingEngine::recv(Stream& s, uint64_t total, IoBuffer& buf, ByteSink& sink,
                            IoCounters& io) {
  uint64_t got = 0;
  while (got < total) {
    const std::span<std::byte> mem = buf.span();
    const size_t want = static_cast<size_t>(std::min<uint64_t>(mem.size(), total - got));
    IoResult r = s.read(mem.first(want));
    ++io.calls;
    if (!r.ok())
      return fail(fmt::format("read failed after {} of {} bytes: {}", got, total, s.describe(r)));
    got += r.bytes;
    io.bytes += r.bytes;
    if (auto st = sink.consume(mem.first(r.bytes)); !st) return st;
  }
  return {};
}

}  // namespace iobench
