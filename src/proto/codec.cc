#include "proto/codec.h"

#include <fmt/format.h>

#include <bit>

namespace iobench::proto {

void Writer::put(uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out_.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
}

void Writer::f64(double v) { u64(std::bit_cast<uint64_t>(v)); }

void Writer::str(const std::string& s) {
  const size_t n = std::min(s.size(), kMaxStringBytes);
  u16(static_cast<uint16_t>(n));
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  out_.insert(out_.end(), p, p + n);
}

Result<uint64_t> Reader::take(int n, const char* what) {
  if (in_.size() - pos_ < static_cast<size_t>(n))
    return fail(
        fmt::format("truncated message: {} needs {} bytes, {} left", what, n, in_.size() - pos_));
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(in_[pos_ + i]) << (8 * i);
  pos_ += static_cast<size_t>(n);
  return v;
}

Result<uint8_t> Reader::u8() {
  auto v = take(1, "u8");
  if (!v) return std::unexpected(v.error());
  return static_cast<uint8_t>(*v);
}
Result<uint16_t> Reader::u16() {
  auto v = take(2, "u16");
  if (!v) return std::unexpected(v.error());
  return static_cast<uint16_t>(*v);
}
Result<uint32_t> Reader::u32() {
  auto v = take(4, "u32");
  if (!v) return std::unexpected(v.error());
  return static_cast<uint32_t>(*v);
}
Result<uint64_t> Reader::u64() { return take(8, "u64"); }
Result<int64_t> Reader::i64() {
  auto v = take(8, "i64");
  if (!v) return std::unexpected(v.error());
  return static_cast<int64_t>(*v);
}
Result<double> Reader::f64() {
  auto v = take(8, "f64");
  if (!v) return std::unexpected(v.error());
  return std::bit_cast<double>(*v);
}
Result<bool> Reader::boolean() {
  auto v = take(1, "bool");
  if (!v) return std::unexpected(v.error());
  if (*v > 1) return fail(fmt::format("bad boolean value {}", *v));
  return *v == 1;
}
Result<std::string> Reader::str(size_t max_len) {
  auto n = u16();
  if (!n) return std::unexpected(n.error());
  if (*n > max_len) return fail(fmt::format("string of {} bytes exceeds limit {}", *n, max_len));
  if (in_.size() - pos_ < *n)
    return fail(
        fmt::format("truncated message: string needs {} bytes, {} left", *n, in_.size() - pos_));
  std::string s(reinterpret_cast<const char*>(in_.data() + pos_), *n);
  pos_ += *n;
  return s;
}

Status Reader::done() const {
  if (pos_ != in_.size())
    return fail(fmt::format("{} unexpected trailing bytes in message", in_.size() - pos_));
  return {};
}

}  // namespace iobench::proto
