// Bounds-checked binary encoding for the control protocol: little-endian integers and
// length-prefixed strings, read from a byte span that is never overrun.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "util/result.h"

namespace iobench::proto {

inline constexpr size_t kMaxStringBytes = 1024;  // longer strings are cut when written

class Writer {
 public:
  void u8(uint8_t v) { put(v, 1); }
  void u16(uint16_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void i64(int64_t v) { put(static_cast<uint64_t>(v), 8); }
  void f64(double v);
  void boolean(bool v) { u8(v ? 1 : 0); }
  void str(const std::string& s);  // u16 length, then at most kMaxStringBytes bytes
  std::vector<std::byte>& bytes() { return out_; }

 private:
  void put(uint64_t v, int n);
  std::vector<std::byte> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}
  Result<uint8_t> u8();
  Result<uint16_t> u16();
  Result<uint32_t> u32();
  Result<uint64_t> u64();
  Result<int64_t> i64();
  Result<double> f64();
  Result<bool> boolean();  // only 0 or 1
  Result<std::string> str(size_t max_len);
  // The whole body must be consumed: trailing bytes mean a different message layout.
  Status done() const;

 private:
  Result<uint64_t> take(int n, const char* what);
  std::span<const std::byte> in_;
  size_t pos_ = 0;
};

}  // namespace iobench::proto
