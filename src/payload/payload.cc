#include "payload/payload.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "payload/resp_generator.h"
#include "payload/xxh3_fast.h"

namespace iobench {
namespace {

constexpr uint32_t kSkippableMagic = 0x184D2A50;
constexpr size_t kSkippableHeader = 8;
constexpr size_t kRawChunk = 1 << 20;  // 1 MiB of commands per zstd frame
constexpr size_t kMinRawChunk = 256;

// Where raw (uncompressed) bytes come from: the RESP generator or a user's file, cycled.
class RawSource {
 public:
  virtual ~RawSource() = default;
  virtual Status append(std::string& out, size_t n) = 0;
};

class GeneratedSource : public RawSource {
 public:
  explicit GeneratedSource(uint64_t seed) : gen_(seed) {}
  Status append(std::string& out, size_t n) override {
    gen_.append(out, n);
    return {};
  }

 private:
  RespGenerator gen_;
};

class FileSource : public RawSource {
 public:
  explicit FileSource(std::string content) : content_(std::move(content)) {}
  Status append(std::string& out, size_t n) override {
    while (n > 0) {
      size_t take = std::min(n, content_.size() - pos_);
      out.append(content_, pos_, take);
      pos_ = (pos_ + take) % content_.size();
      n -= take;
    }
    return {};
  }

 private:
  std::string content_;
  size_t pos_ = 0;
};

struct CCtxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};

void put_le32(std::byte* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}

Result<std::string> read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(fmt::format("cannot read --payload '{}': {}", path, std::strerror(errno)));
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return fail(fmt::format("cannot read --payload '{}'", path));
  if (content.empty()) return fail(fmt::format("--payload '{}' is empty", path));
  return content;
}

// Fills `out` with whole zstd frames of `source`, then one skippable frame for the rest, so the
// size is exact and a decoder accepts every byte. One compression context is reused throughout.
Result<uint64_t> fill_frames(RawSource& source, int level, uint64_t bytes,
                             std::vector<std::byte>& out) {
  std::unique_ptr<ZSTD_CCtx, CCtxDeleter> cctx(ZSTD_createCCtx());
  if (!cctx) return fail("zstd: cannot create a compression context");
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_contentSizeFlag, 1);
  out.clear();
  out.reserve(bytes);
  std::string raw;
  std::vector<std::byte> frame;
  size_t chunk = kRawChunk;
  uint64_t frames = 0;
  while (out.size() < bytes) {
    const uint64_t remaining = bytes - out.size();
    raw.clear();
    if (auto s = source.append(raw, chunk); !s) return std::unexpected(s.error());
    frame.resize(ZSTD_compressBound(raw.size()));
    size_t n = ZSTD_compress2(cctx.get(), frame.data(), frame.size(), raw.data(), raw.size());
    if (ZSTD_isError(n)) return fail(fmt::format("zstd: {}", ZSTD_getErrorName(n)));
    // A frame fits when it fills the rest exactly or leaves room for the padding header.
    if (n == remaining || n + kSkippableHeader <= remaining) {
      out.insert(out.end(), frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(n));
      ++frames;
      continue;
    }
    if (chunk > kMinRawChunk && remaining >= kSkippableHeader + 16) {
      chunk = std::max(kMinRawChunk, chunk / 2);
      continue;
    }
    // Pad: a skippable frame (magic, 32-bit length, zero bytes) that decoders step over.
    if (remaining < kSkippableHeader) return fail("payload: internal padding error");
    const size_t at = out.size();
    out.resize(bytes);
    put_le32(out.data() + at, kSkippableMagic);
    put_le32(out.data() + at + 4, static_cast<uint32_t>(remaining - kSkippableHeader));
  }
  return frames;
}

std::string default_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/iobench";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/iobench";
  return "/tmp/iobench-cache";
}

Status finish(Payload& p) {
  p.xxh3 = checksum(p.bytes());
  // Walk the frames: each data frame records its content size; skippable frames decode to 0.
  uint64_t decoded = 0;
  std::span<const std::byte> rest = p.bytes();
  while (!rest.empty()) {
    const size_t frame = ZSTD_findFrameCompressedSize(rest.data(), rest.size());
    const unsigned long long size = ZSTD_getFrameContentSize(rest.data(), rest.size());
    if (ZSTD_isError(frame) || size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN)
      return fail(fmt::format("payload '{}' is not a valid zstd stream at offset {}", p.cache_path,
                              p.bytes().size() - rest.size()));
    decoded += size;
    rest = rest.subspan(frame);
  }
  p.decoded_bytes = decoded;
  return {};
}

}  // namespace

std::string describe_payload(const PayloadSpec& spec) {
  if (spec.file.empty())
    return fmt::format("resp-v{} seed={} level={}", kGeneratorVersion, spec.seed, spec.zstd_level);
  return fmt::format("file:{} level={}", spec.file, spec.zstd_level);
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : addr_(std::exchange(o.addr_, nullptr)), size_(std::exchange(o.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (addr_) ::munmap(addr_, size_);
    addr_ = std::exchange(o.addr_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (addr_) ::munmap(addr_, size_);
}

uint64_t checksum(std::span<const std::byte> data) {
  return xxh3_oneshot(data.data(), data.size());
}

std::vector<std::pair<std::string, std::string>> payload_library_versions() {
  const unsigned x = XXH_versionNumber();
  return {{"zstd", ZSTD_versionString()},
          {"xxhash", fmt::format("{}.{}.{}", x / 10000, x / 100 % 100, x % 100)}};
}

Result<Payload> build_payload(const PayloadSpec& spec) {
  std::unique_ptr<RawSource> source;
  if (spec.file.empty()) {
    source = std::make_unique<GeneratedSource>(spec.seed);
  } else {
    auto content = read_whole_file(spec.file);
    if (!content) return std::unexpected(content.error());
    source = std::make_unique<FileSource>(std::move(*content));
  }
  Payload p;
  auto frames = fill_frames(*source, spec.zstd_level, spec.bytes, p.data);
  if (!frames) return std::unexpected(frames.error());
  p.source = describe_payload(spec);
  if (auto s = finish(p); !s) return std::unexpected(s.error());
  return p;
}

Result<std::string> payload_cache_path(const PayloadSpec& spec) {
  const std::string dir = spec.cache_dir.empty() ? default_cache_dir() : spec.cache_dir;
  if (spec.file.empty())
    return fmt::format("{}/resp-v{}-seed{}-l{}-{}.zst", dir, kGeneratorVersion, spec.seed,
                       spec.zstd_level, spec.bytes);
  // A user's file is keyed by its identity and modification time, so an edited file is redone.
  struct stat st {};
  if (::stat(spec.file.c_str(), &st) != 0)
    return fail(fmt::format("cannot read --payload '{}': {}", spec.file, std::strerror(errno)));
  std::error_code ec;
  const std::string abs = std::filesystem::absolute(spec.file, ec).string();
  const uint64_t id = XXH3_64bits(abs.data(), abs.size()) ^ static_cast<uint64_t>(st.st_size) ^
                      (static_cast<uint64_t>(st.st_mtim.tv_sec) << 20) ^
                      static_cast<uint64_t>(st.st_mtim.tv_nsec);
  return fmt::format("{}/file-{:016x}-l{}-{}.zst", dir, id, spec.zstd_level, spec.bytes);
}

// Maps an exact-size cache file with its pages populated up front, so no page fault lands in
// the data phase; anything else (missing, wrong size) returns nullopt and is rebuilt.
std::optional<MappedFile> map_cache_file(const std::string& path, uint64_t bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  void* addr = MAP_FAILED;
  if (::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) == bytes)
    addr = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (addr == MAP_FAILED) return std::nullopt;
  return MappedFile(addr, bytes);
}

Result<Payload> load_payload(const PayloadSpec& spec) {
  auto path = payload_cache_path(spec);
  if (!path) return std::unexpected(path.error());
  if (auto mapped = map_cache_file(*path, spec.bytes)) {
    Payload p;
    p.mapped = std::move(*mapped);
    p.cache_path = *path;
    p.from_cache = true;
    p.source = describe_payload(spec);
    if (finish(p)) return p;
  }
  auto built = build_payload(spec);
  if (!built) return built;
  built->cache_path = *path;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(*path).parent_path(), ec);
  // Write then rename, so a concurrent reader never sees a half-written payload.
  const std::string tmp = fmt::format("{}.tmp.{}", *path, ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(built->data.data()),
              static_cast<std::streamsize>(built->data.size()));
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return built;  // an unwritable cache costs time, not correctness
    }
  }
  std::filesystem::rename(tmp, *path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
  return built;
}

uint64_t prefix_xxh3(const Payload& p, uint64_t n) {
  const auto b = p.bytes();
  if (n >= b.size()) return p.xxh3;
  return xxh3_oneshot(b.data(), static_cast<size_t>(n));
}

}  // namespace iobench
