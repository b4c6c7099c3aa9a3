// The kernel side of `iobench watch`, hand-assembled on the shared assembler (bpf_asm.h): raw
// sys_enter counts syscalls and notes each read/write-family call's descriptor, raw sys_exit
// counts each result by (process, descriptor, call, result, kind), and sched_process_fork makes
// a watched process's child a member of its root. The loader is bpf_watch.cc.
#include "watch/bpf_watch_programs.h"

#include "probe/bpf_asm.h"
#include "watch/bpf_watch.h"

namespace iobench::watch_bpf {
namespace {

using bpf::kJa, bpf::kJeq, bpf::kJne, bpf::kLdxDw, bpf::kLdxW, bpf::kStDw, bpf::kStW,
    bpf::kStxDw, bpf::kStxW, bpf::Program;

// Where the syscall's arguments sit in the kernel's struct pt_regs at sys_enter.
#if defined(__x86_64__)
constexpr int32_t kArg0 = 14 * 8;  // di
constexpr int32_t kArg2 = 12 * 8;  // dx
#elif defined(__aarch64__)
constexpr int32_t kArg0 = 0;  // regs[0]
constexpr int32_t kArg2 = 2 * 8;
#else
constexpr int32_t kArg0 = -1;
constexpr int32_t kArg2 = -1;
#endif


// Per-CPU hash map[key at fp + key_off] += 1, inserting the entry at 1 when absent. A full map
// (or a lost race to insert) counts in lost[slot].
void count_in(Program& p, int map, int16_t key_off, const Maps& m, int32_t lost_slot,
              const std::string& tag) {
  const std::string add = tag + "_add", done = tag + "_done";
  p.load_map(BPF_REG_1, map);
  p.stack_addr(BPF_REG_2, key_off);
  p.call(BPF_FUNC_map_lookup_elem);
  p.jump(kJne, BPF_REG_0, 0, add);
  p.op(kStDw, BPF_REG_10, 0, -64, 1);  // the new entry's value
  bpf::update_from_stack(p, map, key_off, -64, BPF_NOEXIST);
  p.jump(kJeq, BPF_REG_0, 0, done);
  p.load_map(BPF_REG_1, map);  // another CPU inserted it first, or the map is full
  p.stack_addr(BPF_REG_2, key_off);
  p.call(BPF_FUNC_map_lookup_elem);
  p.jump(kJne, BPF_REG_0, 0, add);
  p.op(kStW, BPF_REG_10, 0, -68, lost_slot);
  bpf::increment(p, m.lost, -68, done);
  p.jump(kJa, 0, 0, done);
  p.label(add);
  p.op(kLdxDw, BPF_REG_1, BPF_REG_0, 0, 0);
  p.op(bpf::kAddImm, BPF_REG_1, 0, 0, 1);
  p.op(kStxDw, BPF_REG_0, BPF_REG_1, 0, 0);
  p.label(done);
}

}  // namespace

// r8 = pid_tgid; [fp-4] = tgid; leaves for "out" unless the tgid is watched.
void only_watched(Program& p, int watched_map) {
  p.call(BPF_FUNC_get_current_pid_tgid);
  p.mov_reg(BPF_REG_8, BPF_REG_0);
  p.op(BPF_ALU64 | BPF_RSH | BPF_K, BPF_REG_0, 0, 0, 32);
  p.op(kStxW, BPF_REG_10, BPF_REG_0, -4, 0);
  p.load_map(BPF_REG_1, watched_map);
  p.stack_addr(BPF_REG_2, -4);
  p.call(BPF_FUNC_map_lookup_elem);
  p.jump(kJeq, BPF_REG_0, 0, "out");
}

// raw sys_enter (ctx: struct pt_regs *regs, long nr).
std::vector<bpf_insn> enter_program(const Maps& m) {
  Program p;
  p.mov_reg(BPF_REG_6, BPF_REG_1);
  only_watched(p, m.watched);
  p.op(kLdxDw, BPF_REG_7, BPF_REG_6, 8, 0);  // r7 = nr, numbers past the table in its last slot
  p.jump(BPF_JMP | BPF_JLE | BPF_K, BPF_REG_7, BpfWatch::kOtherNumber, "nr_ok");
  p.mov_imm(BPF_REG_7, BpfWatch::kOtherNumber);
  p.label("nr_ok");
  p.op(kLdxW, BPF_REG_1, BPF_REG_10, -4, 0);  // calls key {tgid, nr} at fp-16
  p.op(kStxW, BPF_REG_10, BPF_REG_1, -16, 0);
  p.op(kStxW, BPF_REG_10, BPF_REG_7, -12, 0);
  count_in(p, m.calls, -16, m, 0, "calls");
  p.op(kStxW, BPF_REG_10, BPF_REG_7, -28, 0);  // a read/write-family number?
  p.load_map(BPF_REG_1, m.io_nrs);
  p.stack_addr(BPF_REG_2, -28);
  p.call(BPF_FUNC_map_lookup_elem);
  p.jump(kJeq, BPF_REG_0, 0, "out");
  // io_nrs value: what the call makes (a WatchKind, 0 for I/O) << 16 | argument offset + 1.
  p.op(kLdxW, BPF_REG_9, BPF_REG_0, 0, 0);
  p.jump(kJeq, BPF_REG_9, 0, "out");
  p.mov_reg(BPF_REG_1, BPF_REG_9);
  p.op(BPF_ALU64 | BPF_RSH | BPF_K, BPF_REG_1, 0, 0, 16);
  p.op(kStxW, BPF_REG_10, BPF_REG_1, -36, 0);
  p.op(BPF_ALU64 | BPF_AND | BPF_K, BPF_REG_9, 0, 0, 0xffff);
  p.op(bpf::kAddImm, BPF_REG_9, 0, 0, -1);
  p.op(kLdxDw, BPF_REG_3, BPF_REG_6, 0, 0);  // regs
  p.op(BPF_ALU64 | BPF_ADD | BPF_X, BPF_REG_3, BPF_REG_9, 0, 0);
  p.stack_addr(BPF_REG_1, -48);  // pending value {u64 argument, u32 nr, u32 kind} at fp-48
  p.mov_imm(BPF_REG_2, 8);
  p.call(BPF_FUNC_probe_read_kernel);
  p.jump(kJne, BPF_REG_0, 0, "out");
  p.op(kStxW, BPF_REG_10, BPF_REG_7, -40, 0);
  p.op(kStxW, BPF_REG_10, BPF_REG_8, -52, 0);  // key: the thread id (pid_tgid's low half)
  bpf::update_from_stack(p, m.pending, -52, -48, BPF_ANY);
  p.label("out");
  p.exit0();
  return p.finish();
}

namespace {

// fdkind[{tgid, fd at fp-12}] = {kind, 0, made_ns} at fp-80.
void set_kind(Program& p, const Maps& m) {
  bpf::update_from_stack(p, m.fdkind, -16, -80, BPF_ANY);
}

// A descriptor-making call that succeeded (result in r1, the argument in r7): the kind of each
// descriptor it made, and when, from now on.
void made_descriptors(Program& p, const Maps& m) {
  p.jump(BPF_JMP | BPF_JSLT | BPF_K, BPF_REG_1, 0, "out");
  p.mov_reg(BPF_REG_9, BPF_REG_1);
  p.call(BPF_FUNC_ktime_get_ns);
  p.op(kStxDw, BPF_REG_10, BPF_REG_0, -72, 0);
  p.op(kStW, BPF_REG_10, 0, -76, 0);
  p.op(kLdxW, BPF_REG_2, BPF_REG_10, -8, 0);
  p.op(kStxW, BPF_REG_10, BPF_REG_2, -80, 0);
  p.jump(kJeq, BPF_REG_2, static_cast<int32_t>(WatchKind::kPipe), "pipe");
  p.op(kStxW, BPF_REG_10, BPF_REG_9, -12, 0);  // the new descriptor is the result
  set_kind(p, m);
  p.jump(kJa, 0, 0, "out");
  p.label("pipe");  // pipe, pipe2: the two descriptors are in the array argument
  p.stack_addr(BPF_REG_1, -56);
  p.mov_imm(BPF_REG_2, 8);
  p.mov_reg(BPF_REG_3, BPF_REG_7);
  p.call(BPF_FUNC_probe_read_user);
  p.jump(kJne, BPF_REG_0, 0, "out");
  for (const int16_t at : {int16_t{-56}, int16_t{-52}}) {
    p.op(kLdxW, BPF_REG_1, BPF_REG_10, at, 0);
    p.op(kStxW, BPF_REG_10, BPF_REG_1, -12, 0);
    set_kind(p, m);
  }
  p.jump(kJa, 0, 0, "out");
}

// An I/O call's result, counted with the kind its descriptor was made as while watched: by the
// process, or (a forked child's inherited descriptor) by its root before the fork — copied to the
// child at first use, as the root may reuse the number later. 0: made before the watch.
void count_io(Program& p, const Maps& m) {
  p.op(kStxW, BPF_REG_10, BPF_REG_7, -40, 0);  // io key {tgid, fd, nr, result, kind} at fp-44
  p.op(kStxW, BPF_REG_10, BPF_REG_7, -12, 0);
  p.op(kStxW, BPF_REG_10, BPF_REG_9, -36, 0);
  p.op(kStW, BPF_REG_10, 0, -28, 0);
  p.load_map(BPF_REG_1, m.fdkind);
  p.stack_addr(BPF_REG_2, -16);
  p.call(BPF_FUNC_map_lookup_elem);
  p.jump(kJne, BPF_REG_0, 0, "kind");
  p.op(kLdxW, BPF_REG_1, BPF_REG_10, -16, 0);
  p.op(kStxW, BPF_REG_10, BPF_REG_1, -20, 0);
  p.load_map(BPF_REG_1, m.watched);
  p.stack_addr(BPF_REG_2, -20);
  p.call(BPF_FUNC_map_lookup_elem);
  p.jump(kJeq, BPF_REG_0, 0, "count");
  p.op(kLdxW, BPF_REG_1, BPF_REG_0, 0, 0);   // the root
  p.op(kLdxDw, BPF_REG_7, BPF_REG_0, 8, 0);  // when this process was forked (a root: 0)
  p.op(kStxW, BPF_REG_10, BPF_REG_1, -16, 0);
  p.load_map(BPF_REG_1, m.fdkind);
  p.stack_addr(BPF_REG_2, -16);
  p.call(BPF_FUNC_map_lookup_elem);
  p.jump(kJeq, BPF_REG_0, 0, "count");
  p.op(kLdxDw, BPF_REG_1, BPF_REG_0, 8, 0);  // made after the fork: not what was inherited
  p.jump_reg(BPF_JMP | BPF_JGT | BPF_X, BPF_REG_1, BPF_REG_7, "count");
  p.mov_reg(BPF_REG_9, BPF_REG_0);
  p.mov_reg(BPF_REG_1, BPF_REG_8);
  p.op(BPF_ALU64 | BPF_RSH | BPF_K, BPF_REG_1, 0, 0, 32);
  p.op(kStxW, BPF_REG_10, BPF_REG_1, -16, 0);
  p.load_map(BPF_REG_1, m.fdkind);
  p.stack_addr(BPF_REG_2, -16);
  p.mov_reg(BPF_REG_3, BPF_REG_9);
  p.mov_imm(BPF_REG_4, BPF_ANY);
  p.call(BPF_FUNC_map_update_elem);
  p.mov_reg(BPF_REG_0, BPF_REG_9);
  p.label("kind");
  p.op(kLdxW, BPF_REG_1, BPF_REG_0, 0, 0);
  p.op(kStxW, BPF_REG_10, BPF_REG_1, -28, 0);
  p.label("count");
  count_in(p, m.io, -44, m, 1, "io");
}

}  // namespace

// raw sys_exit (ctx: struct pt_regs *regs, long ret).
std::vector<bpf_insn> exit_program(const Maps& m) {
  Program p;
  p.mov_reg(BPF_REG_6, BPF_REG_1);
  p.call(BPF_FUNC_get_current_pid_tgid);
  p.mov_reg(BPF_REG_8, BPF_REG_0);
  p.op(kStxW, BPF_REG_10, BPF_REG_8, -4, 0);
  p.load_map(BPF_REG_1, m.pending);
  p.stack_addr(BPF_REG_2, -4);
  p.call(BPF_FUNC_map_lookup_elem);
  p.jump(kJeq, BPF_REG_0, 0, "out");
  p.op(kLdxDw, BPF_REG_7, BPF_REG_0, 0, 0);  // the argument: a descriptor, or pipe's array
  p.op(kLdxW, BPF_REG_9, BPF_REG_0, 8, 0);   // nr
  p.op(kLdxW, BPF_REG_1, BPF_REG_0, 12, 0);  // what it makes (0: I/O)
  p.op(kStxW, BPF_REG_10, BPF_REG_1, -8, 0);
  p.load_map(BPF_REG_1, m.pending);
  p.stack_addr(BPF_REG_2, -4);
  p.call(BPF_FUNC_map_delete_elem);
  p.mov_reg(BPF_REG_1, BPF_REG_8);  // the tgid, in the kind key (fp-16) and the io key (fp-44)
  p.op(BPF_ALU64 | BPF_RSH | BPF_K, BPF_REG_1, 0, 0, 32);
  p.op(kStxW, BPF_REG_10, BPF_REG_1, -16, 0);
  p.op(kStxW, BPF_REG_10, BPF_REG_1, -44, 0);
  p.op(kLdxDw, BPF_REG_1, BPF_REG_6, 8, 0);  // the result: -errno keeps its low 32 bits
  p.op(kStxW, BPF_REG_10, BPF_REG_1, -32, 0);
  p.op(kLdxW, BPF_REG_2, BPF_REG_10, -8, 0);
  p.jump(kJeq, BPF_REG_2, 0, "io");
  made_descriptors(p, m);
  p.label("io");
  count_io(p, m);
  p.label("out");
  p.exit0();
  return p.finish();
}

// sched:sched_process_fork, in the parent: a watched process's child joins its root.
std::vector<bpf_insn> fork_program(const Maps& m, int16_t child_pid_offset) {
  Program p;
  p.mov_reg(BPF_REG_6, BPF_REG_1);
  only_watched(p, m.watched);
  p.op(kLdxW, BPF_REG_1, BPF_REG_0, 0, 0);  // value {the parent's root, 0, now} at fp-24
  p.op(kStxW, BPF_REG_10, BPF_REG_1, -24, 0);
  p.op(kStW, BPF_REG_10, 0, -20, 0);
  p.call(BPF_FUNC_ktime_get_ns);
  p.op(kStxDw, BPF_REG_10, BPF_REG_0, -16, 0);
  p.op(kLdxW, BPF_REG_1, BPF_REG_6, child_pid_offset, 0);
  p.op(kStxW, BPF_REG_10, BPF_REG_1, -28, 0);
  bpf::update_from_stack(p, m.watched, -28, -24, BPF_NOEXIST);
  p.label("out");
  p.exit0();
  return p.finish();
}

bool pt_regs_known() { return kArg0 >= 0; }
int32_t first_arg_offset() { return kArg0; }

const std::vector<IoSyscall>& io_syscalls() {
  static const std::vector<IoSyscall> all = {
      {"read", kArg0},     {"write", kArg0},    {"readv", kArg0},    {"writev", kArg0},
      {"recvfrom", kArg0}, {"sendto", kArg0},   {"recvmsg", kArg0},  {"sendmsg", kArg0},
      {"pread64", kArg0},  {"pwrite64", kArg0}, {"sendfile", kArg0}, {"splice", kArg2}};
  return all;
}

}  // namespace iobench::watch_bpf
