// The receiver's view of the payload: a running XXH3-64 and, optionally, a streaming zstd decode.
// A --source-window stream is checked window by window: its digest is XXH3-64 over the digests
// of its window-sized pieces (window_digest), so a sender repeating one window knows the digest
// of any length from the window alone, and the receiver still hashes every byte it reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "util/result.h"

namespace iobench {

// The largest zstd window a Verifier decodes (ZSTD_d_windowLogMax): every payload iobench
// sends is frames of about kRawChunk (1 MiB, a little over when a chunk ends mid-command) raw
// bytes, each with its content size, so no frame of ours needs more than 2 MiB; a stream that
// declares a larger window (zstd's own default bound is 128 MiB) is refused at its header,
// before the decoder allocates it.
inline constexpr int kDecodeWindowLog = 21;

// What one decoding Verifier can make this process hold (the decoder at kDecodeWindowLog and
// its output buffer): counted in a server session's memory before the session starts.
uint64_t decoder_memory();

// Fed every received chunk in order. Decoding reuses one DCtx (creating one costs ~13 µs) and
// discards the output: it stands for the CPU a replica spends applying the stream.
class Verifier {
 public:
  // `window` > 0: the stream is the sender's window over and over, checked piece by piece.
  // `max_ratio` > 0: a stream decoding to more than that many times the bytes fed, past its
  // first MiB, is refused (a server's bound on the decoding CPU a client's stream can cost).
  explicit Verifier(bool decompress, uint64_t window = 0, uint64_t max_ratio = 0);
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
  void hash_windows(std::span<const std::byte> chunk);
  bool decompress_;
  uint64_t window_ = 0;
  uint64_t max_ratio_ = 0;
  uint64_t in_window_ = 0;  // bytes of the current piece hashed so far
  uint64_t decoded_bytes_ = 0;
  uint64_t encoded_bytes_ = 0;  // fed to the decoder
  size_t last_hint_ = 0;  // ZSTD_decompressStream's return: 0 once a frame is complete
  std::vector<std::byte> out_;
};

// The digest a receiver's Verifier(..., window.size()) reaches over `total` bytes of `window`
// repeated: XXH3-64 over the pieces' XXH3-64 digests, each as 8 little-endian bytes.
uint64_t window_digest(std::span<const std::byte> window, uint64_t total);
// The same when the whole window's digest (`whole`) is known.
uint64_t window_digest(uint64_t whole, std::span<const std::byte> window, uint64_t total);

}  // namespace iobench
