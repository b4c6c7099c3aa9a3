// The event loop's programs (`iobench watch --event-loop`, bpf_loop_programs.cc) and what the
// loader (bpf_watch.cc) shares with them: the histogram map's layout and the calls followed.
#pragma once

#include <linux/bpf.h>

#include <cstdint>
#include <vector>

namespace iobench::watch_bpf {

// The histogram map: a per-CPU array, one value per class of kLoopSlots u64: counts at
// HdrHistogram's indices (util/histogram.h) below kLoopSumSlot, then the sum and the maximum of
// the values recorded, in ns.
enum class LoopClass : uint32_t {
  kIterations = 0,            // an event-loop iteration that made no large write
  kIterationsWithLarge = 1,   // an iteration that made one or more
  kLargeWritesInLoop = 2,     // a large write's own duration, on a thread that waits on epoll
  kLargeWritesElsewhere = 3,  // on a thread that never did while watched (a fork child)
};
inline constexpr uint32_t kLoopClasses = 4;
inline constexpr uint32_t kLoopSlots = 4096;  // 32 KiB: a per-CPU value's largest size
inline constexpr uint32_t kLoopSumSlot = kLoopSlots - 2, kLoopMaxSlot = kLoopSlots - 1;

struct LoopMaps {
  int watched, loop, hist;  // watched: the watch's own (tgid -> root); loop: tid -> state
};

// The syscall numbers that start a wait (epoll_wait, epoll_pwait, epoll_pwait2) and the writes
// timed (write, writev, sendto, sendmsg) on this architecture.
struct LoopCalls {
  std::vector<long> waits, writes;
};

// sys_enter: a wait ends the thread's iteration (recorded); a write notes its start.
std::vector<bpf_insn> loop_enter_program(const LoopMaps& m, const LoopCalls& calls);
// sys_exit: a wait's return starts an iteration; a write that moved at least `large_write`
// bytes is recorded and marks its iteration.
std::vector<bpf_insn> loop_exit_program(const LoopMaps& m, int32_t large_write);

}  // namespace iobench::watch_bpf
