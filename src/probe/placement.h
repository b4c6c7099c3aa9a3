// CPU placement of a side's data phase: pinning the running thread (--cpus) and recording where
// it was allowed to run and where it did run, so a figure says what placement produced it.
#pragma once

#include <sched.h>

#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace iobench {

// The CPUs this thread may run on, in the kernel's list format ("0-3,6").
std::string allowed_cpus_text();
// The CPUs a list in the kernel's format names ("0-3,6" -> 0, 1, 2, 3, 6; a trailing newline,
// as sysfs writes it, is allowed); empty for "", a malformed list or one past CPU_SETSIZE.
std::vector<int> cpu_list(std::string_view list);
// How many CPUs such a list names ("0-3,6" -> 5); 0 for "" or a malformed list.
int cpu_list_count(std::string_view list);
// Whether `cpu` is in this thread's allowed set.
bool cpu_allowed(int cpu);
// The same as an error for `who` ("process", "server"): "CPU 5 is not one this server may run
// on (allowed: 0-1)". -1 (no pinning) is always usable.
Status check_cpu_usable(int cpu, std::string_view who);
// The number of CPUs this thread may run on.
int allowed_cpu_count();

// Pins the calling thread to `cpu` (-1: leaves it as it is) and restores the previous set when
// it goes out of scope, so a pinned data phase does not confine what the thread does after it.
class ThreadPin {
 public:
  static Result<ThreadPin> pin(int cpu);
  ThreadPin(ThreadPin&& o) noexcept;
  ThreadPin& operator=(ThreadPin&&) = delete;
  ThreadPin(const ThreadPin&) = delete;
  ~ThreadPin();

 private:
  ThreadPin() = default;
  bool restore_ = false;
  cpu_set_t previous_{};
};

// The CPUs a thread was seen on, sampled (sched_getcpu) at the points the caller chooses.
class CpuSamples {
 public:
  void sample();
  std::string text() const;  // list format, "" if never sampled

 private:
  cpu_set_t seen_{};
  bool any_ = false;
};

}  // namespace iobench
