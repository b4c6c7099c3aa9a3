#include "payload/verifier.h"

#include <fmt/format.h>
#include <xxhash.h>
#include <zstd.h>

#include "payload/xxh3_fast.h"

namespace iobench {

struct Verifier::State {
  XXH3_state_t* hash = XXH3_createState();
  ZSTD_DCtx* dctx = nullptr;
  ~State() {
    XXH3_freeState(hash);
    ZSTD_freeDCtx(dctx);
  }
};

Verifier::Verifier(bool decompress) : state_(std::make_unique<State>()), decompress_(decompress) {
  if (decompress_) {
    state_->dctx = ZSTD_createDCtx();
    out_.resize(ZSTD_DStreamOutSize());
  }
  reset();
}

Verifier::~Verifier() = default;

void Verifier::reset() {
  XXH3_64bits_reset(state_->hash);
  if (state_->dctx) ZSTD_DCtx_reset(state_->dctx, ZSTD_reset_session_only);
  decoded_bytes_ = 0;
  last_hint_ = 0;
}

Status Verifier::consume(std::span<const std::byte> chunk) {
  xxh3_update(state_->hash, chunk.data(), chunk.size());
  if (!decompress_) return {};
  ZSTD_inBuffer in{chunk.data(), chunk.size(), 0};
  // A full output buffer may hide more pending output: loop until input is used up and the
  // decoder stopped short of filling the buffer.
  while (true) {
    ZSTD_outBuffer out{out_.data(), out_.size(), 0};
    size_t r = ZSTD_decompressStream(state_->dctx, &out, &in);
    if (ZSTD_isError(r))
      return fail(fmt::format("zstd decode failed after {} decoded bytes: {}", decoded_bytes_,
                              ZSTD_getErrorName(r)));
    decoded_bytes_ += out.pos;
    last_hint_ = r;
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

uint64_t Verifier::xxh3() const { return XXH3_64bits_digest(state_->hash); }

}  // namespace iobench
