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
  const uint64_t t = source_->target();
  if (t != size_) {
    if (backed_) {
      mem_ = std::make_unique<std::byte[]>(t);
      std::memset(mem_.get(), 0, t);
    }
    size_ = t;
  }
  source_->adopted(0, size_);
}

void IoBuffer::adopt(uint64_t to) {
  // Free first: the peak of a shrinking buffer is never old + new.
  if (backed_) {
    mem_.reset();
    mem_ = std::make_unique<std::byte[]>(to);
    std::memset(mem_.get(), 0, to);
  }
  const uint64_t from = size_;
  size_ = to;
  ++resizes_;
  source_->adopted(from, to);
}

}  // namespace iobench
