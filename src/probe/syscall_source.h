// Who counted a data phase's syscalls: one of the kernel's counters, or iobench itself (the
// Stream's own read/write counts, when no kernel counter ran).
#pragma once

#include "util/names.h"

namespace iobench {

enum class SyscallSource { kCounted, kBpf, kPerfEvent, kTaskIo };

template <>
struct Names<SyscallSource> {
  static constexpr std::array table{
      std::pair{SyscallSource::kCounted, std::string_view{"counted"}},
      std::pair{SyscallSource::kBpf, std::string_view{"bpf"}},
      std::pair{SyscallSource::kPerfEvent, std::string_view{"perf_event"}},
      std::pair{SyscallSource::kTaskIo, std::string_view{"task_io"}}};
};

inline bool kernel_counted(SyscallSource s) { return s != SyscallSource::kCounted; }

}  // namespace iobench
