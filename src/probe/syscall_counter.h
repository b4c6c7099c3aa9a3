// Syscalls as the kernel counts them, read around a data phase, by one of three backends:
// - bpf: an eBPF program on the raw sys_enter tracepoint counting this process's syscalls per
//   number (probe/bpf_counter.h) — a few instructions per syscall, plus the traced entry path;
// - perf_event tracepoints: raw_syscalls:sys_enter for the total and syscalls:sys_enter_<name>
//   per type, enabled only around the data phase — a trace record per event;
// - task I/O accounting (probe/task_io_counter.h): the read- and write-family counts the kernel
//   keeps anyway — free, but blind to every other syscall.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "probe/syscall_source.h"
#include "probe/task_io_counter.h"
#include "util/names.h"

namespace iobench {

struct KernelSyscalls {
  bool available = false;
  SyscallSource source = SyscallSource::kCounted;          // the kernel counter that counted
  std::string reason;                                     // why not, when unavailable
  uint64_t total = 0;                                     // every sys_enter
  std::vector<std::pair<std::string, uint64_t>> by_name;  // non-zero counts only
  std::vector<std::string> missing;  // names this kernel has no tracepoint (or number) for
  std::string fallback;              // why not bpf, when auto fell back to perf tracepoints
  std::string coverage;              // what the source cannot see, when not every syscall
};

// The syscalls counted by type; others still count in the total.
const std::vector<std::string>& counted_syscall_names();

// tracefs with syscall events: $IOBENCH_TRACEFS, /sys/kernel/tracing, /sys/kernel/debug/tracing.
// Empty when none has them.
std::string find_tracefs();

// Closing a tracepoint counter makes the kernel unregister the probe and wait (~35 ms each here,
// serialized under a kernel mutex), so counters are opened once per process and reused by every
// session: see process_syscall_counter().
class BpfSyscallCounter;

// kAuto: bpf where the kernel allows it (of the two that see every syscall it costs least), else
// perf tracepoints. kTaskIo only when asked for: it sees reads and writes only.
enum class CounterKind { kAuto, kBpf, kTracepoints, kTaskIo };
template <>
struct Names<CounterKind> {
  static constexpr std::array table{
      std::pair{CounterKind::kAuto, std::string_view{"auto"}},
      std::pair{CounterKind::kBpf, std::string_view{"bpf"}},
      std::pair{CounterKind::kTracepoints, std::string_view{"tracepoints"}},
      std::pair{CounterKind::kTaskIo, std::string_view{"taskio"}}};
};

// As --syscalls and the server's --kernel-counter spell them.
inline std::optional<CounterKind> counter_kind_from(const std::string& name) {
  return parse_name<CounterKind>(name);
}

class SyscallCounter {
 public:
  // Opens disabled counters. Never fails: when the kernel refuses, available() is false and
  // reason() says why (for kAuto, why neither backend). `tracefs` empty: find_tracefs().
  explicit SyscallCounter(CounterKind kind, std::string tracefs = {});
  ~SyscallCounter();
  SyscallCounter(const SyscallCounter&) = delete;
  SyscallCounter& operator=(const SyscallCounter&) = delete;

  bool available() const { return bpf_ || task_io_ || leader_ >= 0; }
  const std::string& reason() const { return reason_; }
  // The kernel counter in use (kCounted when unavailable).
  SyscallSource source() const;
  // Why bpf was not used, when kAuto fell back to tracepoints.
  const std::string& bpf_refusal() const { return bpf_refusal_; }
  // Before the timed window: attaches the bpf program (up to ~20 ms). start() arms too if nobody
  // did. Others: nothing to do.
  void arm();
  // perf: one ioctl each, reset+enable and disable, then one read() of the group. bpf: a
  // snapshot of the slots at start() and stop(), one bpf() call per slot. task_io: one pread each.
  void start();
  KernelSyscalls stop();
  // After the timed window: detaches the bpf program — while any program or perf counter sits on
  // sys_enter, every syscall of the machine takes the traced entry path. Perf tracepoints stay
  // open (see disarm's comment), so they tax the machine for as long as the process lives.
  void disarm();
  // A bpf program is on sys_enter for this counter.
  bool armed() const;

 private:
  void open_tracepoints(std::string tracefs);
  void open_bpf();
  KernelSyscalls stop_bpf();
  KernelSyscalls stop_task_io();
  std::unique_ptr<BpfSyscallCounter> bpf_;
  std::string arm_error_;  // the bpf attachment refused at arm()
  std::unique_ptr<TaskIoCounter> task_io_;
  Result<TaskIoCounter::Reading> task_io_start_;         // read at start()
  std::vector<std::pair<std::string, long>> bpf_slots_;  // counted name, syscall number
  std::string bpf_refusal_;
  int leader_ = -1;
  std::vector<int> members_;
  std::vector<std::string> names_;  // of members_, in group order
  std::vector<std::string> missing_;
  std::vector<uint64_t> baseline_;  // group read at start(), in stop()'s layout
  std::string reason_;
};

// A data phase's kernel counts as a result's `syscalls` block (SideResult's or GroupResult's).
inline void take_kernel_counts(KernelSyscalls k, SyscallCounts& r) {
  if (!k.available) {
    r.note = "kernel counters unavailable: " + k.reason;
    return;
  }
  r.source = k.source;
  r.total = k.total;
  r.by_name = std::move(k.by_name);
  std::string note = k.fallback;
  if (!k.coverage.empty()) note += (note.empty() ? "" : "; ") + k.coverage;
  if (!k.missing.empty()) {
    note += note.empty() ? "" : "; ";
    note += "not counted by type here: ";
    for (size_t i = 0; i < k.missing.size(); ++i) note += (i ? ", " : "") + k.missing[i];
  }
  r.note = note;
}

// The process's counter, opened on first use and kept until exit, of the kind set before (default
// kAuto). perf counts the thread that opened it and every thread created after (inherit), so open
// it on the main thread first; bpf counts every thread of the process.
void set_process_counter_kind(CounterKind kind);
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
