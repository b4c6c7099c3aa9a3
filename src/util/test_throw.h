// Fault injection for the tests: IOBENCH_TEST_THROW=SITE[,SITE...] makes the named places throw
// once each, as a failed allocation or thread start would, so a test can check that the server contains
// each (its session ends, the server serves the next client). Off (one getenv, once) otherwise.
// The sites: payload-helper (a payload build's compressing thread: bad_alloc), payload-thread
// (starting that thread: system_error), deadline-watch (starting --min-rate's watchdog:
// system_error), ring-alloc (an io_uring receiver's provided ring: bad_alloc), handler (a
// session's handler once the client is admitted: bad_alloc).
#pragma once

#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <string_view>
#include <system_error>

namespace iobench {

// True the first time `site` is reached when IOBENCH_TEST_THROW names it (each site fires once
// per process, so a test sees the failing session and then the next one served).
inline bool test_throw_armed(std::string_view site) {
  static const std::string sites = [] {
    const char* env = std::getenv("IOBENCH_TEST_THROW");
    return env ? "," + std::string(env) + "," : std::string();
  }();
  if (sites.empty() || sites.find("," + std::string(site) + ",") == std::string::npos)
    return false;
  static std::mutex mu;
  static std::set<std::string, std::less<>> fired;
  std::lock_guard lock(mu);
  return fired.emplace(site).second;
}

// Throws std::bad_alloc at `site` when armed.
inline void test_throw_bad_alloc(std::string_view site) {
  if (test_throw_armed(site)) throw std::bad_alloc();
}

// Throws what std::thread's constructor throws when no thread can start, at `site` when armed.
inline void test_throw_no_thread(std::string_view site) {
  if (test_throw_armed(site))
    throw std::system_error(EAGAIN, std::generic_category(), "test: no thread");
}

}  // namespace iobench
