// The environment a result was measured in: host, kernel, CPU, compiler, libraries, commit.
#include <fmt/format.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <CLI/Version.hpp>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

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

// The first processor's "key : value" lines of /proc/cpuinfo.
std::map<std::string, std::string> cpuinfo_fields() {
  std::ifstream in("/proc/cpuinfo");
  std::map<std::string, std::string> out;
  for (std::string line; std::getline(in, line) && !line.empty();) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const auto key_end = line.find_last_not_of(" \t", colon - 1);
    const auto value_at = line.find_first_not_of(' ', colon + 1);
    out[line.substr(0, key_end + 1)] = value_at == std::string::npos ? "" : line.substr(value_at);
  }
  return out;
}

// The hypervisor's vendor signature (CPUID leaf 0x40000000: "KVMKVMKVM", "Microsoft Hv",
// "VMwareVMware", "XenVMMXenVMM"), "none" on bare metal, "unknown" off x86.
std::string hypervisor_vendor() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 31))) return "none";
  __cpuid(0x40000000, a, b, c, d);
  char sig[13] = {};
  std::memcpy(sig, &b, 4);
  std::memcpy(sig + 4, &c, 4);
  std::memcpy(sig + 8, &d, 4);
  std::string out(sig);
  while (!out.empty() && (out.back() == ' ' || out.back() == '\0')) out.pop_back();
  return out.empty() ? "unknown" : out;
#else
  return "unknown";
#endif
}

// cpu0's caches, as sysfs lists them: "L1d 48K", "L1i 64K", "L2 2048K", "L3 491520K".
nlohmann::json cpu_caches() {
  nlohmann::json out = nlohmann::json::object();
  for (int i = 0; i < 8; ++i) {
    const std::string dir = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", i);
    std::ifstream level(dir + "level"), type(dir + "type"), size(dir + "size");
    std::string l, t, z;
    if (!std::getline(level, l) || !std::getline(type, t) || !std::getline(size, z)) break;
    std::string name = "L";
    name += l;
    name += t == "Data" ? "d" : t == "Instruction" ? "i" : "";
    out[name] = z;
  }
  return out;
}

// What the CPU is beyond its model name, which a VM often makes generic ("Intel(R) Xeon(R)
// Processor", "AMD EPYC"): vendor, family, model and stepping (CPUID's, as the kernel decoded
// them), microcode, caches, the hypervisor's vendor.
nlohmann::json cpu_identity() {
  auto f = cpuinfo_fields();
  auto get = [&](const char* key) { return f.contains(key) ? f[key] : std::string("unknown"); };
  return {{"vendor", get("vendor_id")},     {"family", get("cpu family")},
          {"model", get("model")},          {"stepping", get("stepping")},
          {"microcode", get("microcode")},  {"caches", cpu_caches()},
          {"hypervisor", hypervisor_vendor()}};
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
      {"cpu", cpu_identity()},
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
