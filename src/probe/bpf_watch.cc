#include "probe/bpf_watch.h"

#include <fmt/format.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <sstream>

#include "probe/bpf_asm.h"
#include "probe/bpf_counter.h"

namespace iobench {
namespace {

using bpf::Program;

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

// name, the argument holding the descriptor whose result we count (splice: the output). The
// calls that make a descriptor are counted too, for the kind of what they made (where no sample
// of /proc saw it): openat, socket, accept, accept4 by their result; pipe and pipe2 by the two
// descriptors they write (counted as results of 0 on each).
struct IoSyscall {
  const char* name;
  int32_t fd_arg_offset;
};
const std::vector<IoSyscall>& io_syscalls() {
  static const std::vector<IoSyscall> all = {
      {"read", kArg0},     {"write", kArg0},    {"readv", kArg0},    {"writev", kArg0},
      {"recvfrom", kArg0}, {"sendto", kArg0},   {"recvmsg", kArg0},  {"sendmsg", kArg0},
      {"pread64", kArg0},  {"pwrite64", kArg0}, {"sendfile", kArg0}, {"splice", kArg2}};
  return all;
}
constexpr uint8_t kStW = BPF_ST | BPF_MEM | BPF_W;
constexpr uint8_t kStDw = BPF_ST | BPF_MEM | BPF_DW;
constexpr uint8_t kStxW = BPF_STX | BPF_MEM | BPF_W;
constexpr uint8_t kStxDw = BPF_STX | BPF_MEM | BPF_DW;
constexpr uint8_t kLdxW = BPF_LDX | BPF_MEM | BPF_W;
constexpr uint8_t kLdxDw = BPF_LDX | BPF_MEM | BPF_DW;
constexpr uint8_t kJeq = BPF_JMP | BPF_JEQ | BPF_K;
constexpr uint8_t kJne = BPF_JMP | BPF_JNE | BPF_K;
constexpr uint8_t kJa = BPF_JMP | BPF_JA;

// watched: tgid -> its root, and when it was forked (a root: 0), in CLOCK_MONOTONIC ns.
struct WatchedValue {
  uint32_t root, pad;
  uint64_t forked_ns;
};

struct Maps {
  int watched, calls, io_nrs, pending, io, lost, fdkind;
};

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

// r8 = pid_tgid; [fp-4] = tgid; leaves for "out" unless the tgid is watched.
void only_watched(Program& p, const Maps& m) {
  p.call(BPF_FUNC_get_current_pid_tgid);
  p.mov_reg(BPF_REG_8, BPF_REG_0);
  p.op(BPF_ALU64 | BPF_RSH | BPF_K, BPF_REG_0, 0, 0, 32);
  p.op(kStxW, BPF_REG_10, BPF_REG_0, -4, 0);
  p.load_map(BPF_REG_1, m.watched);
  p.stack_addr(BPF_REG_2, -4);
  p.call(BPF_FUNC_map_lookup_elem);
  p.jump(kJeq, BPF_REG_0, 0, "out");
}

// raw sys_enter (ctx: struct pt_regs *regs, long nr).
std::vector<bpf_insn> enter_program(const Maps& m) {
  Program p;
  p.mov_reg(BPF_REG_6, BPF_REG_1);
  only_watched(p, m);
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
  only_watched(p, m);
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

// `field` in a tracepoint's format file: its offset, or -1.
int field_offset(const std::string& format_path, const std::string& field) {
  std::ifstream in(format_path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(" " + field + ";") == std::string::npos) continue;
    const size_t at = line.find("offset:");
    if (at != std::string::npos) return std::stoi(line.substr(at + 7));
  }
  return -1;
}

bool update(int map, const void* key, const void* value, uint64_t flags) {
  bpf_attr a{};
  a.map_fd = static_cast<uint32_t>(map);
  a.key = reinterpret_cast<uint64_t>(key);
  a.value = reinterpret_cast<uint64_t>(value);
  a.flags = flags;
  return bpf::sys_bpf(BPF_MAP_UPDATE_ELEM, a) == 0;
}

// Every key of a hash map, `key_size` bytes each.
std::vector<std::vector<std::byte>> keys_of(int map, size_t key_size) {
  std::vector<std::vector<std::byte>> keys;
  std::vector<std::byte> next(key_size);
  for (;;) {
    bpf_attr a{};
    a.map_fd = static_cast<uint32_t>(map);
    a.key = keys.empty() ? 0 : reinterpret_cast<uint64_t>(keys.back().data());
    a.next_key = reinterpret_cast<uint64_t>(next.data());
    if (bpf::sys_bpf(BPF_MAP_GET_NEXT_KEY, a) != 0) break;
    keys.push_back(next);
  }
  return keys;
}

template <typename T>
T at(const std::vector<std::byte>& key, size_t off) {
  T v;
  std::memcpy(&v, key.data() + off, sizeof v);
  return v;
}

}  // namespace

const std::vector<std::string>& watched_io_syscalls() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const IoSyscall& s : io_syscalls()) n.emplace_back(s.name);
    return n;
  }();
  return names;
}

const std::vector<std::pair<std::string, WatchKind>>& opening_syscalls() {
  static const std::vector<std::pair<std::string, WatchKind>> all = {
      {"openat", WatchKind::kFile},   {"socket", WatchKind::kSocket},
      {"accept", WatchKind::kSocket}, {"accept4", WatchKind::kSocket},
      {"pipe", WatchKind::kPipe},     {"pipe2", WatchKind::kPipe}};
  return all;
}

Result<std::unique_ptr<BpfWatch>> BpfWatch::open(const std::vector<pid_t>& roots,
                                                 const std::string& tracefs) {
  if (kArg0 < 0) return fail("watch reads descriptors from pt_regs: known for x86_64 and aarch64");
  std::unique_ptr<BpfWatch> w(new BpfWatch);
  if (auto st = w->load(roots, tracefs); !st) return std::unexpected(st.error());
  return w;
}

Status BpfWatch::load(const std::vector<pid_t>& roots, const std::string& tracefs) {
  cpus_ = bpf::possible_cpus();
  const struct {
    int* fd;
    bpf_map_type type;
    uint32_t key, value, entries;
  } maps[] = {{&watched_, BPF_MAP_TYPE_HASH, 4, 16, 8192},
              {&calls_, BPF_MAP_TYPE_PERCPU_HASH, 8, 8, 16384},
              {&io_nrs_, BPF_MAP_TYPE_ARRAY, 4, 4, kOtherNumber + 1},
              {&pending_, BPF_MAP_TYPE_LRU_HASH, 4, 16, 16384},
              {&io_, BPF_MAP_TYPE_PERCPU_HASH, 20, 8, 65536},
              {&fdkind_, BPF_MAP_TYPE_HASH, 8, 16, 65536},
              {&lost_, BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, 2}};
  for (const auto& m : maps) {
    auto fd = bpf::create_map(m.type, m.key, m.value, m.entries);
    if (!fd) return std::unexpected(fd.error());
    *m.fd = *fd;
  }
  std::vector<std::pair<std::string, uint32_t>> numbers;  // name, io_nrs value
  for (const IoSyscall& s : io_syscalls())
    numbers.emplace_back(s.name, static_cast<uint32_t>(s.fd_arg_offset + 1));
  for (const auto& [name, kind] : opening_syscalls())
    numbers.emplace_back(name, static_cast<uint32_t>(kind) << 16 | static_cast<uint32_t>(kArg0 + 1));
  for (const auto& [name, value] : numbers) {
    const long nr = syscall_number(name);
    const uint32_t key = static_cast<uint32_t>(nr);
    if (nr >= 0 && !update(io_nrs_, &key, &value, BPF_ANY))
      return fail(bpf::refusal("bpf(BPF_MAP_UPDATE_ELEM, io numbers)"));
  }
  for (pid_t root : roots) {
    const uint32_t id = static_cast<uint32_t>(root);
    const WatchedValue value{id, 0, 0};
    if (!update(watched_, &id, &value, BPF_ANY))
      return fail(bpf::refusal("bpf(BPF_MAP_UPDATE_ELEM, watched)"));
  }
  const Maps m{watched_, calls_, io_nrs_, pending_, io_, lost_, fdkind_};
  // The fork tracepoint first: a child forked between the two would otherwise go unseen.
  if (auto st = attach_fork(tracefs); !st) return st;
  for (const auto& [name, insns] : {std::pair{"sys_exit", exit_program(m)},
                                    std::pair{"sys_enter", enter_program(m)}}) {
    auto prog = bpf::load_program(BPF_PROG_TYPE_RAW_TRACEPOINT, insns);
    if (!prog) return std::unexpected(prog.error());
    progs_.push_back(*prog);
    bpf_attr r{};
    r.raw_tracepoint.name = reinterpret_cast<uint64_t>(name);
    r.raw_tracepoint.prog_fd = static_cast<uint32_t>(*prog);
    const int link = static_cast<int>(bpf::sys_bpf(BPF_RAW_TRACEPOINT_OPEN, r));
    if (link < 0)
      return fail(bpf::refusal(fmt::format("bpf(BPF_RAW_TRACEPOINT_OPEN, {})", name).c_str()));
    links_.push_back(link);
  }
  return {};
}

Status BpfWatch::attach_fork(const std::string& tracefs) {
  const std::string dir = tracefs + "/events/sched/sched_process_fork";
  std::ifstream id_file(dir + "/id");
  uint64_t id = 0;
  const int child_pid = field_offset(dir + "/format", "child_pid");
  if (!(id_file >> id) || child_pid < 0)
    return fail(fmt::format("no sched:sched_process_fork tracepoint under {}", tracefs));
  const Maps m{watched_, calls_, io_nrs_, pending_, io_, lost_, fdkind_};
  auto prog = bpf::load_program(BPF_PROG_TYPE_TRACEPOINT,
                                fork_program(m, static_cast<int16_t>(child_pid)));
  if (!prog) return std::unexpected(prog.error());
  progs_.push_back(*prog);
  perf_event_attr a{};
  a.type = PERF_TYPE_TRACEPOINT;
  a.size = sizeof a;
  a.config = id;
  a.sample_period = 1;
  // One event is enough (as libbpf does it): the program sits on the tracepoint itself and runs
  // for every fork on every CPU; the event on CPU 0 only holds it there.
  const int fd = static_cast<int>(syscall(SYS_perf_event_open, &a, -1, 0, -1, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0) return fail(bpf::refusal("perf_event_open(sched:sched_process_fork)"));
  links_.push_back(fd);
  if (ioctl(fd, PERF_EVENT_IOC_SET_BPF, *prog) != 0 || ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) != 0)
    return fail(bpf::refusal("ioctl(PERF_EVENT_IOC_SET_BPF, sched_process_fork)"));
  return {};
}

BpfWatch::~BpfWatch() {
  for (int fd : links_) ::close(fd);
  for (int fd : progs_) ::close(fd);
  for (int fd : {watched_, calls_, io_nrs_, pending_, io_, lost_, fdkind_})
    if (fd >= 0) ::close(fd);
}

std::map<pid_t, pid_t> BpfWatch::read_watched() const {
  std::map<pid_t, pid_t> watched;
  for (const auto& k : keys_of(watched_, 4)) {
    WatchedValue value{};
    bpf_attr a{};
    a.map_fd = static_cast<uint32_t>(watched_);
    a.key = reinterpret_cast<uint64_t>(k.data());
    a.value = reinterpret_cast<uint64_t>(&value);
    if (bpf::sys_bpf(BPF_MAP_LOOKUP_ELEM, a) == 0)
      watched[at<pid_t>(k, 0)] = static_cast<pid_t>(value.root);
  }
  return watched;
}

WatchCounts BpfWatch::read() const {
  WatchCounts c;
  c.watched = read_watched();
  for (const auto& k : keys_of(calls_, 8))
    c.calls[{at<pid_t>(k, 0), at<uint32_t>(k, 4)}] = bpf::read_percpu_sum(calls_, k.data(), cpus_);
  for (const auto& k : keys_of(io_, 20)) {
    const auto low = at<int32_t>(k, 12);
    const int64_t result = low < 0 && low >= -4095 ? low : static_cast<int64_t>(at<uint32_t>(k, 12));
    c.io[{at<pid_t>(k, 0), at<uint32_t>(k, 4), at<uint32_t>(k, 8), result,
          static_cast<WatchKind>(at<uint32_t>(k, 16))}] = bpf::read_percpu_sum(io_, k.data(), cpus_);
  }
  for (uint32_t slot : {0u, 1u}) {
    const uint64_t n = bpf::read_percpu_sum(lost_, &slot, cpus_);
    (slot == 0 ? c.lost_calls : c.lost_io) = n;
  }
  return c;
}

void BpfWatch::forget(pid_t id) {
  const auto key = static_cast<uint32_t>(id);
  bpf_attr a{};
  a.map_fd = static_cast<uint32_t>(watched_);
  a.key = reinterpret_cast<uint64_t>(&key);
  bpf::sys_bpf(BPF_MAP_DELETE_ELEM, a);
}

}  // namespace iobench
