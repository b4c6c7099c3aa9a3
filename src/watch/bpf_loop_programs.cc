// `iobench watch --event-loop`'s kernel side: two more raw tracepoint programs beside the watch's
// own (bpf_watch_programs.cc), hand-assembled on the shared assembler. Per watched thread they
// keep when its last epoll wait returned; at its next wait they record the iteration's busy time
// in a log-linear histogram (HdrHistogram's layout, util/histogram.h), in one class or another as
// the iteration made a large write or not; and they record every large write's own duration.
#include "watch/bpf_loop_programs.h"

#include "probe/bpf_asm.h"
#include "watch/bpf_watch_programs.h"

namespace iobench::watch_bpf {
namespace {

using bpf::kJa, bpf::kJeq, bpf::kJne, bpf::kLdxDw, bpf::kLdxW, bpf::kStDw, bpf::kStW,
    bpf::kStxDw, bpf::kStxW, bpf::Program;


// The thread's state (loop map value): {u64 iteration start, u64 write start, u32 flags,
// u32 pending}, flags: kWroteLarge this iteration, kLoopThread once it has waited.
constexpr int16_t kIterStart = 0, kWriteStart = 8, kFlags = 16, kPending = 20;
constexpr int32_t kWroteLarge = 1, kLoopThread = 2;
constexpr int32_t kPendingWait = 1, kPendingWrite = 2;
constexpr int32_t kLastIndex = static_cast<int32_t>(kLoopSumSlot) - 1;

// hist[class at fp-48][index of the value in r6] += 1, plus the class's sum and maximum.
// Clobbers r0-r5; r6 is kept.
void record(Program& p, int hist, const std::string& tag) {
  const std::string at = "record_" + tag;  // the labels' prefix: unique to this call
  const std::string done = at + "_done", no_max = at + "_nomax", ok = at + "_ok";
  p.load_map(BPF_REG_1, hist);
  p.stack_addr(BPF_REG_2, -48);
  p.call(BPF_FUNC_map_lookup_elem);
  p.jump(kJeq, BPF_REG_0, 0, done);
  p.op(kLdxDw, BPF_REG_1, BPF_REG_0, kLoopSumSlot * 8, 0);
  p.op(BPF_ALU64 | BPF_ADD | BPF_X, BPF_REG_1, BPF_REG_6, 0, 0);
  p.op(kStxDw, BPF_REG_0, BPF_REG_1, kLoopSumSlot * 8, 0);
  p.op(kLdxDw, BPF_REG_1, BPF_REG_0, kLoopMaxSlot * 8, 0);
  p.jump_reg(BPF_JMP | BPF_JGE | BPF_X, BPF_REG_1, BPF_REG_6, no_max);
  p.op(kStxDw, BPF_REG_0, BPF_REG_6, kLoopMaxSlot * 8, 0);
  p.label(no_max);
  // HdrHistogram's index: bucket = floor(log2(v | 255)) - 7, index = bucket x 128 + (v >> bucket).
  p.mov_reg(BPF_REG_2, BPF_REG_6);
  p.op(BPF_ALU64 | BPF_OR | BPF_K, BPF_REG_2, 0, 0, 255);
  p.mov_imm(BPF_REG_3, 0);
  for (const int32_t s : {32, 16, 8, 4, 2, 1}) {
    const std::string skip = at + "_log" + std::to_string(s);
    p.mov_reg(BPF_REG_4, BPF_REG_2);
    p.op(BPF_ALU64 | BPF_RSH | BPF_K, BPF_REG_4, 0, 0, s);
    p.jump(kJeq, BPF_REG_4, 0, skip);
    p.mov_reg(BPF_REG_2, BPF_REG_4);
    p.op(bpf::kAddImm, BPF_REG_3, 0, 0, s);
    p.label(skip);
  }
  p.op(bpf::kAddImm, BPF_REG_3, 0, 0, -7);
  p.mov_reg(BPF_REG_4, BPF_REG_6);
  p.op(BPF_ALU64 | BPF_RSH | BPF_X, BPF_REG_4, BPF_REG_3, 0, 0);
  p.op(BPF_ALU64 | BPF_LSH | BPF_K, BPF_REG_3, 0, 0, 7);
  p.op(BPF_ALU64 | BPF_ADD | BPF_X, BPF_REG_3, BPF_REG_4, 0, 0);
  // Past the last index (about 68 s at 2 significant digits): counted there; max() says more.
  p.jump(BPF_JMP | BPF_JLE | BPF_K, BPF_REG_3, kLastIndex, ok);
  p.mov_imm(BPF_REG_3, kLastIndex);
  p.label(ok);
  p.op(BPF_ALU64 | BPF_AND | BPF_K, BPF_REG_3, 0, 0, static_cast<int32_t>(kLoopSlots) - 1);
  p.op(BPF_ALU64 | BPF_LSH | BPF_K, BPF_REG_3, 0, 0, 3);
  p.op(BPF_ALU64 | BPF_ADD | BPF_X, BPF_REG_0, BPF_REG_3, 0, 0);
  p.op(kLdxDw, BPF_REG_1, BPF_REG_0, 0, 0);
  p.op(bpf::kAddImm, BPF_REG_1, 0, 0, 1);
  p.op(kStxDw, BPF_REG_0, BPF_REG_1, 0, 0);
  p.label(done);
}

// r0 = the thread's state (created empty on first use), or leaves for "out"; the thread id at
// fp-8. Expects the watched-process check done.
void thread_state(Program& p, const LoopMaps& m) {
  p.call(BPF_FUNC_get_current_pid_tgid);
  p.op(kStxW, BPF_REG_10, BPF_REG_0, -8, 0);
  p.load_map(BPF_REG_1, m.loop);
  p.stack_addr(BPF_REG_2, -8);
  p.call(BPF_FUNC_map_lookup_elem);
  p.jump(kJne, BPF_REG_0, 0, "have_state");
  for (const int16_t at : {int16_t{-40}, int16_t{-32}, int16_t{-24}})
    p.op(kStDw, BPF_REG_10, 0, at, 0);
  bpf::update_from_stack(p, m.loop, -8, -40, BPF_NOEXIST);
  p.load_map(BPF_REG_1, m.loop);
  p.stack_addr(BPF_REG_2, -8);
  p.call(BPF_FUNC_map_lookup_elem);
  p.jump(kJeq, BPF_REG_0, 0, "out");
  p.label("have_state");
}

}  // namespace

// raw sys_enter (ctx: struct pt_regs *regs, long nr).
std::vector<bpf_insn> loop_enter_program(const LoopMaps& m, const LoopCalls& calls) {
  Program p;
  p.op(kLdxDw, BPF_REG_7, BPF_REG_1, 8, 0);  // nr: only the calls it follows go further
  for (const long nr : calls.waits) p.jump(kJeq, BPF_REG_7, static_cast<int32_t>(nr), "wait");
  for (const long nr : calls.writes) p.jump(kJeq, BPF_REG_7, static_cast<int32_t>(nr), "write");
  p.jump(kJa, 0, 0, "out");
  p.label("wait");
  p.mov_imm(BPF_REG_9, kPendingWait);
  p.jump(kJa, 0, 0, "watched");
  p.label("write");
  p.mov_imm(BPF_REG_9, kPendingWrite);
  p.label("watched");
  only_watched(p, m.watched);
  thread_state(p, m);
  p.mov_reg(BPF_REG_7, BPF_REG_0);
  p.op(kStxW, BPF_REG_7, BPF_REG_9, kPending, 0);
  p.call(BPF_FUNC_ktime_get_ns);
  p.jump(kJeq, BPF_REG_9, kPendingWrite, "write_start");
  // A wait begins: the iteration since the last wait returned ends here.
  p.op(kLdxDw, BPF_REG_1, BPF_REG_7, kIterStart, 0);
  p.jump(kJeq, BPF_REG_1, 0, "out");
  p.op(kStDw, BPF_REG_7, 0, kIterStart, 0);
  p.mov_reg(BPF_REG_6, BPF_REG_0);
  p.op(BPF_ALU64 | BPF_SUB | BPF_X, BPF_REG_6, BPF_REG_1, 0, 0);
  p.op(kLdxW, BPF_REG_1, BPF_REG_7, kFlags, 0);
  p.op(BPF_ALU64 | BPF_AND | BPF_K, BPF_REG_1, 0, 0, kWroteLarge);
  p.op(kStxW, BPF_REG_10, BPF_REG_1, -48, 0);  // class: kIterations or kIterationsWithLarge
  record(p, m.hist, "iter");
  p.jump(kJa, 0, 0, "out");
  p.label("write_start");
  p.op(kStxDw, BPF_REG_7, BPF_REG_0, kWriteStart, 0);
  p.label("out");
  p.exit0();
  return p.finish();
}

// raw sys_exit (ctx: struct pt_regs *regs, long ret).
std::vector<bpf_insn> loop_exit_program(const LoopMaps& m, int32_t large_write) {
  Program p;
  p.mov_reg(BPF_REG_6, BPF_REG_1);
  p.call(BPF_FUNC_get_current_pid_tgid);  // only a thread the enter program gave a state
  p.op(kStxW, BPF_REG_10, BPF_REG_0, -8, 0);
  p.load_map(BPF_REG_1, m.loop);
  p.stack_addr(BPF_REG_2, -8);
  p.call(BPF_FUNC_map_lookup_elem);
  p.jump(kJeq, BPF_REG_0, 0, "out");
  p.mov_reg(BPF_REG_7, BPF_REG_0);
  p.op(kLdxW, BPF_REG_8, BPF_REG_7, kPending, 0);
  p.jump(kJeq, BPF_REG_8, 0, "out");
  p.op(kStW, BPF_REG_7, 0, kPending, 0);
  p.op(kLdxDw, BPF_REG_9, BPF_REG_6, 8, 0);  // the result
  p.call(BPF_FUNC_ktime_get_ns);
  p.op(kLdxW, BPF_REG_1, BPF_REG_7, kFlags, 0);
  p.jump(kJeq, BPF_REG_8, kPendingWrite, "write_done");
  // A wait returned: an iteration begins, with no large write yet.
  p.op(kStxDw, BPF_REG_7, BPF_REG_0, kIterStart, 0);
  p.op(BPF_ALU64 | BPF_AND | BPF_K, BPF_REG_1, 0, 0, ~kWroteLarge);
  p.op(BPF_ALU64 | BPF_OR | BPF_K, BPF_REG_1, 0, 0, kLoopThread);
  p.op(kStxW, BPF_REG_7, BPF_REG_1, kFlags, 0);
  p.jump(kJa, 0, 0, "out");
  p.label("write_done");
  p.jump(BPF_JMP | BPF_JSLT | BPF_K, BPF_REG_9, large_write, "out");
  p.mov_reg(BPF_REG_6, BPF_REG_0);
  p.op(kLdxDw, BPF_REG_2, BPF_REG_7, kWriteStart, 0);
  p.op(BPF_ALU64 | BPF_SUB | BPF_X, BPF_REG_6, BPF_REG_2, 0, 0);
  p.mov_reg(BPF_REG_2, BPF_REG_1);
  p.op(BPF_ALU64 | BPF_OR | BPF_K, BPF_REG_2, 0, 0, kWroteLarge);
  p.op(kStxW, BPF_REG_7, BPF_REG_2, kFlags, 0);
  p.op(kStW, BPF_REG_10, 0, -48, static_cast<int32_t>(LoopClass::kLargeWritesElsewhere));
  p.op(BPF_ALU64 | BPF_AND | BPF_K, BPF_REG_1, 0, 0, kLoopThread);
  p.jump(kJeq, BPF_REG_1, 0, "class_set");
  p.op(kStW, BPF_REG_10, 0, -48, static_cast<int32_t>(LoopClass::kLargeWritesInLoop));
  p.label("class_set");
  record(p, m.hist, "write");
  p.label("out");
  p.exit0();
  return p.finish();
}

}  // namespace iobench::watch_bpf
