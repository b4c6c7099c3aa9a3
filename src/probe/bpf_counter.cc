#include "probe/bpf_counter.h"

#include <fmt/format.h>
#include <linux/bpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>

namespace iobench {
namespace {

long sys_bpf(int cmd, bpf_attr& a) { return syscall(SYS_bpf, cmd, &a, sizeof a); }

// "0-1" or "0,2-3" (/sys/devices/system/cpu/possible): how many values a per-CPU lookup returns.
size_t possible_cpus() {
  std::ifstream in("/sys/devices/system/cpu/possible");
  std::string spec;
  in >> spec;
  size_t n = 0;
  size_t pos = 0;
  while (pos < spec.size()) {
    const size_t comma = spec.find(',', pos);
    const std::string part = spec.substr(pos, comma == std::string::npos ? comma : comma - pos);
    const size_t dash = part.find('-');
    n += dash == std::string::npos ? 1 : std::stoul(part.substr(dash + 1)) - std::stoul(part) + 1;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return n > 0 ? n : 1;
}

// Opcodes spelled from their parts, as the kernel's samples do (BPF_LD, BPF_ADD and BPF_K are 0).
// NOLINTBEGIN(misc-redundant-expression)
constexpr uint8_t kLoadImm64 = BPF_LD | BPF_DW | BPF_IMM;
constexpr uint8_t kAddImm = BPF_ALU64 | BPF_ADD | BPF_K;
// NOLINTEND(misc-redundant-expression)

// A little assembler for the program below: instructions plus forward jumps to named labels.
class Program {
 public:
  void op(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
    bpf_insn i{};
    i.code = code;
    i.dst_reg = dst & 0xfu;  // registers are 4-bit fields
    i.src_reg = src & 0xfu;
    i.off = off;
    i.imm = imm;
    insns_.push_back(i);
  }
  void jump(uint8_t code, uint8_t dst, int32_t imm, const std::string& label) {
    fixups_.emplace_back(insns_.size(), label);
    op(code, dst, 0, 0, imm);
  }
  void label(const std::string& name) { labels_[name] = insns_.size(); }
  // 64-bit load of a map's descriptor (two instruction slots).
  void load_map(uint8_t dst, int map_fd) {
    op(kLoadImm64, dst, BPF_PSEUDO_MAP_FD, 0, map_fd);
    op(0, 0, 0, 0, 0);
  }
  const std::vector<bpf_insn>& finish() {
    for (const auto& [at, name] : fixups_)
      insns_[at].off = static_cast<int16_t>(labels_.at(name) - at - 1);
    return insns_;
  }

 private:
  std::vector<bpf_insn> insns_;
  std::vector<std::pair<size_t, std::string>> fixups_;
  std::map<std::string, size_t> labels_;
};

// *(u64*)map[*(u32*)(fp + key_off)] += 1, when the slot exists.
void increment(Program& p, int map_fd, int16_t key_off, const std::string& done) {
  p.load_map(BPF_REG_1, map_fd);
  p.op(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_2, BPF_REG_10, 0, 0);
  p.op(kAddImm, BPF_REG_2, 0, 0, key_off);
  p.op(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_map_lookup_elem);
  p.jump(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_0, 0, done);
  p.op(BPF_LDX | BPF_MEM | BPF_DW, BPF_REG_1, BPF_REG_0, 0, 0);
  p.op(kAddImm, BPF_REG_1, 0, 0, 1);
  p.op(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_0, BPF_REG_1, 0, 0);
}

// On sys_enter (ctx->args[1] is the syscall number): if the caller is `tgid`, count it in the
// total slot and, below it, in its own slot. Per-CPU slots: no atomics, no contention.
std::vector<bpf_insn> counting_program(int map_fd, pid_t tgid) {
  Program p;
  p.op(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_6, BPF_REG_1, 0, 0);  // r6 = ctx
  p.op(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_get_current_pid_tgid);
  p.op(BPF_ALU64 | BPF_RSH | BPF_K, BPF_REG_0, 0, 0, 32);
  p.jump(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_0, static_cast<int32_t>(tgid), "out");
  p.op(BPF_LDX | BPF_MEM | BPF_DW, BPF_REG_7, BPF_REG_6, 8, 0);  // r7 = syscall number
  p.op(BPF_ST | BPF_MEM | BPF_W, BPF_REG_10, 0, -4, BpfSyscallCounter::kTotal);
  increment(p, map_fd, -4, "out");
  p.jump(BPF_JMP | BPF_JGE | BPF_K, BPF_REG_7, BpfSyscallCounter::kTotal, "out");
  p.op(BPF_STX | BPF_MEM | BPF_W, BPF_REG_10, BPF_REG_7, -8, 0);
  increment(p, map_fd, -8, "out");
  p.label("out");
  p.op(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0);
  p.op(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
  return p.finish();
}

std::string refusal(const char* what) {
  const int e = errno;
  std::string why = fmt::format("{}: {}", what, std::strerror(e));
  if (e == EPERM || e == EACCES) why += " (needs root, or CAP_BPF and CAP_PERFMON)";
  return why;
}

}  // namespace

Result<std::unique_ptr<BpfSyscallCounter>> BpfSyscallCounter::open(pid_t tgid) {
  std::unique_ptr<BpfSyscallCounter> c(new BpfSyscallCounter);
  c->cpus_ = possible_cpus();
  bpf_attr m{};
  m.map_type = BPF_MAP_TYPE_PERCPU_ARRAY;
  m.key_size = sizeof(uint32_t);
  m.value_size = sizeof(uint64_t);
  m.max_entries = kTotal + 1;
  m.map_flags = 0;
  c->map_ = static_cast<int>(sys_bpf(BPF_MAP_CREATE, m));
  if (c->map_ < 0) return fail(refusal("bpf(BPF_MAP_CREATE)"));
  const std::vector<bpf_insn> insns = counting_program(c->map_, tgid);
  std::string log(16384, '\0');
  bpf_attr l{};
  l.prog_type = BPF_PROG_TYPE_RAW_TRACEPOINT;
  l.insns = reinterpret_cast<uint64_t>(insns.data());
  l.insn_cnt = static_cast<uint32_t>(insns.size());
  l.license = reinterpret_cast<uint64_t>("GPL");
  l.log_buf = reinterpret_cast<uint64_t>(log.data());
  l.log_size = static_cast<uint32_t>(log.size());
  l.log_level = 1;
  c->prog_ = static_cast<int>(sys_bpf(BPF_PROG_LOAD, l));
  if (c->prog_ < 0) {
    std::string why = refusal("bpf(BPF_PROG_LOAD)");
    log.resize(std::strlen(log.c_str()));
    if (errno == EINVAL && !log.empty()) why += ": verifier: " + log.substr(0, 200);
    return fail(why);
  }
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
  link_ = static_cast<int>(sys_bpf(BPF_RAW_TRACEPOINT_OPEN, r));
  if (link_ < 0) return fail(refusal("bpf(BPF_RAW_TRACEPOINT_OPEN, sys_enter)"));
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
  std::vector<uint64_t> per_cpu(cpus_);
  bpf_attr a{};
  a.map_fd = static_cast<uint32_t>(map_);
  a.key = reinterpret_cast<uint64_t>(&slot);
  a.value = reinterpret_cast<uint64_t>(per_cpu.data());
  if (sys_bpf(BPF_MAP_LOOKUP_ELEM, a) != 0) return 0;
  uint64_t sum = 0;
  for (uint64_t v : per_cpu) sum += v;
  return sum;
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
