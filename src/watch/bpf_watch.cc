#include "watch/bpf_watch.h"

#include <fmt/format.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <sstream>

#include "probe/bpf_asm.h"
#include "probe/bpf_counter.h"
#include "watch/bpf_loop_programs.h"
#include "watch/bpf_watch_programs.h"

namespace iobench {
namespace {

using namespace watch_bpf;  // NOLINT(google-build-using-namespace): the programs' own types

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
                                                 const std::string& tracefs, int64_t large_write) {
  if (!pt_regs_known()) return fail("watch reads descriptors from pt_regs: known for x86_64 and aarch64");
  std::unique_ptr<BpfWatch> w(new BpfWatch);
  if (auto st = w->load(roots, tracefs); !st) return std::unexpected(st.error());
  if (large_write > 0)
    if (auto st = w->load_loop(large_write); !st) return std::unexpected(st.error());
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
    numbers.emplace_back(name, static_cast<uint32_t>(kind) << 16 | static_cast<uint32_t>(first_arg_offset() + 1));
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
  if (auto st = attach_raw("sys_exit", exit_program(m)); !st) return st;
  return attach_raw("sys_enter", enter_program(m));
}

Status BpfWatch::attach_raw(const char* tracepoint, const std::vector<bpf_insn>& insns) {
  auto prog = bpf::load_program(BPF_PROG_TYPE_RAW_TRACEPOINT, insns);
  if (!prog) return std::unexpected(prog.error());
  progs_.push_back(*prog);
  bpf_attr r{};
  r.raw_tracepoint.name = reinterpret_cast<uint64_t>(tracepoint);
  r.raw_tracepoint.prog_fd = static_cast<uint32_t>(*prog);
  const int link = static_cast<int>(bpf::sys_bpf(BPF_RAW_TRACEPOINT_OPEN, r));
  if (link < 0)
    return fail(bpf::refusal(fmt::format("bpf(BPF_RAW_TRACEPOINT_OPEN, {})", tracepoint).c_str()));
  links_.push_back(link);
  return {};
}

// The event loop's programs beside the watch's: the iteration ends at sys_enter (a wait) before
// its start is taken at sys_exit, whichever order the two attach in.
Status BpfWatch::load_loop(int64_t large_write) {
  auto loop = bpf::create_map(BPF_MAP_TYPE_LRU_HASH, 4, 24, 16384);
  if (!loop) return std::unexpected(loop.error());
  loop_ = *loop;
  auto hist = bpf::create_map(BPF_MAP_TYPE_PERCPU_ARRAY, 4, kLoopSlots * 8, kLoopClasses);
  if (!hist) return std::unexpected(hist.error());
  hist_ = *hist;
  LoopCalls calls;
  for (const char* name : {"epoll_wait", "epoll_pwait", "epoll_pwait2"})
    if (const long nr = syscall_number(name); nr >= 0) calls.waits.push_back(nr);
  for (const char* name : {"write", "writev", "sendto", "sendmsg"})
    if (const long nr = syscall_number(name); nr >= 0) calls.writes.push_back(nr);
  const LoopMaps m{watched_, loop_, hist_};
  if (auto st = attach_raw("sys_exit", loop_exit_program(m, static_cast<int32_t>(large_write))); !st)
    return st;
  return attach_raw("sys_enter", loop_enter_program(m, calls));
}

void BpfWatch::read_loop(WatchCounts& c) const {
  if (hist_ < 0) return;
  std::vector<uint64_t> values(cpus_ * kLoopSlots);
  for (uint32_t cls = 0; cls < kLoopClasses; ++cls) {
    std::vector<uint64_t> sum(kLoopSlots, 0);
    bpf_attr a{};
    a.map_fd = static_cast<uint32_t>(hist_);
    a.key = reinterpret_cast<uint64_t>(&cls);
    a.value = reinterpret_cast<uint64_t>(values.data());
    if (bpf::sys_bpf(BPF_MAP_LOOKUP_ELEM, a) == 0)
      for (size_t cpu = 0; cpu < cpus_; ++cpu)
        for (uint32_t i = 0; i < kLoopSlots; ++i) sum[i] += values[cpu * kLoopSlots + i];
    uint64_t max = 0;  // the largest of the CPUs' maxima, not their sum
    for (size_t cpu = 0; cpu < cpus_; ++cpu) max = std::max(max, values[cpu * kLoopSlots + kLoopMaxSlot]);
    std::map<uint32_t, uint64_t> counts;
    for (uint32_t i = 0; i < kLoopSumSlot; ++i)
      if (sum[i]) counts[i] = sum[i];
    c.loop.push_back({LogLinearHistogram::from_buckets(counts, max), sum[kLoopSumSlot]});
  }
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
  for (int fd : {watched_, calls_, io_nrs_, pending_, io_, lost_, fdkind_, loop_, hist_})
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
  read_loop(c);
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
