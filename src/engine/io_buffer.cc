#include "engine/io_buffer.h"

#include <cstring>

namespace iobench {

IoBuffer::IoBuffer(uint64_t bytes, bool backed) : size_(bytes), backed_(backed) {
  if (backed_) {
    mem_ = std::make_unique<std::byte[]>(size_);
    std::memset(mem_.get(), 0, size_);
  }
}

void IoBuffer::follow(BufferSizeSource* source) {
  source_ = source;
  if (!source_) return;
  const uint64_t granted = source_->adopt(0, source_->target());
  if (granted != size_) reallocate(granted);
}

void IoBuffer::reallocate(uint64_t to) {
  // Free first: the peak of a shrinking buffer is never old + new.
  if (backed_) {
    mem_.reset();
    mem_ = std::make_unique<std::byte[]>(to);
    std::memset(mem_.get(), 0, to);
  }
  size_ = to;
}

void IoBuffer::adopt(uint64_t to) {
  const uint64_t granted = source_->adopt(size_, to);
  if (granted == size_) return;
  reallocate(granted);
  ++resizes_;
}

}  // namespace iobench
