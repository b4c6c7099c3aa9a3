// One connection's I/O buffer. Engines ask it for the size (and, receiving, the memory) before
// every call, so a size that changes between calls — the adaptive mode — is adopted at the
// connection's next I/O call on every engine, without the engine knowing about policies.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <memory>
#include <span>

namespace iobench {

// Where a followed buffer's size comes from (adaptive/registry.h implements it).
class BufferSizeSource {
 public:
  virtual ~BufferSizeSource() = default;
  virtual uint64_t target() const = 0;  // cheap: called before every I/O call
  // The buffer asks to change from `from` (0: its first size) to `to`; the answer is the size
  // granted, which may be less when growing (a memory budget), or `from` (no change now).
  virtual uint64_t adopt(uint64_t from, uint64_t to) = 0;
};

// A sender's sizes that change at every write (--write-pattern): unlike a followed size, not a
// buffer being resized. Engines that ask the size once per write call (blocking, epoll) follow it.
class WriteSizeSequence {
 public:
  virtual ~WriteSizeSequence() = default;
  virtual uint64_t next() = 0;
};

class IoBuffer {
 public:
  // `backed`: holds memory of the current size (a receiver's buffer); a sender's buffer is a
  // chunk size over the payload it writes from, so it holds none.
  IoBuffer(uint64_t bytes, bool backed);
  // From now on, size() follows `source` (not owned; must outlive the buffer's use).
  void follow(BufferSizeSource* source);
  // From now on, each size() is the sequence's next (a sender's buffer only).
  void use_sequence(WriteSizeSequence* sequence) { sequence_ = sequence; }

  // The size for the next call; adopts the source's current size first (reallocating the
  // memory of a backed buffer, touched so the next call does not page-fault on it).
  uint64_t size() {
    if (sequence_) return sequence_->next();
    if (source_) {
      const uint64_t t = source_->target();
      if (t != size_) adopt(t);
    }
    return size_;
  }
  // size() bytes of memory (backed buffers only).
  std::span<std::byte> span() {
    const uint64_t n = size();
    return {mem_.get(), static_cast<size_t>(n)};
  }
  uint64_t resizes() const { return resizes_; }
  // What to do when the connection's data has all moved (it leaves the live count): the session
  // calls it once the engine returns; a writer that serves several connections (--fanout) calls
  // it through done() the moment one of them is finished. At most once; size() is not asked
  // again after it.
  void on_done(std::function<void()> f) { done_ = std::move(f); }
  void done() {
    if (auto f = std::exchange(done_, nullptr)) f();
  }

 private:
  void adopt(uint64_t to);
  void reallocate(uint64_t to);
  uint64_t size_;
  bool backed_;
  std::unique_ptr<std::byte[]> mem_;
  BufferSizeSource* source_ = nullptr;
  WriteSizeSequence* sequence_ = nullptr;
  std::function<void()> done_;
  uint64_t resizes_ = 0;
};

}  // namespace iobench
