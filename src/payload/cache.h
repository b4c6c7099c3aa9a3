// The payload cache's bound: files are marked when used, and the least recently used are removed
// once the directory holds more than --cache-max. Listing and clearing for `iobench payload`.
#pragma once

#include <cstdint>
#include <string>
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

// The directory a spec's cache lives in ($XDG_CACHE_HOME/iobench, ~/.cache/iobench, ...).
std::string cache_directory(const std::string& configured);

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
