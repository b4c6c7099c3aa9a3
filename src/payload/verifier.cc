#include "payload/verifier.h"

#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_estimateDStreamSize: exported by the shared library
#include <fmt/format.h>
#include <xxhash.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <array>

#include "payload/xxh3_fast.h"

namespace iobench {

namespace {

// One piece's digest into the digest of pieces.
void fold(XXH3_state_t* pieces, uint64_t digest) {
  std::array<unsigned char, 8> le{};
  for (size_t i = 0; i < le.size(); ++i) le[i] = static_cast<unsigned char>(digest >> (8 * i));
  XXH3_64bits_update(pieces, le.data(), le.size());
}

}  // namespace

uint64_t decoder_memory() {
  return ZSTD_estimateDStreamSize(size_t{1} << kDecodeWindowLog) + ZSTD_DStreamOutSize();
}

struct Verifier::State {
  XXH3_state_t* hash = XXH3_createState();
  XXH3_state_t* pieces = XXH3_createState();   // --source-window: over the pieces' digests
  XXH3_state_t* scratch = XXH3_createState();  // xxh3() folds the open piece in here
  ZSTD_DCtx* dctx = nullptr;
  ~State() {
    XXH3_freeState(hash);
    XXH3_freeState(pieces);
    XXH3_freeState(scratch);
    ZSTD_freeDCtx(dctx);
  }
};

Verifier::Verifier(bool decompress, uint64_t window, uint64_t max_ratio)
    : state_(std::make_unique<State>()),
      decompress_(decompress),
      window_(window),
      max_ratio_(max_ratio) {
  if (decompress_) {
    state_->dctx = ZSTD_createDCtx();
    if (state_->dctx) ZSTD_DCtx_setParameter(state_->dctx, ZSTD_d_windowLogMax, kDecodeWindowLog);
    out_.resize(ZSTD_DStreamOutSize());
  }
  reset();
}

Verifier::~Verifier() = default;

void Verifier::reset() {
  XXH3_64bits_reset(state_->hash);
  XXH3_64bits_reset(state_->pieces);
  in_window_ = 0;
  if (state_->dctx) ZSTD_DCtx_reset(state_->dctx, ZSTD_reset_session_only);
  decoded_bytes_ = 0;
  encoded_bytes_ = 0;
  last_hint_ = 0;
}

void Verifier::hash_windows(std::span<const std::byte> chunk) {
  while (!chunk.empty()) {
    const size_t take = static_cast<size_t>(std::min<uint64_t>(chunk.size(), window_ - in_window_));
    xxh3_update(state_->hash, chunk.data(), take);
    chunk = chunk.subspan(take);
    in_window_ += take;
    if (in_window_ == window_) {
      fold(state_->pieces, XXH3_64bits_digest(state_->hash));
      XXH3_64bits_reset(state_->hash);
      in_window_ = 0;
    }
  }
}

Status Verifier::consume(std::span<const std::byte> chunk) {
  if (window_)
    hash_windows(chunk);
  else
    xxh3_update(state_->hash, chunk.data(), chunk.size());
  if (!decompress_) return {};
  encoded_bytes_ += chunk.size();
  ZSTD_inBuffer in{chunk.data(), chunk.size(), 0};
  // A full output buffer may hide more pending output: loop until input is used up and the
  // decoder stopped short of filling the buffer.
  while (true) {
    ZSTD_outBuffer out{out_.data(), out_.size(), 0};
    size_t r = ZSTD_decompressStream(state_->dctx, &out, &in);
    if (ZSTD_getErrorCode(r) == ZSTD_error_frameParameter_windowTooLarge)
      return fail(fmt::format("zstd frame after {} decoded bytes declares a window larger than "
                              "the {} MiB this side decodes (iobench's frames need at most that)",
                              decoded_bytes_, (uint64_t{1} << kDecodeWindowLog) >> 20));
    if (ZSTD_isError(r))
      return fail(fmt::format("zstd decode failed after {} decoded bytes: {}", decoded_bytes_,
                              ZSTD_getErrorName(r)));
    decoded_bytes_ += out.pos;
    last_hint_ = r;
    if (max_ratio_ && decoded_bytes_ > (uint64_t{1} << 20) &&
        decoded_bytes_ / max_ratio_ > encoded_bytes_)
      return fail(fmt::format("zstd stream decodes to more than {} times its size ({} decoded "
                              "from {} bytes): refused, as its decoding CPU would be (the "
                              "server's --max-decode-ratio)",
                              max_ratio_, decoded_bytes_, encoded_bytes_));
    if (in.pos == in.size && out.pos < out.size) break;
  }
  return {};
}

Status Verifier::finish() const {
  if (decompress_ && last_hint_ != 0)
    return fail(
        fmt::format("zstd stream ended inside a frame after {} decoded bytes", decoded_bytes_));
  return {};
}

uint64_t Verifier::xxh3() const {
  if (!window_) return XXH3_64bits_digest(state_->hash);
  XXH3_copyState(state_->scratch, state_->pieces);
  if (in_window_) fold(state_->scratch, XXH3_64bits_digest(state_->hash));
  return XXH3_64bits_digest(state_->scratch);
}

uint64_t window_digest(std::span<const std::byte> window, uint64_t total) {
  return window_digest(xxh3_oneshot(window.data(), window.size()), window, total);
}

uint64_t window_digest(uint64_t whole, std::span<const std::byte> window, uint64_t total) {
  const uint64_t w = window.size();
  XXH3_state_t* pieces = XXH3_createState();
  XXH3_64bits_reset(pieces);
  for (uint64_t i = 0; i < total / w; ++i) fold(pieces, whole);
  if (total % w) fold(pieces, xxh3_oneshot(window.data(), static_cast<size_t>(total % w)));
  const uint64_t digest = XXH3_64bits_digest(pieces);
  XXH3_freeState(pieces);
  return digest;
}

}  // namespace iobench
