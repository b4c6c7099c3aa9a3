#include "payload/cache.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>

namespace iobench {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kTempMark = ".tmp.";

// A cache_temp_path whose writer is gone (a crash or SIGKILL mid-write).
bool orphaned_temp(const std::string& name) {
  const size_t at = name.rfind(kTempMark);
  if (at == std::string::npos) return false;
  char* end = nullptr;
  const long pid = std::strtol(name.c_str() + at + kTempMark.size(), &end, 10);
  return end && *end == '\0' && pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace

namespace {
std::atomic<uint64_t> g_writes_in_flight{0};
}  // namespace

CacheWrite CacheWrite::reserve(uint64_t bytes, uint64_t max) {
  if (bytes == 0) return CacheWrite(0);
  for (uint64_t n = g_writes_in_flight.load();;) {
    if (bytes > max || n > max - bytes) return CacheWrite(0);
    if (g_writes_in_flight.compare_exchange_weak(n, n + bytes)) return CacheWrite(bytes);
  }
}

CacheWrite::~CacheWrite() {
  if (bytes_) g_writes_in_flight -= bytes_;
}

uint64_t CacheWrite::in_flight() { return g_writes_in_flight.load(); }

uint64_t total_bytes(const std::vector<CacheEntry>& entries) {
  uint64_t total = 0;
  for (const CacheEntry& e : entries) total += e.bytes;
  return total;
}

std::string cache_temp_path(const std::string& path) {
  return fmt::format("{}{}{}", path, kTempMark, ::getpid());
}

std::string cache_directory(const std::string& configured) {
  if (!configured.empty()) return configured;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/iobench";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/iobench";
  return fmt::format("/tmp/iobench-cache-{}", ::geteuid());
}

Result<int> open_cache_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(dir, ec))) {
    fs::create_directories(fs::path(dir).parent_path(), ec);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return fail(fmt::format("cannot create the payload cache '{}': {}", dir, std::strerror(errno)));
  }
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return fail(fmt::format("cannot open the payload cache '{}': {}", dir,
                            errno == ELOOP || errno == ENOTDIR ? "not a directory (a link?)"
                                                               : std::strerror(errno)));
  struct stat st {};
  std::string why;
  if (::fstat(fd, &st) != 0)
    why = std::strerror(errno);
  else if (st.st_uid != ::geteuid())
    why = fmt::format("it is owned by uid {}, not this process's {}", st.st_uid, ::geteuid());
  else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    why = fmt::format("its mode {:o} lets others write it", st.st_mode & 07777);
  if (why.empty()) return fd;
  ::close(fd);
  return fail(fmt::format("payload cache '{}' refused: {} (another user could swap its files; "
                          "--cache-dir a directory of your own)",
                          dir, why));
}

Status write_cache_file(int dirfd, const std::string& name, std::span<const std::byte> bytes) {
  const std::string tmp = cache_temp_path(name);
  int fd = -1;
  for (int attempt = 0; attempt < 2 && fd < 0; ++attempt) {
    fd = ::openat(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    // Ours from an earlier life of this pid, or planted: removed (the link itself), once.
    if (fd < 0 && errno == EEXIST && attempt == 0) (void)::unlinkat(dirfd, tmp.c_str(), 0);
  }
  if (fd < 0) return fail(fmt::format("cache file '{}': {}", tmp, std::strerror(errno)));
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (n <= 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  const bool written = off == bytes.size() && ::close(fd) == 0;
  if (!written || ::renameat(dirfd, tmp.c_str(), dirfd, name.c_str()) != 0) {
    const int err = errno;
    if (off != bytes.size()) ::close(fd);
    (void)::unlinkat(dirfd, tmp.c_str(), 0);
    return fail(fmt::format("cache file '{}': {}", name, std::strerror(err)));
  }
  return {};
}

Result<std::vector<CacheEntry>> list_cache(const std::string& dir) {
  std::vector<CacheEntry> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec == std::errc::no_such_file_or_directory) return out;
  if (ec) return fail(fmt::format("cannot read the payload cache '{}': {}", dir, ec.message()));
  for (const fs::directory_entry& e : it) {
    if (e.path().extension() != ".zst") continue;
    struct stat st {};
    if (::stat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    out.push_back({e.path().string(), static_cast<uint64_t>(st.st_size),
                   st.st_mtim.tv_sec * 1'000'000'000 + st.st_mtim.tv_nsec});
  }
  std::sort(out.begin(), out.end(), [](const CacheEntry& a, const CacheEntry& b) {
    return a.last_used_ns != b.last_used_ns ? a.last_used_ns > b.last_used_ns : a.path < b.path;
  });
  return out;
}

void touch_cache_file(const std::string& path) {
  // mtime, not atime: relatime and noatime mounts do not keep atime current.
  const timespec now[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
  (void)utimensat(AT_FDCWD, path.c_str(), now, 0);
}

std::vector<CacheEntry> evict_cache(const std::string& dir, uint64_t max_bytes,
                                    const std::string& keep) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec))
    if (orphaned_temp(e.path().filename().string())) fs::remove(e.path(), ec);
  std::vector<CacheEntry> removed;
  auto entries = list_cache(dir);
  if (!entries) return removed;
  uint64_t total = total_bytes(*entries);
  // Oldest first, from the back of the most-recent-first list.
  for (auto it = entries->rbegin(); it != entries->rend() && total > max_bytes; ++it) {
    if (it->path == keep) continue;
    if (fs::remove(it->path, ec)) {
      total -= it->bytes;
      removed.push_back(*it);
    }
  }
  return removed;
}

Result<std::vector<CacheEntry>> clear_cache(const std::string& dir) {
  auto entries = list_cache(dir);
  if (!entries) return entries;
  std::vector<CacheEntry> removed;
  for (const CacheEntry& e : *entries) {
    std::error_code ec;
    if (!fs::remove(e.path, ec) && ec)
      return fail(fmt::format("cannot remove '{}': {}", e.path, ec.message()));
    removed.push_back(e);
  }
  return removed;
}

}  // namespace iobench
