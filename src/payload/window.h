// --source-window: a sender's source that stays hot, as a primary's socket writer sends from a
// buffer its serializer has just filled. The payload's first `window` bytes are mapped over and
// over into one contiguous read-only span (the same physical pages every time), so an engine
// sends it like any payload and every byte it copies comes from the cache, not from a cold
// 100 MiB mapping; the receiver verifies the stream as ever (XXH3 of what it was sent).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "util/result.h"

namespace iobench {

// Pages are mapped whole: a window is a multiple of this; and at most this many copies.
inline constexpr uint64_t kWindowAlign = 4096;
inline constexpr uint64_t kMaxWindowCopies = 32768;
// --source-window's range, on the command line and in a HELLO.
inline constexpr uint64_t kMinWindow = uint64_t{64} << 10, kMaxWindow = uint64_t{1} << 30;

class RepeatedWindow {
 public:
  // `first`: the window's bytes (a multiple of kWindowAlign); `total`: the span's length.
  // Every page is mapped and populated here, outside any clock.
  static Result<RepeatedWindow> map(std::span<const std::byte> first, uint64_t total);
  RepeatedWindow(RepeatedWindow&& o) noexcept;
  RepeatedWindow& operator=(RepeatedWindow&&) = delete;
  RepeatedWindow(const RepeatedWindow&) = delete;
  ~RepeatedWindow();

  std::span<const std::byte> bytes() const {
    return {static_cast<const std::byte*>(base_), static_cast<size_t>(total_)};
  }
  uint64_t xxh3() const { return xxh3_; }  // of bytes(), as the receiver will hash them

 private:
  RepeatedWindow() = default;
  void* base_ = nullptr;
  size_t reserved_ = 0;
  uint64_t total_ = 0;
  uint64_t xxh3_ = 0;
};

}  // namespace iobench
