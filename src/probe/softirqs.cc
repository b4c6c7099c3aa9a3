#include "probe/softirqs.h"

#include <fmt/format.h>

#include <fstream>
#include <numeric>
#include <sstream>

namespace iobench {

SoftirqCounts read_softirqs() {
  SoftirqCounts out;
  std::ifstream in("/proc/softirqs");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string name;
    words >> name;
    std::vector<uint64_t>* row = name == "NET_RX:"   ? &out.net_rx
                                 : name == "NET_TX:" ? &out.net_tx
                                                     : nullptr;
    if (!row) continue;
    for (uint64_t v = 0; words >> v;) row->push_back(v);
  }
  if (out.net_rx.size() != out.net_tx.size()) return {};
  return out;
}

void add_softirqs(SoftirqCounts& sum, const SoftirqCounts& more) {
  if (more.empty()) return;
  if (sum.empty()) {
    sum.net_rx.assign(more.net_rx.size(), 0);
    sum.net_tx.assign(more.net_tx.size(), 0);
  }
  for (size_t i = 0; i < sum.net_rx.size() && i < more.net_rx.size(); ++i) {
    sum.net_rx[i] += more.net_rx[i];
    sum.net_tx[i] += more.net_tx[i];
  }
}

SoftirqCounts softirq_delta(const SoftirqCounts& before, const SoftirqCounts& after) {
  if (before.empty() || before.net_rx.size() != after.net_rx.size()) return {};
  SoftirqCounts d;
  for (size_t i = 0; i < after.net_rx.size(); ++i) {
    d.net_rx.push_back(after.net_rx[i] - before.net_rx[i]);
    d.net_tx.push_back(after.net_tx[i] - before.net_tx[i]);
  }
  return d;
}

std::string softirq_shares(const std::vector<uint64_t>& per_cpu) {
  const uint64_t total = std::accumulate(per_cpu.begin(), per_cpu.end(), uint64_t{0});
  if (total == 0) return {};
  std::string out;
  for (size_t cpu = 0; cpu < per_cpu.size(); ++cpu) {
    if (per_cpu[cpu] == 0) continue;
    out += fmt::format("{}CPU{} {:.0f}%", out.empty() ? "" : ", ", cpu,
                       100.0 * static_cast<double>(per_cpu[cpu]) / static_cast<double>(total));
  }
  return out + fmt::format(" of {}", total);
}

}  // namespace iobench
