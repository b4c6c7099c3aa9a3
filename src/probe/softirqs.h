// Where the kernel's network softirq work landed: /proc/softirqs' NET_RX and NET_TX counts per
// CPU, sampled around a run. Host-wide counters (every process's traffic), so a delta says where
// this run's receive and transmit processing ran only on a host that is otherwise quiet.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace iobench {

struct SoftirqCounts {
  std::vector<uint64_t> net_rx, net_tx;  // per CPU, as /proc/softirqs lists them
  bool empty() const { return net_rx.empty(); }
};

// Now; empty when /proc/softirqs cannot be read.
SoftirqCounts read_softirqs();
// Adds `more` into `sum` per CPU (an empty sum takes its shape); `more` empty adds nothing.
void add_softirqs(SoftirqCounts& sum, const SoftirqCounts& more);
// after - before, per CPU; empty if either is.
SoftirqCounts softirq_delta(const SoftirqCounts& before, const SoftirqCounts& after);
// "CPU0 97%, CPU1 3% of 6512": the share of each CPU with any; "" for no work.
std::string softirq_shares(const std::vector<uint64_t>& per_cpu);

}  // namespace iobench
