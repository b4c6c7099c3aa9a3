// Syscalls counted by a tiny eBPF program on the raw `sys_enter` tracepoint: one per-CPU slot
// per syscall number and one for the total, incremented for this process only (its tgid). A raw
// tracepoint program costs the kernel a few instructions per syscall, where a perf tracepoint
// counter builds and submits a trace record per event (see the README's measurements). Needs
// root or CAP_BPF + CAP_PERFMON.
//
// Attached only while counting: any program on sys_enter sends every syscall of the machine,
// whoever makes it, through the kernel's traced entry path (~80 ns here, program or not), so an
// idle server must not keep one attached.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "util/result.h"

namespace iobench {

class BpfSyscallCounter {
 public:
  // Loads the program counting `tgid`'s syscalls and tries an attachment (then detaches); the
  // error names the refusal.
  static Result<std::unique_ptr<BpfSyscallCounter>> open(pid_t tgid);
  ~BpfSyscallCounter();
  BpfSyscallCounter(const BpfSyscallCounter&) = delete;
  BpfSyscallCounter& operator=(const BpfSyscallCounter&) = delete;

  // Counts so far (summed over CPUs) of syscall `nr`, or of all syscalls for kTotal.
  static constexpr uint32_t kTotal = 511;  // numbers at or above it count in the total only
  uint64_t read(uint32_t slot) const;
  // Counting happens only between these. attach() right after a detach waits ~10-20 ms for the
  // kernel to finish releasing the previous attachment: call it outside any timed window.
  Status attach();
  void detach();
  bool attached() const { return link_ >= 0; }

 private:
  BpfSyscallCounter() = default;
  int map_ = -1, prog_ = -1, link_ = -1;
  size_t cpus_ = 1;  // possible CPUs: a per-CPU lookup returns one value for each
};

// The syscall number of `name` on this architecture, or -1 where it has none (e.g. poll and
// epoll_wait on arm64).
long syscall_number(const std::string& name);

}  // namespace iobench
