// libFuzzer target for the control protocol decoder (src/proto): whatever the bytes, decoding
// never crashes, never reads out of bounds, never allocates from an unchecked length (ASan's
// allocation limit catches a huge reserve), and a decoded message re-encodes to a frame that
// decodes to the same bytes again. Built by scripts/fuzz with clang + libFuzzer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "proto/messages.h"

using namespace iobench::proto;

namespace {

void check_round_trip(const Message& m) {
  const std::vector<std::byte> frame = encode(m);
  const std::span<const std::byte> f(frame);
  auto h = decode_header(f.first(kHeaderBytes));
  if (!h) std::abort();  // what we encode, we must accept
  auto again = decode_body(*h, f.subspan(kHeaderBytes));
  if (!again) std::abort();
  if (encode(*again) != frame) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
  if (size < kHeaderBytes) {
    (void)decode_header(in);
    return 0;
  }
  const auto body = in.subspan(kHeaderBytes);
  if (auto h = decode_header(in.first(kHeaderBytes))) {
    if (auto m = decode_body(*h, body)) check_round_trip(*m);
  }
  // Past the header's checks too: every body decoder sees every input, with a header that
  // matches its length (the server only calls decode_body after decode_header said yes).
  if (body.size() <= kMaxGroupBodyBytes) {
    for (uint16_t type = 1; type <= 6; ++type) {
      FrameHeader h{kVersion, static_cast<Type>(type), static_cast<uint32_t>(body.size())};
      if (auto m = decode_body(h, body)) check_round_trip(*m);
    }
  }
  return 0;
}
