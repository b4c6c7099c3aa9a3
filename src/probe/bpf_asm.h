// The little toolkit iobench's hand-assembled eBPF programs share: the bpf() call, an
// assembler with forward jumps to named labels, map creation, program loading with the
// verifier's words on refusal, and per-CPU value reading. Nothing is compiled at run time.
#pragma once

#include <linux/bpf.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "util/result.h"

namespace iobench::bpf {

long sys_bpf(int cmd, bpf_attr& a);

// "0-1" or "0,2-3" (/sys/devices/system/cpu/possible): how many values a per-CPU lookup returns.
size_t possible_cpus();

// "what: strerror", with the privilege needed when the kernel said EPERM or EACCES.
std::string refusal(const char* what);

// Opcodes spelled from their parts, as the kernel's samples do (BPF_LD, BPF_ADD and BPF_K are 0).
// NOLINTBEGIN(misc-redundant-expression)
constexpr uint8_t kLoadImm64 = BPF_LD | BPF_DW | BPF_IMM;
constexpr uint8_t kAddImm = BPF_ALU64 | BPF_ADD | BPF_K;
constexpr uint8_t kStW = BPF_ST | BPF_MEM | BPF_W;
constexpr uint8_t kStDw = BPF_ST | BPF_MEM | BPF_DW;
constexpr uint8_t kStxW = BPF_STX | BPF_MEM | BPF_W;
constexpr uint8_t kStxDw = BPF_STX | BPF_MEM | BPF_DW;
constexpr uint8_t kLdxW = BPF_LDX | BPF_MEM | BPF_W;
constexpr uint8_t kLdxDw = BPF_LDX | BPF_MEM | BPF_DW;
constexpr uint8_t kJeq = BPF_JMP | BPF_JEQ | BPF_K;
constexpr uint8_t kJne = BPF_JMP | BPF_JNE | BPF_K;
constexpr uint8_t kJa = BPF_JMP | BPF_JA;
// NOLINTEND(misc-redundant-expression)

// Instructions plus forward jumps to named labels.
class Program {
 public:
  void op(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm);
  void jump(uint8_t code, uint8_t dst, int32_t imm, const std::string& label);
  // A register-to-register conditional jump (e.g. BPF_JMP | BPF_JNE | BPF_X).
  void jump_reg(uint8_t code, uint8_t dst, uint8_t src, const std::string& label);
  void label(const std::string& name) { labels_[name] = insns_.size(); }
  // 64-bit load of a map's descriptor (two instruction slots).
  void load_map(uint8_t dst, int map_fd);
  void call(int32_t helper) { op(BPF_JMP | BPF_CALL, 0, 0, 0, helper); }
  void mov_reg(uint8_t dst, uint8_t src) { op(BPF_ALU64 | BPF_MOV | BPF_X, dst, src, 0, 0); }
  void mov_imm(uint8_t dst, int32_t imm) { op(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm); }
  // dst = fp + off: the address of a stack slot, as helpers take keys and values.
  void stack_addr(uint8_t dst, int16_t off);
  // return 0
  void exit0();
  const std::vector<bpf_insn>& finish();

 private:
  std::vector<bpf_insn> insns_;
  std::vector<std::pair<size_t, std::string>> fixups_;
  std::map<std::string, size_t> labels_;
};

// map[key at fp + key_off] = value at fp + value_off (flags: BPF_ANY, BPF_NOEXIST).
void update_from_stack(Program& p, int map_fd, int16_t key_off, int16_t value_off, int32_t flags);

// *(u64*)map[key at fp + key_off] += 1, when the entry exists (array maps: always).
void increment(Program& p, int map_fd, int16_t key_off, const std::string& done);

// A map's descriptor, or the refusal.
Result<int> create_map(bpf_map_type type, uint32_t key_size, uint32_t value_size,
                       uint32_t max_entries);

// A loaded program's descriptor, or the refusal with the start of the verifier's log.
Result<int> load_program(bpf_prog_type type, const std::vector<bpf_insn>& insns);

// A per-CPU map's value at `key` summed over CPUs (0 when absent); values are u64.
uint64_t read_percpu_sum(int map_fd, const void* key, size_t cpus);

}  // namespace iobench::bpf
