#include "probe/bpf_asm.h"

#include <fmt/format.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "probe/placement.h"

namespace iobench::bpf {

long sys_bpf(int cmd, bpf_attr& a) { return syscall(SYS_bpf, cmd, &a, sizeof a); }

size_t possible_cpus() {
  std::ifstream in("/sys/devices/system/cpu/possible");
  std::string spec;
  in >> spec;
  const int n = cpu_list_count(spec);
  return n > 0 ? static_cast<size_t>(n) : 1;
}

std::string refusal(const char* what) {
  const int e = errno;
  std::string why = fmt::format("{}: {}", what, std::strerror(e));
  if (e == EPERM || e == EACCES) why += " (needs root, or CAP_BPF and CAP_PERFMON)";
  return why;
}

void Program::op(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  bpf_insn i{};
  i.code = code;
  i.dst_reg = dst & 0xfu;  // registers are 4-bit fields
  i.src_reg = src & 0xfu;
  i.off = off;
  i.imm = imm;
  insns_.push_back(i);
}

void Program::jump(uint8_t code, uint8_t dst, int32_t imm, const std::string& label) {
  fixups_.emplace_back(insns_.size(), label);
  op(code, dst, 0, 0, imm);
}

void Program::jump_reg(uint8_t code, uint8_t dst, uint8_t src, const std::string& label) {
  fixups_.emplace_back(insns_.size(), label);
  op(code, dst, src, 0, 0);
}

void Program::load_map(uint8_t dst, int map_fd) {
  op(kLoadImm64, dst, BPF_PSEUDO_MAP_FD, 0, map_fd);
  op(0, 0, 0, 0, 0);
}

void Program::stack_addr(uint8_t dst, int16_t off) {
  mov_reg(dst, BPF_REG_10);
  op(kAddImm, dst, 0, 0, off);
}

void Program::exit0() {
  mov_imm(BPF_REG_0, 0);
  op(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
}

const std::vector<bpf_insn>& Program::finish() {
  for (const auto& [at, name] : fixups_)
    insns_[at].off = static_cast<int16_t>(labels_.at(name) - at - 1);
  return insns_;
}

void update_from_stack(Program& p, int map_fd, int16_t key_off, int16_t value_off, int32_t flags) {
  p.load_map(BPF_REG_1, map_fd);
  p.stack_addr(BPF_REG_2, key_off);
  p.stack_addr(BPF_REG_3, value_off);
  p.mov_imm(BPF_REG_4, flags);
  p.call(BPF_FUNC_map_update_elem);
}

void increment(Program& p, int map_fd, int16_t key_off, const std::string& done) {
  p.load_map(BPF_REG_1, map_fd);
  p.stack_addr(BPF_REG_2, key_off);
  p.call(BPF_FUNC_map_lookup_elem);
  p.jump(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_0, 0, done);
  p.op(BPF_LDX | BPF_MEM | BPF_DW, BPF_REG_1, BPF_REG_0, 0, 0);
  p.op(kAddImm, BPF_REG_1, 0, 0, 1);
  p.op(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_0, BPF_REG_1, 0, 0);
}

Result<int> create_map(bpf_map_type type, uint32_t key_size, uint32_t value_size,
                       uint32_t max_entries) {
  bpf_attr m{};
  m.map_type = type;
  m.key_size = key_size;
  m.value_size = value_size;
  m.max_entries = max_entries;
  const int fd = static_cast<int>(sys_bpf(BPF_MAP_CREATE, m));
  if (fd < 0) return fail(refusal("bpf(BPF_MAP_CREATE)"));
  return fd;
}

Result<int> load_program(bpf_prog_type type, const std::vector<bpf_insn>& insns) {
  std::string log(16384, '\0');
  bpf_attr l{};
  l.prog_type = type;
  l.insns = reinterpret_cast<uint64_t>(insns.data());
  l.insn_cnt = static_cast<uint32_t>(insns.size());
  l.license = reinterpret_cast<uint64_t>("GPL");
  l.log_buf = reinterpret_cast<uint64_t>(log.data());
  l.log_size = static_cast<uint32_t>(log.size());
  l.log_level = 1;
  const int fd = static_cast<int>(sys_bpf(BPF_PROG_LOAD, l));
  if (fd >= 0) return fd;
  const int e = errno;
  log.resize(std::strlen(log.c_str()));
  // The verifier refuses with EINVAL or EACCES and says why in its log; a missing privilege
  // leaves the log empty.
  if ((e == EINVAL || e == EACCES) && !log.empty()) {
    const size_t tail = log.size() > 300 ? log.size() - 300 : 0;
    return fail(fmt::format("bpf(BPF_PROG_LOAD): {}: verifier: {}", std::strerror(e),
                            log.substr(tail)));
  }
  return fail(refusal("bpf(BPF_PROG_LOAD)"));
}

uint64_t read_percpu_sum(int map_fd, const void* key, size_t cpus) {
  std::vector<uint64_t> per_cpu(cpus);
  bpf_attr a{};
  a.map_fd = static_cast<uint32_t>(map_fd);
  a.key = reinterpret_cast<uint64_t>(key);
  a.value = reinterpret_cast<uint64_t>(per_cpu.data());
  if (sys_bpf(BPF_MAP_LOOKUP_ELEM, a) != 0) return 0;
  uint64_t sum = 0;
  for (uint64_t v : per_cpu) sum += v;
  return sum;
}

}  // namespace iobench::bpf
