#include "payload/cache.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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
  return "/tmp/iobench-cache";
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
