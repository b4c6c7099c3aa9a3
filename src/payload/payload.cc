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

#include "payload/frames.h"
#include "payload/cache.h"
#include "payload/resp_generator.h"
#include "payload/xxh3_fast.h"

namespace iobench {
namespace {

Result<std::string> read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(fmt::format("cannot read --payload '{}': {}", path, std::strerror(errno)));
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return fail(fmt::format("cannot read --payload '{}'", path));
  if (content.empty()) return fail(fmt::format("--payload '{}' is empty", path));
  return content;
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

Result<Payload> build_payload(const PayloadSpec& spec, const BuildOptions& options) {
  std::unique_ptr<RawSource> source;
  if (spec.file.empty()) {
    source = std::make_unique<GeneratedSource>(spec.seed);
  } else {
    auto content = read_whole_file(spec.file);
    if (!content) return std::unexpected(content.error());
    source = std::make_unique<FileSource>(std::move(*content));
  }
  Payload p;
  auto frames = fill_frames(*source, spec.zstd_level, spec.bytes, p.data, options);
  if (!frames) return std::unexpected(frames.error());
  p.source = describe_payload(spec);
  if (auto s = finish(p); !s) return std::unexpected(s.error());
  return p;
}

Result<std::string> payload_cache_path(const PayloadSpec& spec) {
  const std::string dir = cache_directory(spec.cache_dir);
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

// Maps an exact-size cache file (opened in the checked directory, never through a link) with
// its pages populated up front, so no page fault lands in the data phase; anything else
// (missing, wrong size, a link) returns nullopt and is rebuilt.
std::optional<MappedFile> map_cache_file(int dirfd, const std::string& name, uint64_t bytes) {
  const int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  void* addr = MAP_FAILED;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) == bytes)
    addr = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (addr == MAP_FAILED) return std::nullopt;
  return MappedFile(addr, bytes);
}

bool payload_cached(const PayloadSpec& spec) {
  auto path = payload_cache_path(spec);
  struct stat st {};
  return path && ::stat(path->c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) == spec.bytes;
}

namespace {

struct DirFd {
  int fd;
  ~DirFd() { ::close(fd); }
};

// The cached payload under `dir`'s descriptor, if a valid one is there.
std::optional<Payload> map_cached(int dirfd, const PayloadSpec& spec, const std::string& path) {
  const std::string name = std::filesystem::path(path).filename().string();
  auto mapped = map_cache_file(dirfd, name, spec.bytes);
  if (!mapped) return std::nullopt;
  Payload p;
  p.mapped = std::move(*mapped);
  p.cache_path = path;
  p.from_cache = true;
  p.source = describe_payload(spec);
  if (!finish(p)) return std::nullopt;
  touch_cache_file(path);
  return p;
}

}  // namespace

std::optional<Payload> load_cached_payload(const PayloadSpec& spec) {
  auto path = payload_cache_path(spec);
  if (!path) return std::nullopt;
  auto dirfd = open_cache_dir(cache_directory(spec.cache_dir));
  if (!dirfd) return std::nullopt;
  const DirFd held{*dirfd};
  return map_cached(held.fd, spec, *path);
}

Result<Payload> load_payload(const PayloadSpec& spec, const BuildOptions& options) {
  auto path = payload_cache_path(spec);
  if (!path) return std::unexpected(path.error());
  const std::string dir = cache_directory(spec.cache_dir);
  const std::string name = std::filesystem::path(*path).filename().string();
  auto dirfd = open_cache_dir(dir);
  if (!dirfd) return std::unexpected(dirfd.error());
  const DirFd held{*dirfd};
  if (auto cached = map_cached(held.fd, spec, *path)) return std::move(*cached);
  auto built = build_payload(spec, options);
  if (!built) return built;
  if (spec.bytes > spec.cache_max) return built;  // never cached: above the cache's bound
  // The files being written count in --cache-max beside the files written: room is made for
  // all of them before this one is, and a payload that cannot have room beside the others in
  // flight is not cached (before, eight builds' temporary files stood 7.9 GiB on disk against
  // 6 GiB).
  const CacheWrite room = CacheWrite::reserve(spec.bytes, spec.cache_max);
  if (!room) return built;
  evict_cache(dir, spec.cache_max - CacheWrite::in_flight(), *path);
  built->cache_path = *path;
  // Written then renamed, so a concurrent reader never sees a half-written payload; an
  // unwritable cache (a full disk: ENOSPC) costs time, not correctness, and leaves no
  // temporary file.
  if (write_cache_file(held.fd, name, built->data)) evict_cache(dir, spec.cache_max, *path);
  return built;
}

uint64_t prefix_xxh3(const Payload& p, uint64_t n) {
  const auto b = p.bytes();
  if (n >= b.size()) return p.xxh3;
  return xxh3_oneshot(b.data(), static_cast<size_t>(n));
}

}  // namespace iobench
