// The environment a result was measured in: host, kernel, CPU, compiler, libraries, commit.
#include <fmt/format.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <CLI/Version.hpp>
#include <chrono>
#include <fstream>

#include "payload/payload.h"
#include "report/report.h"
#include "tls/tls.h"

namespace iobench {
namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("model name")) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

std::string read_first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line.empty() ? "unknown" : line;
}

std::string utc_now() {
  const auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

nlohmann::json collect_context() {
  utsname u{};
  uname(&u);
  nlohmann::json libs = {
      {"fmt",
       fmt::format("{}.{}.{}", FMT_VERSION / 10000, FMT_VERSION / 100 % 100, FMT_VERSION % 100)},
      {"nlohmann_json", fmt::format("{}.{}.{}", NLOHMANN_JSON_VERSION_MAJOR,
                                    NLOHMANN_JSON_VERSION_MINOR, NLOHMANN_JSON_VERSION_PATCH)},
      {"cli11", CLI11_VERSION}};
  for (const auto& [name, version] : payload_library_versions()) libs[name] = version;
  libs["openssl"] = tls::library_version();
  return {
      {"date", utc_now()},
      {"hostname", u.nodename},
      {"kernel", fmt::format("{} {}", u.sysname, u.release)},
      {"machine", u.machine},
      {"cpu_model", cpu_model()},
      {"cpus_online", sysconf(_SC_NPROCESSORS_ONLN)},
      {"clock_ticks_per_s", sysconf(_SC_CLK_TCK)},
      {"cpu_governor", read_first_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")},
      {"compiler", std::string(__VERSION__)},
      {"iobench_version", IOBENCH_VERSION},
      {"git_commit", IOBENCH_GIT_COMMIT},
      {"libraries", libs},
  };
}

}  // namespace iobench
