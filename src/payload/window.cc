#include "payload/window.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <utility>

#include "payload/verifier.h"
#include "payload/xxh3_fast.h"

namespace iobench {
namespace {

// A memfd holding the window's bytes: the pages every copy maps.
Result<int> window_file(std::span<const std::byte> first) {
  const int fd = memfd_create("iobench-window", MFD_CLOEXEC);
  if (fd < 0) return fail(fmt::format("memfd_create: {}", std::strerror(errno)));
  size_t off = 0;
  while (off < first.size()) {
    const ssize_t n = ::write(fd, first.data() + off, first.size() - off);
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      return fail(fmt::format("writing the source window: {}", std::strerror(err)));
    }
    off += static_cast<size_t>(n);
  }
  return fd;
}

// Copies of a `w`-byte window the span holds: whole windows and whole `pass_unit`-byte writes
// (their least common multiple) when that is no longer than kWindowSpan; otherwise at least
// kWindowSpan (the largest buffer) of whole windows, so no write is cut by the span.
uint64_t span_copies(uint64_t w, uint64_t pass_unit) {
  if (pass_unit > 0 && pass_unit <= kWindowSpan) {
    const uint64_t shortest = std::lcm(w, pass_unit);
    if (shortest <= std::max(w, kWindowSpan)) return shortest / w;
  }
  return (kWindowSpan + w - 1) / w;
}

}  // namespace

uint64_t RepeatedWindow::span_bytes(uint64_t w, uint64_t pass_unit) {
  return w == 0 ? 0 : span_copies(w, pass_unit) * w;
}

uint64_t RepeatedWindow::digest(uint64_t total) const {
  return window_digest(whole_, bytes().first(static_cast<size_t>(window_)), total);
}

Result<RepeatedWindow> RepeatedWindow::map(std::span<const std::byte> first, uint64_t total,
                                           uint64_t pass_unit) {
  const uint64_t w = first.size();
  if (w == 0 || w % kWindowAlign != 0)
    return fail(fmt::format("source window of {} bytes: a multiple of {}", w, kWindowAlign));
  if (total == 0) return fail("source window for an empty stream");
  const uint64_t copies =
      total == kAnyLength ? span_copies(w, pass_unit)
                          : std::min((total + w - 1) / w, span_copies(w, pass_unit));
  auto fd = window_file(first);
  if (!fd) return std::unexpected(fd.error());
  RepeatedWindow r;
  r.reserved_ = static_cast<size_t>(copies * w);
  r.span_ = std::min<uint64_t>(total, r.reserved_);
  // Reserve the whole span, then lay the window's pages over it copy by copy.
  r.base_ = mmap(nullptr, r.reserved_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (r.base_ == MAP_FAILED) {
    r.base_ = nullptr;
    ::close(*fd);
    return fail(fmt::format("reserving {} bytes: {}", r.reserved_, std::strerror(errno)));
  }
  for (uint64_t i = 0; i < copies; ++i) {
    void* at = static_cast<char*>(r.base_) + i * w;
    if (mmap(at, static_cast<size_t>(w), PROT_READ, MAP_SHARED | MAP_FIXED | MAP_POPULATE, *fd,
             0) == MAP_FAILED) {
      const int err = errno;
      ::close(*fd);
      return fail(fmt::format("mapping the source window ({} of {}): {}", i, copies,
                              std::strerror(err)));
    }
  }
  ::close(*fd);  // the mappings hold the pages
  r.window_ = w;
  r.whole_ = xxh3_oneshot(first.data(), first.size());
  if (total != kAnyLength) r.xxh3_ = window_digest(r.whole_, first, total);
  return r;
}

RepeatedWindow::RepeatedWindow(RepeatedWindow&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)),
      reserved_(std::exchange(o.reserved_, 0)),
      span_(o.span_),
      window_(o.window_),
      whole_(o.whole_),
      xxh3_(o.xxh3_) {}

RepeatedWindow::~RepeatedWindow() {
  if (base_) munmap(base_, reserved_);
}

}  // namespace iobench
