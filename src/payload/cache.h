// The payload cache's bound: files are marked when used, and the least recently used are removed
// once the directory holds more than --cache-max. Listing and clearing for `iobench payload`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "util/result.h"

namespace iobench {

struct CacheEntry {
  std::string path;
  uint64_t bytes = 0;
  int64_t last_used_ns = 0;  // the file's mtime, set on every use
};

// The bytes of all `entries`.
uint64_t total_bytes(const std::vector<CacheEntry>& entries);

// Where a process writes a cache file before renaming it into place ("<path>.tmp.<pid>"), so
// eviction can tell a dead writer's leftover from a live writer's file.
std::string cache_temp_path(const std::string& path);

// The directory a spec's cache lives in ($XDG_CACHE_HOME/iobench, ~/.cache/iobench, else
// /tmp/iobench-cache-UID: one per user, never one every user shares).
std::string cache_directory(const std::string& configured);

// The cache directory, created (0700) when missing, opened without following a link and
// checked: owned by this user and writable by no one else, or refused with the reason (another
// user who can write it could swap a cache file for a link). The descriptor every cache file is
// opened, created and renamed through (openat, O_NOFOLLOW), so no path is resolved twice.
Result<int> open_cache_dir(const std::string& dir);

// Writes `bytes` as `name` in the directory `dirfd`: a new temporary file (O_CREAT | O_EXCL |
// O_NOFOLLOW: a planted file or link of its name is removed, never written through), renamed
// into place (a link at `name` is replaced, its target untouched).
Status write_cache_file(int dirfd, const std::string& name, std::span<const std::byte> bytes);

// Bytes of this process's cache files being written, counted against --cache-max until their
// write ends (a reservation for each): what is on disk plus what is in flight stays inside it.
class CacheWrite {
 public:
  // Room for `bytes` beside the writes in flight, inside `max`; an empty reservation (false)
  // when they would pass it.
  static CacheWrite reserve(uint64_t bytes, uint64_t max);
  CacheWrite(CacheWrite&& o) noexcept : bytes_(std::exchange(o.bytes_, 0)) {}
  CacheWrite& operator=(CacheWrite&&) = delete;
  CacheWrite(const CacheWrite&) = delete;
  ~CacheWrite();
  explicit operator bool() const { return bytes_ != 0; }
  // Every write in flight, this one included.
  static uint64_t in_flight();

 private:
  explicit CacheWrite(uint64_t bytes) : bytes_(bytes) {}
  uint64_t bytes_ = 0;
};

// Payload files of the cache (*.zst), most recently used first. A missing directory is empty.
Result<std::vector<CacheEntry>> list_cache(const std::string& dir);

// Marks a cache file as just used (its mtime), so eviction keeps it.
void touch_cache_file(const std::string& path);

// Removes the least recently used files until the directory holds at most `max_bytes`; `keep`
// (the payload in use) is never removed. Also removes temporary files left by dead processes.
// Returns the files removed.
std::vector<CacheEntry> evict_cache(const std::string& dir, uint64_t max_bytes,
                                    const std::string& keep);

// Removes every payload file; returns them.
Result<std::vector<CacheEntry>> clear_cache(const std::string& dir);

}  // namespace iobench
