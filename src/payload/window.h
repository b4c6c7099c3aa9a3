// --source-window: a sender's source that stays hot, as a primary's socket writer sends from a
// buffer its serializer has just filled. A payload of `window` bytes is mapped over and
// over into one contiguous read-only span (the same physical pages every time), so an engine
// sends it like any payload and every byte it copies comes from the cache, not from a cold
// 100 MiB mapping; the receiver checks every byte, window by window (payload/verifier.h).
#pragma once

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <span>

#include "util/result.h"

namespace iobench {

// Pages are mapped whole: a window is a multiple of this.
inline constexpr uint64_t kWindowAlign = 4096;
// The span is the window over and over to at least this length (the largest buffer, kMaxBuf);
// a longer stream is sent in passes over it, so the pages mapped (and unmapped at exit) do not
// grow with --bytes. A window that is not a multiple of the buffer ends each pass in one shorter
// write. A sender whose writes are all one size, and whose engine pays nothing for a pass (a
// `pass_unit`), gets the shortest span that is whole windows and whole writes instead: every
// virtual page of a span costs a TLB entry, and cycling through 4096 of them (16 MiB of 4 KiB
// pages) cost ~5% of the CPU of a one-CPU 64K loopback run against cycling through 64.
inline constexpr uint64_t kWindowSpan = uint64_t{16} << 20;
// --source-window's range, on the command line and in a HELLO.
inline constexpr uint64_t kMinWindow = uint64_t{64} << 10, kMaxWindow = uint64_t{1} << 30;

// The window a stream of `bytes` is sent through: `window` when it is shorter (0: none, the
// payload is sent once as it is).
inline uint64_t window_for(uint64_t bytes, uint64_t window) {
  return window > 0 && window < bytes ? window : 0;
}

// How many payload bytes a sender streaming `bytes` through a window of `window` bytes loads:
// the window alone (a whole payload of that size, generated and cached like any), so a long run
// neither builds nor maps a payload it would only repeat. No window: `bytes`.
inline uint64_t window_payload_bytes(uint64_t bytes, uint64_t window) {
  const uint64_t w = window_for(bytes, window);
  return w ? w : bytes;
}

// map()'s `total` for a span that serves a stream of any length: the span a cache shares
// between sessions that stream one window for different --bytes (its digest then per stream).
inline constexpr uint64_t kAnyLength = UINT64_MAX;

class RepeatedWindow {
 public:
  // The bytes map(first, kAnyLength, pass_unit) maps for a window of `w` bytes: every page of
  // the span is populated, so this is what the mapping adds to the process's RSS.
  static uint64_t span_bytes(uint64_t w, uint64_t pass_unit);
  // `first`: the window's bytes (a multiple of kWindowAlign); `total`: the stream's length;
  // `pass_unit`: the size of every write a pass is sent in, when the span may be as short as
  // whole windows of whole writes (0: writes vary, or a pass costs the engine something).
  // Every page of the span is mapped and populated here, outside any clock.
  static Result<RepeatedWindow> map(std::span<const std::byte> first, uint64_t total,
                                    uint64_t pass_unit = 0);
  RepeatedWindow(RepeatedWindow&& o) noexcept;
  RepeatedWindow& operator=(RepeatedWindow&&) = delete;
  RepeatedWindow(const RepeatedWindow&) = delete;
  ~RepeatedWindow();

  // The span a sender streams in passes until `total` bytes are sent: whole windows (each pass
  // starts on a window's first byte), at most `total` bytes long.
  std::span<const std::byte> bytes() const {
    return {static_cast<const std::byte*>(base_), static_cast<size_t>(span_)};
  }
  // The span for a stream of `total` bytes (a span mapped for kAnyLength serves any).
  std::span<const std::byte> bytes_for(uint64_t total) const {
    return bytes().first(static_cast<size_t>(std::min(total, span_)));
  }
  // The stream's digest as the receiver checks it, window by window (window_digest).
  uint64_t xxh3() const { return xxh3_; }
  // The digest of a stream of `total` bytes through this window.
  uint64_t digest(uint64_t total) const;

 private:
  RepeatedWindow() = default;
  void* base_ = nullptr;
  size_t reserved_ = 0;
  uint64_t span_ = 0;
  uint64_t window_ = 0;
  uint64_t whole_ = 0;  // XXH3-64 of one whole window
  uint64_t xxh3_ = 0;
};

}  // namespace iobench
