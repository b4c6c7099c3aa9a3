// The pure cost of TLS records by buffer size and cipher: SSL_write + SSL_read through memory
// BIOs, no syscalls.
#include <benchmark/benchmark.h>

#include <vector>

#include "tls/memory_pair.h"

namespace {

void BM_TlsRecordRoundTrip(benchmark::State& state, iobench::tls::TlsVersion version,
                           const char* cipher) {
  auto pair = iobench::tls::MemoryPair::create(version, cipher);
  if (!pair) {
    state.SkipWithError(pair.error().message.c_str());
    return;
  }
  const auto size = static_cast<size_t>(state.range(0));
  std::vector<std::byte> in(size, std::byte{7}), out(size);
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores)
    if (auto st = (*pair)->roundtrip(in, out); !st) {
      state.SkipWithError(st.error().message.c_str());
      break;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
  const size_t records = (size + 16383) / 16384;  // whole records
  state.counters["records"] = static_cast<double>(records);
  state.SetLabel((*pair)->cipher());
}

}  // namespace

BENCHMARK_CAPTURE(BM_TlsRecordRoundTrip, tls13_aes128gcm, iobench::tls::TlsVersion::k13, "AES-128-GCM")
    ->RangeMultiplier(2)
    ->Range(1 << 10, 64 << 10);
BENCHMARK_CAPTURE(BM_TlsRecordRoundTrip, tls13_aes256gcm, iobench::tls::TlsVersion::k13, "AES-256-GCM")
    ->RangeMultiplier(2)
    ->Range(1 << 10, 64 << 10);
BENCHMARK_CAPTURE(BM_TlsRecordRoundTrip, tls13_chacha20, iobench::tls::TlsVersion::k13, "CHACHA20-POLY1305")
    ->RangeMultiplier(2)
    ->Range(1 << 10, 64 << 10);
BENCHMARK_CAPTURE(BM_TlsRecordRoundTrip, tls12_aes128gcm, iobench::tls::TlsVersion::k12, "AES-128-GCM")
    ->RangeMultiplier(2)
    ->Range(1 << 10, 64 << 10);
