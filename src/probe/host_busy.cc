#include "probe/host_busy.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "probe/placement.h"
#include "probe/probe.h"

namespace iobench {
namespace {

// The whole text of a small /proc or /sys file ("" when it cannot be read).
std::string read_small(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char buf[8192];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// Every cpuidle state's residency file of the online CPUs, found once (empty: no cpuidle).
const std::vector<std::string>& cpuidle_files(uint32_t& cpus) {
  static uint32_t found_cpus = 0;
  static const std::vector<std::string> files = [] {
    std::vector<std::string> out;
    for (int c : cpu_list(read_small("/sys/devices/system/cpu/online"))) {
      const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/cpuidle/";
      size_t before = out.size();
      for (int s = 0; s < 16; ++s) {
        std::string path = dir + "state" + std::to_string(s) + "/time";
        if (::access(path.c_str(), R_OK) != 0) break;
        out.push_back(std::move(path));
      }
      if (out.size() == before) return std::vector<std::string>{};  // a CPU without: none
      ++found_cpus;
    }
    return out;
  }();
  cpus = found_cpus;
  return files;
}

int64_t parse_i64(std::string_view text) {
  int64_t v = 0;
  std::from_chars(text.data(), text.data() + text.size(), v);
  return v;
}

// Set to "proc_stat" by tests: the /proc/stat source as on a host without cpuidle (most VMs).
bool proc_stat_forced() {
  const char* env = std::getenv("IOBENCH_TEST_HOST_IDLE");
  return env && std::string_view(env) == "proc_stat";
}

}  // namespace

HostIdleSample proc_stat_idle(std::string_view text, int64_t ns_per_tick) {
  HostIdleSample s;
  size_t line = 0;
  while (line < text.size()) {
    size_t end = text.find('\n', line);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view l = text.substr(line, end - line);
    line = end + 1;
    if (l.size() < 4 || !l.starts_with("cpu") || l[3] == ' ') continue;  // "cpuN" lines only
    size_t pos = l.find(' ');
    int64_t fields[5] = {};
    for (int64_t& f : fields) {
      pos = l.find_first_not_of(' ', pos);
      if (pos == std::string_view::npos) break;
      const size_t stop = std::min(l.find(' ', pos), l.size());
      f = parse_i64(l.substr(pos, stop - pos));
      pos = stop;
    }
    s.idle_ns += (fields[3] + fields[4]) * ns_per_tick;
    ++s.cpus;
  }
  if (s.cpus > 0) s.source = HostBusySource::kProcStat;
  return s;
}

HostIdleSample host_idle_now() {
  uint32_t cpus = 0;
  const auto& files = cpuidle_files(cpus);
  HostIdleSample s;
  if (files.empty() || proc_stat_forced()) {
    const int64_t ns_per_tick = 1'000'000'000 / std::max<long>(sysconf(_SC_CLK_TCK), 1);
    s = proc_stat_idle(read_small("/proc/stat"), ns_per_tick);
  } else {
    for (const std::string& f : files) s.idle_ns += parse_i64(read_small(f)) * 1000;
    s.cpus = cpus;
    s.source = HostBusySource::kCpuidle;
  }
  s.wall_ns = monotonic_ns();
  return s;
}

HostBusy operator-(const HostIdleSample& end, const HostIdleSample& start) {
  HostBusy h;
  if (end.source == HostBusySource::kNone || end.source != start.source || end.cpus != start.cpus)
    return h;
  h.cpus = end.cpus;
  h.source = end.source;
  const int64_t capacity = static_cast<int64_t>(end.cpus) * (end.wall_ns - start.wall_ns);
  h.busy_ns = std::clamp<int64_t>(capacity - (end.idle_ns - start.idle_ns), 0, capacity);
  return h;
}

}  // namespace iobench
