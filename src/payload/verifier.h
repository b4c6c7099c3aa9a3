// The receiver's view of the payload: a running XXH3-64 and, optionally, a streaming zstd decode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "util/result.h"

namespace iobench {

// Fed every received chunk in order. Decoding reuses one DCtx (creating one costs ~13 µs) and
// discards the output: it stands for the CPU a replica spends applying the stream.
class Verifier {
 public:
  explicit Verifier(bool decompress);
  ~Verifier();
  Verifier(const Verifier&) = delete;
  Verifier& operator=(const Verifier&) = delete;

  // Starts a new stream (same contexts, reset state).
  void reset();
  // Returns an error only for a corrupt zstd stream (and only when decoding).
  Status consume(std::span<const std::byte> chunk);
  // Checks the stream ended on a frame boundary (decoding only).
  Status finish() const;

  uint64_t xxh3() const;
  uint64_t decoded_bytes() const { return decoded_bytes_; }
  bool decompressing() const { return decompress_; }

 private:
  struct State;
  std::unique_ptr<State> state_;
  bool decompress_;
  uint64_t decoded_bytes_ = 0;
  size_t last_hint_ = 0;  // ZSTD_decompressStream's return: 0 once a frame is complete
  std::vector<std::byte> out_;
};

}  // namespace iobench
