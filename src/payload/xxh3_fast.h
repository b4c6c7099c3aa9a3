// XXH3-64 through libxxhash's runtime CPU dispatch (AVX-512 / AVX2 / SSE2) where it exists:
// the receiver hashes every byte, and the SSE2 default costs ~3x more CPU per GiB (measured
// 0.090 vs 0.026 s/GiB on a 64 KiB buffer with AVX-512 here).
#pragma once

#include <xxhash.h>

#if defined(__x86_64__) && __has_include(<xxh_x86dispatch.h>)
#include <xxh_x86dispatch.h>
#define IOBENCH_XXH3_DISPATCH 1
#endif

namespace iobench {

inline void xxh3_update(XXH3_state_t* state, const void* data, size_t len) {
#ifdef IOBENCH_XXH3_DISPATCH
  XXH3_64bits_update_dispatch(state, data, len);
#else
  XXH3_64bits_update(state, data, len);
#endif
}

inline uint64_t xxh3_oneshot(const void* data, size_t len) {
#ifdef IOBENCH_XXH3_DISPATCH
  return XXH3_64bits_dispatch(data, len);
#else
  return XXH3_64bits(data, len);
#endif
}

}  // namespace iobench
