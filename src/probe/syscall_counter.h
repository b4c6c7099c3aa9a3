// Syscalls as the kernel counts them: perf_event tracepoint counters on the thread that runs the
// engine (the only one issuing a data phase's syscalls), raw_syscalls:sys_enter for the total and
// syscalls:sys_enter_<name> per type, enabled only around a data phase.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace iobench {

struct KernelSyscalls {
  bool available = false;
  std::string reason;                                     // why not, when unavailable
  uint64_t total = 0;                                     // raw_syscalls:sys_enter
  std::vector<std::pair<std::string, uint64_t>> by_name;  // non-zero counts only
  std::vector<std::string> missing;                       // tracepoints this kernel lacks
};

// The syscalls counted by type; others still count in the total.
const std::vector<std::string>& counted_syscall_names();

// tracefs with syscall events: $IOBENCH_TRACEFS, /sys/kernel/tracing, /sys/kernel/debug/tracing.
// Empty when none has them.
std::string find_tracefs();

// Closing a tracepoint counter makes the kernel unregister the probe and wait (~35 ms each here,
// serialized under a kernel mutex), so counters are opened once per process and reused by every
// session: see process_syscall_counter().
class SyscallCounter {
 public:
  // Opens disabled counters. Never fails: when the kernel refuses, available() is false and
  // reason() says why. `tracefs` empty: find_tracefs().
  explicit SyscallCounter(std::string tracefs = {});
  ~SyscallCounter();
  SyscallCounter(const SyscallCounter&) = delete;
  SyscallCounter& operator=(const SyscallCounter&) = delete;

  bool available() const { return leader_ >= 0; }
  const std::string& reason() const { return reason_; }
  // One ioctl each: reset+enable, disable. stop() then reads all counters in one read().
  void start();
  KernelSyscalls stop();

 private:
  int leader_ = -1;
  std::vector<int> members_;
  std::vector<std::string> names_;  // of members_, in group order
  std::vector<std::string> missing_;
  std::vector<uint64_t> baseline_;  // group read at start(), in stop()'s layout
  std::string reason_;
};

// The process's counter, opened on first use and kept until exit. It counts the thread that
// opened it and every thread created after (inherit), so open it on the main thread first.
SyscallCounter& process_syscall_counter();

// The process's counter counts every thread: a data phase may use it only while no other does
// (a server serving two clients at once). Whoever cannot take it reports engine counts only.
class CounterLease {
 public:
  static CounterLease try_take();
  CounterLease() = default;
  CounterLease(CounterLease&& o) noexcept : held_(o.held_) { o.held_ = false; }
  CounterLease& operator=(CounterLease&& o) noexcept;
  ~CounterLease();
  bool held() const { return held_; }

 private:
  bool held_ = false;
};

}  // namespace iobench
