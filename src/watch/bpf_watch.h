// `iobench watch`'s kernel side: three hand-assembled eBPF programs that count, for a set of
// processes and every process they fork after the watch starts, syscalls by number and the
// result of each read- and write-family call by file descriptor.
//
// - raw sys_enter: counts the call per (tgid, number); for a read/write-family number notes the
//   thread's call and its descriptor (read from the syscall's registers);
// - raw sys_exit: takes that note and counts the result per (tgid, fd, number, result, kind): a
//   size or -errno, and what the descriptor was made as if that happened while watched (openat,
//   socket, accept, pipe are followed for it; a child's inherited descriptor takes its root's);
// - tracepoint sched:sched_process_fork: a watched process's new child is watched from its first
//   instruction (the tracepoint fires in the parent before the child is woken).
//
// Attached from open() until destruction. Like the session counter (probe/bpf_counter.h) it
// needs root or CAP_BPF + CAP_PERFMON, and while attached every syscall of the machine takes the
// kernel's traced entry path.
#pragma once

#include <linux/bpf.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "util/histogram.h"
#include "util/result.h"

namespace iobench {

// What a descriptor was made as while watched (openat: a file; socket, accept: a socket; pipe);
// kBefore: made before the watch began (its kind comes from /proc).
enum class WatchKind : uint32_t { kBefore = 0, kFile = 1, kPipe = 2, kSocket = 3 };

struct WatchCounts {
  using CallKey = std::pair<pid_t, uint32_t>;  // tgid, syscall number
  // tgid, fd, number, result, what the descriptor was made as at the time
  using IoKey = std::tuple<pid_t, uint32_t, uint32_t, int64_t, WatchKind>;
  std::map<CallKey, uint64_t> calls;
  std::map<IoKey, uint64_t> io;     // result: bytes moved (>= 0) or -errno
  std::map<pid_t, pid_t> watched;   // every watched id (processes and their threads) -> its root
  uint64_t lost_calls = 0;          // counts the kernel could not store: a map was full
  uint64_t lost_io = 0;
  // --event-loop: ns per event-loop iteration (without, with a large write), then per large
  // write (on an event-loop thread, elsewhere), pooled over the watched threads; empty without.
  struct LoopTimes {
    LogLinearHistogram ns;
    uint64_t sum_ns = 0;
  };
  std::vector<LoopTimes> loop;
};

class BpfWatch {
 public:
  // The syscall numbers at or above this count together in its slot.
  static constexpr uint32_t kOtherNumber = 511;
  // Loads and attaches the programs; `tracefs` holds events/sched. With `large_write` > 0 the
  // event loop's programs too (a write of at least that many bytes is a large one). The error
  // names the refusal.
  static Result<std::unique_ptr<BpfWatch>> open(const std::vector<pid_t>& roots,
                                                const std::string& tracefs,
                                                int64_t large_write = 0);
  ~BpfWatch();
  BpfWatch(const BpfWatch&) = delete;
  BpfWatch& operator=(const BpfWatch&) = delete;

  WatchCounts read() const;
  // Only the watched ids (cheap: no counts read), id -> root.
  std::map<pid_t, pid_t> read_watched() const;
  // Stops following `id` (a thread of a watched process: its syscalls count under the tgid).
  void forget(pid_t id);

 private:
  BpfWatch() = default;
  Status load(const std::vector<pid_t>& roots, const std::string& tracefs);
  Status attach_fork(const std::string& tracefs);
  Status attach_raw(const char* tracepoint, const std::vector<bpf_insn>& insns);
  Status load_loop(int64_t large_write);
  void read_loop(WatchCounts& c) const;
  int watched_ = -1, calls_ = -1, io_nrs_ = -1, pending_ = -1, io_ = -1, lost_ = -1, fdkind_ = -1;
  int loop_ = -1, hist_ = -1;  // --event-loop's
  std::vector<int> progs_, links_;
  size_t cpus_ = 1;
};

// The read- and write-family syscalls whose results the watch counts, by name.
const std::vector<std::string>& watched_io_syscalls();
// The calls whose new descriptors' kinds the watch follows.
const std::vector<std::pair<std::string, WatchKind>>& opening_syscalls();

}  // namespace iobench
