#include "probe/bpf_counter.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <map>

#include "probe/bpf_asm.h"

namespace iobench {
namespace {

using bpf::Program;
using bpf::increment;

// On sys_enter (ctx->args[1] is the syscall number): if the caller is `tgid`, count it in the
// total slot and, below it, in its own slot. Per-CPU slots: no atomics, no contention.
std::vector<bpf_insn> counting_program(int map_fd, pid_t tgid) {
  Program p;
  p.mov_reg(BPF_REG_6, BPF_REG_1);  // r6 = ctx
  p.call(BPF_FUNC_get_current_pid_tgid);
  p.op(BPF_ALU64 | BPF_RSH | BPF_K, BPF_REG_0, 0, 0, 32);
  p.jump(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_0, static_cast<int32_t>(tgid), "out");
  p.op(BPF_LDX | BPF_MEM | BPF_DW, BPF_REG_7, BPF_REG_6, 8, 0);  // r7 = syscall number
  p.op(BPF_ST | BPF_MEM | BPF_W, BPF_REG_10, 0, -4, BpfSyscallCounter::kTotal);
  increment(p, map_fd, -4, "out");
  p.jump(BPF_JMP | BPF_JGE | BPF_K, BPF_REG_7, BpfSyscallCounter::kTotal, "out");
  p.op(BPF_STX | BPF_MEM | BPF_W, BPF_REG_10, BPF_REG_7, -8, 0);
  increment(p, map_fd, -8, "out");
  p.label("out");
  p.exit0();
  return p.finish();
}

}  // namespace

Result<std::unique_ptr<BpfSyscallCounter>> BpfSyscallCounter::open(pid_t tgid) {
  std::unique_ptr<BpfSyscallCounter> c(new BpfSyscallCounter);
  c->cpus_ = bpf::possible_cpus();
  auto map = bpf::create_map(BPF_MAP_TYPE_PERCPU_ARRAY, sizeof(uint32_t), sizeof(uint64_t),
                             kTotal + 1);
  if (!map) return std::unexpected(map.error());
  c->map_ = *map;
  auto prog = bpf::load_program(BPF_PROG_TYPE_RAW_TRACEPOINT, counting_program(c->map_, tgid));
  if (!prog) return std::unexpected(prog.error());
  c->prog_ = *prog;
  // Refused attachments show here, not at the first count.
  if (auto st = c->attach(); !st) return std::unexpected(st.error());
  c->detach();
  return c;
}

Status BpfSyscallCounter::attach() {
  if (link_ >= 0) return {};
  bpf_attr r{};
  r.raw_tracepoint.name = reinterpret_cast<uint64_t>("sys_enter");
  r.raw_tracepoint.prog_fd = static_cast<uint32_t>(prog_);
  link_ = static_cast<int>(bpf::sys_bpf(BPF_RAW_TRACEPOINT_OPEN, r));
  if (link_ < 0) return fail(bpf::refusal("bpf(BPF_RAW_TRACEPOINT_OPEN, sys_enter)"));
  return {};
}

void BpfSyscallCounter::detach() {
  if (link_ >= 0) ::close(link_);
  link_ = -1;
}

BpfSyscallCounter::~BpfSyscallCounter() {
  for (int fd : {link_, prog_, map_})
    if (fd >= 0) ::close(fd);
}

uint64_t BpfSyscallCounter::read(uint32_t slot) const {
  return bpf::read_percpu_sum(map_, &slot, cpus_);
}

long syscall_number(const std::string& name) {
  static const std::map<std::string, long> numbers = {
      {"read", SYS_read},
      {"write", SYS_write},
      {"readv", SYS_readv},
      {"writev", SYS_writev},
      {"sendto", SYS_sendto},
      {"recvfrom", SYS_recvfrom},
      {"sendmsg", SYS_sendmsg},
      {"recvmsg", SYS_recvmsg},
      {"ppoll", SYS_ppoll},
      {"epoll_pwait", SYS_epoll_pwait},
      {"io_uring_enter", SYS_io_uring_enter},
      {"pread64", SYS_pread64},
      {"pwrite64", SYS_pwrite64},
      {"sendfile", SYS_sendfile},
      {"splice", SYS_splice},
      {"openat", SYS_openat},
      {"socket", SYS_socket},
      {"accept4", SYS_accept4},
#ifdef SYS_accept
      {"accept", SYS_accept},
#endif
#ifdef SYS_pipe
      {"pipe", SYS_pipe},
#endif
      {"pipe2", SYS_pipe2},
      {"close", SYS_close},
      {"fsync", SYS_fsync},
      {"fdatasync", SYS_fdatasync},
      {"clone", SYS_clone},
#ifdef SYS_clone3
      {"clone3", SYS_clone3},
#endif
      {"wait4", SYS_wait4},
      {"epoll_ctl", SYS_epoll_ctl},
#ifdef SYS_poll
      {"poll", SYS_poll},
#endif
#ifdef SYS_epoll_wait
      {"epoll_wait", SYS_epoll_wait},
#endif
  };
  const auto it = numbers.find(name);
  return it == numbers.end() ? -1 : it->second;
}

}  // namespace iobench
