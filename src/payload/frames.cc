#include "payload/frames.h"

#include <fmt/format.h>
// ZSTD_estimateCCtxSize_usingCParams: in libzstd's exported (static-linking-only) API.
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <system_error>
#include <thread>

#include "payload/resp_generator.h"
#include "util/test_throw.h"

namespace iobench {
namespace {

constexpr uint32_t kSkippableMagic = 0x184D2A50;
constexpr size_t kSkippableHeader = 8;
constexpr size_t kMinRawChunk = 256;
constexpr size_t kFramesPerThread = 4;  // a batch: enough frames to keep every core busy

// One SplitMix64 output for x (resp_generator.cc's splitmix64 steps a state by the same formula).
uint64_t splitmix64_of(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void put_le32(std::byte* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}

struct CCtxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};

// One compression context, reused for every frame of one thread.
class Compressor {
 public:
  explicit Compressor(int level) : cctx_(ZSTD_createCCtx()) {
    if (!cctx_) return;
    ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_contentSizeFlag, 1);
  }
  Status compress(const std::string& raw, std::vector<std::byte>& frame) {
    if (!cctx_) return fail("zstd: cannot create a compression context");
    frame.resize(ZSTD_compressBound(raw.size()));
    const size_t n = ZSTD_compress2(cctx_.get(), frame.data(), frame.size(), raw.data(), raw.size());
    if (ZSTD_isError(n)) return fail(fmt::format("zstd: {}", ZSTD_getErrorName(n)));
    frame.resize(n);
    return {};
  }

 private:
  std::unique_ptr<ZSTD_CCtx, CCtxDeleter> cctx_;
};

// A frame fits when it fills the rest exactly or leaves room for the padding header.
bool fits(size_t frame, uint64_t remaining) {
  return frame == remaining || frame + kSkippableHeader <= remaining;
}

struct Builder {
  const RawSource& source;
  uint64_t bytes;
  std::vector<std::byte>& out;
  const BuildOptions& options;
  std::vector<Compressor> compressors;
  uint64_t index = 0;   // the next chunk
  uint64_t offset = 0;  // raw bytes before it
  uint64_t frames = 0;

  bool keep_going() const { return !options.progress || options.progress(out.size(), bytes); }

  void append(const std::vector<std::byte>& frame, size_t raw_bytes) {
    out.insert(out.end(), frame.begin(), frame.end());
    ++index;
    ++frames;
    offset += raw_bytes;
  }

  // Full-size chunks, a batch at a time, compressed on every thread; appended in order until one
  // does not fit. Returns false when the rest needs smaller chunks (or nothing is left).
  Result<bool> batch() {
    const uint64_t remaining = bytes - out.size();
    // No more frames than the rest can hold (at the average frame size so far), so a small
    // payload does not compress megabytes it will never use.
    const uint64_t average = frames ? out.size() / frames : 0;
    const size_t cap = kFramesPerThread * compressors.size();
    const size_t n = average ? static_cast<size_t>(std::clamp<uint64_t>(remaining / average + 1, 1, cap))
                             : 1;
    std::vector<std::vector<std::byte>> made(n);
    std::vector<size_t> raw_bytes(n);
    std::vector<Status> status(n);
    std::atomic<size_t> next{0};
    // A chunk that cannot be made (out of memory) fails the build, never the process: an
    // exception cannot leave a helper thread, nor this one while helpers are joinable.
    auto work = [&](Compressor& c) noexcept {
      std::string raw;
      for (size_t i; (i = next.fetch_add(1)) < n;) {
        try {
          test_throw_bad_alloc("payload-helper");
          raw.clear();
          source.chunk(index + i, offset + i * kRawChunk, kRawChunk, raw);
          raw_bytes[i] = raw.size();
          status[i] = c.compress(raw, made[i]);
        } catch (const std::exception& e) {
          status[i] = fail(fmt::format("compressing the payload: {}", e.what()));
        }
      }
    };
    const size_t threads = std::min(n, compressors.size());
    std::vector<std::thread> helpers;
    helpers.reserve(threads);
    // A helper the system will not start leaves its share to the others (`next` hands out the
    // chunks): the build is slower, not failed.
    try {
      for (size_t t = 1; t < threads; ++t) {
        test_throw_no_thread("payload-thread");
        helpers.emplace_back([&, t] { work(compressors[t]); });
      }
    } catch (const std::system_error&) {
    }
    work(compressors[0]);
    for (std::thread& h : helpers) h.join();
    for (size_t i = 0; i < n; ++i) {
      if (!status[i]) return std::unexpected(status[i].error());
      if (!fits(made[i].size(), bytes - out.size())) return false;
      append(made[i], raw_bytes[i]);
    }
    return out.size() < bytes;
  }

  // The end: chunks halved until a frame fits, then one skippable frame (magic, 32-bit length,
  // zero bytes) that decoders step over.
  Status tail() {
    size_t chunk = kRawChunk;
    std::string raw;
    std::vector<std::byte> frame;
    while (out.size() < bytes) {
      const uint64_t remaining = bytes - out.size();
      raw.clear();
      source.chunk(index, offset, chunk, raw);
      if (auto st = compressors[0].compress(raw, frame); !st) return st;
      if (fits(frame.size(), remaining)) {
        append(frame, raw.size());
        continue;
      }
      if (chunk > kMinRawChunk && remaining >= kSkippableHeader + 16) {
        chunk = std::max(kMinRawChunk, chunk / 2);
        continue;
      }
      if (remaining < kSkippableHeader) return fail("payload: internal padding error");
      const size_t at = out.size();
      out.resize(bytes);
      put_le32(out.data() + at, kSkippableMagic);
      put_le32(out.data() + at + 4, static_cast<uint32_t>(remaining - kSkippableHeader));
    }
    return {};
  }
};

}  // namespace

void GeneratedSource::chunk(uint64_t index, uint64_t /*offset*/, size_t n,
                            std::string& out) const {
  RespGenerator gen(splitmix64_of(seed_) ^ splitmix64_of(index + 0x632be59bd9b4e019ULL));
  gen.append(out, n);
}

void FileSource::chunk(uint64_t /*index*/, uint64_t offset, size_t n, std::string& out) const {
  size_t pos = static_cast<size_t>(offset % content_.size());
  while (n > 0) {
    const size_t take = std::min(n, content_.size() - pos);
    out.append(content_, pos, take);
    pos = (pos + take) % content_.size();
    n -= take;
  }
}

unsigned build_threads(const BuildOptions& options) {
  return options.threads ? options.threads : std::max(1u, std::thread::hardware_concurrency());
}

uint64_t build_working_bytes(int level, unsigned threads) {
  // Sized for a chunk under 2 MiB: a raw chunk is 1 MiB and the end of one command, and past
  // 1 MiB zstd's tables grow to a 2 MiB window's (level 19: 35 MiB, not 18).
  const uint64_t context =
      ZSTD_estimateCCtxSize_usingCParams(ZSTD_getCParams(level, 2 * kRawChunk, 0));
  // A raw chunk (1 MiB and the end of one generated command) in a string grown by appends,
  // whose capacity may reach twice its size.
  const uint64_t raw = 2 * kRawChunk;
  const uint64_t frames = kFramesPerThread * ZSTD_compressBound(kRawChunk);
  return threads * (context + raw + frames);
}

Result<uint64_t> fill_frames(const RawSource& source, int level, uint64_t bytes,
                             std::vector<std::byte>& out, const BuildOptions& options) {
  const unsigned threads = build_threads(options);
  Builder b{source, bytes, out, options, {}};
  b.compressors.reserve(threads);
  for (unsigned t = 0; t < threads; ++t) b.compressors.emplace_back(level);
  out.clear();
  out.reserve(bytes);
  for (;;) {
    if (!b.keep_going()) return fail("payload generation interrupted");
    auto more = b.batch();
    if (!more) return std::unexpected(more.error());
    if (!*more) break;
  }
  if (auto st = b.tail(); !st) return std::unexpected(st.error());
  if (options.progress) options.progress(out.size(), bytes);
  return b.frames;
}

}  // namespace iobench
