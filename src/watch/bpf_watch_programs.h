// The three programs of `iobench watch` (bpf_watch_programs.cc) and what the loader
// (bpf_watch.cc) shares with them: the calls watched, the maps' layout.
#pragma once

#include <linux/bpf.h>

#include <cstdint>
#include <vector>

namespace iobench::bpf {
class Program;
}

namespace iobench::watch_bpf {

// name, the argument holding the descriptor whose result we count (splice: the output). The
// calls that make a descriptor are counted too, for the kind of what they made (where no sample
// of /proc saw it): openat, socket, accept, accept4 by their result; pipe and pipe2 by the two
// descriptors they write (counted as results of 0 on each).
struct IoSyscall {
  const char* name;
  int32_t fd_arg_offset;
};
const std::vector<IoSyscall>& io_syscalls();
// Whether this architecture's pt_regs layout is known (x86_64, aarch64), and where its first
// syscall argument sits in it (the descriptor of a call that makes descriptors by its result).
bool pt_regs_known();
int32_t first_arg_offset();

// watched: tgid -> its root, and when it was forked (a root: 0), in CLOCK_MONOTONIC ns.
struct WatchedValue {
  uint32_t root, pad;
  uint64_t forked_ns;
};

struct Maps {
  int watched, calls, io_nrs, pending, io, lost, fdkind;
};

// r8 = pid_tgid, [fp-4] = its tgid; jumps to the program's "out" label unless that tgid is in
// the watched map (the watch's programs and the event loop's share this entry check).
void only_watched(bpf::Program& p, int watched_map);

// Each program, its map descriptors in place; fork_program reads the child's pid at
// `child_pid_offset` of the tracepoint's record.
std::vector<bpf_insn> enter_program(const Maps& m);
std::vector<bpf_insn> exit_program(const Maps& m);
std::vector<bpf_insn> fork_program(const Maps& m, int16_t child_pid_offset);

}  // namespace iobench::watch_bpf
