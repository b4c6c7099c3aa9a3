// Who counted a data phase's syscalls: one of the kernel's counters, or iobench itself (the
// Stream's own read/write counts, when no kernel counter ran); and what the kernel counted.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "util/fields.h"
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

// A data phase's (or a whole --conns run's) syscalls as the kernel counted them: each RESULT and
// GROUP carries it as its `syscalls` block.
struct SyscallCounts {
  SyscallSource source = SyscallSource::kCounted;
  std::string note;  // why not kernel counts; why not bpf; names not counted by type
  uint64_t total = 0;
  std::vector<std::pair<std::string, uint64_t>> by_name;  // non-zero
};

template <typename Self, typename Visit>
  requires DescribesAs<Self, SyscallCounts>
void describe(Self& c, Visit&& visit) {
  visit(Field{"source"}, c.source);
  visit(Field{"note"}, c.note);
  visit(Field{"total"}, c.total);
  visit(Field{"by_name"}, c.by_name);
}

}  // namespace iobench
