// What the receiver and the payload cost per byte: XXH3, zstd with reused vs fresh contexts,
// the replication-stream generator.
#include <benchmark/benchmark.h>
#include <xxhash.h>
#include <zstd.h>

#include <string>
#include <vector>

#include "payload/resp_generator.h"
#include "payload/xxh3_fast.h"

namespace {

std::string sample_stream(size_t bytes) {
  iobench::RespGenerator g(1);
  std::string s;
  g.append(s, bytes);
  s.resize(bytes);
  return s;
}

void BM_Xxh3(benchmark::State& state) {
  std::vector<char> buf(static_cast<size_t>(state.range(0)), 'x');
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores)
    iobench::xxh3_update(st, buf.data(), buf.size());
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(XXH3_64bits_digest(st));
  XXH3_freeState(st);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

// A compressed chunk of `size` raw bytes, the unit a receiver decodes.
std::string compressed_chunk(size_t size) {
  const std::string raw = sample_stream(size);
  std::string out(ZSTD_compressBound(raw.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), 3));
  return out;
}

void BM_ZstdDecompressReusedContext(benchmark::State& state) {
  const auto size = static_cast<size_t>(state.range(0));
  const std::string frame = compressed_chunk(size);
  std::vector<char> out(size);
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  for (auto _ : state)  // NOLINT(clang-analyzer-deadcode.DeadStores)
    benchmark::DoNotOptimize(
        ZSTD_decompressDCtx(dctx, out.data(), out.size(), frame.data(), frame.size()));
  ZSTD_freeDCtx(dctx);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void BM_ZstdDecompressFreshContext(benchmark::State& state) {
  const auto size = static_cast<size_t>(state.range(0));
  const std::string frame = compressed_chunk(size);
  std::vector<char> out(size);
  for (auto _ : state) {                  // NOLINT(clang-analyzer-deadcode.DeadStores)
    ZSTD_DCtx* dctx = ZSTD_createDCtx();  // the classic hidden cost: a context per call
    benchmark::DoNotOptimize(
        ZSTD_decompressDCtx(dctx, out.data(), out.size(), frame.data(), frame.size()));
    ZSTD_freeDCtx(dctx);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void BM_ZstdCompressReusedContext(benchmark::State& state) {
  const std::string raw = sample_stream(static_cast<size_t>(state.range(0)));
  std::vector<char> out(ZSTD_compressBound(raw.size()));
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  for (auto _ : state)  // NOLINT(clang-analyzer-deadcode.DeadStores)
    benchmark::DoNotOptimize(
        ZSTD_compressCCtx(cctx, out.data(), out.size(), raw.data(), raw.size(), 3));
  ZSTD_freeCCtx(cctx);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void BM_ZstdCompressFreshContext(benchmark::State& state) {
  const std::string raw = sample_stream(static_cast<size_t>(state.range(0)));
  std::vector<char> out(ZSTD_compressBound(raw.size()));
  for (auto _ : state)  // NOLINT(clang-analyzer-deadcode.DeadStores)
    benchmark::DoNotOptimize(ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), 3));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void BM_RespGenerator(benchmark::State& state) {
  iobench::RespGenerator g(1);
  std::string out;
  out.reserve(2 << 20);
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores)
    out.clear();
    g.append(out, 1 << 20);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * (1 << 20));
}

}  // namespace

BENCHMARK(BM_Xxh3)->RangeMultiplier(2)->Range(1 << 10, 64 << 10);
BENCHMARK(BM_ZstdDecompressReusedContext)->RangeMultiplier(4)->Range(1 << 10, 64 << 10);
BENCHMARK(BM_ZstdDecompressFreshContext)->RangeMultiplier(4)->Range(1 << 10, 64 << 10);
BENCHMARK(BM_ZstdCompressReusedContext)->RangeMultiplier(4)->Range(1 << 10, 64 << 10);
BENCHMARK(BM_ZstdCompressFreshContext)->RangeMultiplier(4)->Range(1 << 10, 64 << 10);
BENCHMARK(BM_RespGenerator);
