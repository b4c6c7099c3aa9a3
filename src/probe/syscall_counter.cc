#include "probe/syscall_counter.h"

#include <fmt/format.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "probe/bpf_counter.h"
#include "probe/task_io_counter.h"

namespace iobench {
namespace {

bool read_id(const std::string& path, uint64_t& id) {
  std::ifstream in(path);
  return static_cast<bool>(in >> id);
}

int open_tracepoint(uint64_t id, int group) {
  perf_event_attr a{};
  a.size = sizeof a;
  a.type = PERF_TYPE_TRACEPOINT;
  a.config = id;
  a.disabled = group < 0;   // the leader gates the whole group
  a.inherit = true;         // threads created later count too...
  a.inherit_thread = true;  // ...but not forked processes (strace, perf, a loopback server)
  a.read_format = PERF_FORMAT_GROUP;
  int fd = static_cast<int>(syscall(SYS_perf_event_open, &a, 0, -1, group, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0 && errno == EINVAL) {  // before Linux 5.13: no inherit_thread
    a.inherit_thread = false;
    fd = static_cast<int>(syscall(SYS_perf_event_open, &a, 0, -1, group, PERF_FLAG_FD_CLOEXEC));
  }
  return fd;
}

std::string paranoid() {
  std::ifstream in("/proc/sys/kernel/perf_event_paranoid");
  std::string v;
  in >> v;
  return v.empty() ? "?" : v;
}

}  // namespace

const std::vector<std::string>& counted_syscall_names() {
  // Each counter costs ~35 ms when the last one on a tracepoint closes (kernel unregistration),
  // so the list stays to what the engines call.
  static const std::vector<std::string> names = {
      "read",    "write", "readv", "writev",     "sendto",      "recvfrom",      "sendmsg",
      "recvmsg", "poll",  "ppoll", "epoll_wait", "epoll_pwait", "io_uring_enter"};
  return names;
}

std::string find_tracefs() {
  if (const char* env = std::getenv("IOBENCH_TRACEFS"); env && *env) return env;
  for (const char* dir : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
    uint64_t id;
    if (read_id(std::string(dir) + "/events/raw_syscalls/sys_enter/id", id)) return dir;
  }
  return {};
}

SyscallCounter::SyscallCounter(CounterKind kind, std::string tracefs) {
  if (kind == CounterKind::kTaskIo) {
    auto t = TaskIoCounter::open();
    if (t)
      task_io_ = std::move(*t);
    else
      reason_ = "task I/O accounting: " + t.error().message;
    return;
  }
  if (kind != CounterKind::kTracepoints) {
    open_bpf();
    if (bpf_) return;
    if (kind == CounterKind::kBpf) {
      reason_ = bpf_refusal_;
      return;
    }
  }
  open_tracepoints(std::move(tracefs));
  if (leader_ < 0 && kind == CounterKind::kAuto)
    reason_ = fmt::format("bpf: {}; perf tracepoints: {}", bpf_refusal_, reason_);
}

void SyscallCounter::open_bpf() {
  auto b = BpfSyscallCounter::open(getpid());
  if (!b) {
    bpf_refusal_ = b.error().message;
    return;
  }
  bpf_ = std::move(*b);
  for (const std::string& name : counted_syscall_names()) {
    const long nr = syscall_number(name);
    if (nr < 0 || nr >= BpfSyscallCounter::kTotal)
      missing_.push_back(name);
    else
      bpf_slots_.emplace_back(name, nr);
  }
  baseline_.assign(bpf_slots_.size() + 1, 0);
}

SyscallSource SyscallCounter::source() const {
  if (bpf_) return SyscallSource::kBpf;
  if (task_io_) return SyscallSource::kTaskIo;
  return leader_ >= 0 ? SyscallSource::kPerfEvent : SyscallSource::kCounted;
}

void SyscallCounter::open_tracepoints(std::string tracefs) {
  if (tracefs.empty()) tracefs = find_tracefs();
  if (tracefs.empty()) {
    reason_ = "no tracefs with syscall events (mount -t tracefs nodev /sys/kernel/tracing)";
    return;
  }
  uint64_t id = 0;
  const std::string total = tracefs + "/events/raw_syscalls/sys_enter/id";
  if (!read_id(total, id)) {
    reason_ = fmt::format("cannot read {}: {}", total, std::strerror(errno ? errno : ENOENT));
    return;
  }
  leader_ = open_tracepoint(id, -1);
  if (leader_ < 0) {
    reason_ = fmt::format(
        "perf_event_open(raw_syscalls:sys_enter, id {}): {} "
        "(kernel.perf_event_paranoid={})",
        id, std::strerror(errno), paranoid());
    return;
  }
  for (const std::string& name : counted_syscall_names()) {
    // A syscall this kernel has no tracepoint for is skipped and noted, not an error.
    if (!read_id(fmt::format("{}/events/syscalls/sys_enter_{}/id", tracefs, name), id)) {
      missing_.push_back(name);
      continue;
    }
    const int fd = open_tracepoint(id, leader_);
    if (fd < 0) {
      missing_.push_back(name);
      continue;
    }
    members_.push_back(fd);
    names_.push_back(name);
  }
}

SyscallCounter::~SyscallCounter() {
  for (int fd : members_) ::close(fd);
  if (leader_ >= 0) ::close(leader_);
}

namespace {
std::atomic<bool> counter_taken{false};
std::atomic<CounterKind> process_kind{CounterKind::kAuto};
}  // namespace

void set_process_counter_kind(CounterKind kind) { process_kind.store(kind); }

SyscallCounter& process_syscall_counter() {
  // Never destroyed: the kernel closes the descriptors at exit either way.
  static SyscallCounter* counter = new SyscallCounter(process_kind.load());
  return *counter;
}

CounterLease CounterLease::try_take() {
  CounterLease l;
  l.held_ = !counter_taken.exchange(true);
  return l;
}

CounterLease& CounterLease::operator=(CounterLease&& o) noexcept {
  if (this != &o) {
    if (held_) counter_taken.store(false);
    held_ = o.held_;
    o.held_ = false;
  }
  return *this;
}

CounterLease::~CounterLease() {
  if (held_) counter_taken.store(false);
}

void SyscallCounter::arm() {
  if (!bpf_ || bpf_->attached()) return;
  auto st = bpf_->attach();
  arm_error_ = st ? "" : st.error().message;
}

bool SyscallCounter::armed() const { return bpf_ && bpf_->attached(); }

void SyscallCounter::disarm() {
  // Perf tracepoints stay open: they count the threads created after them, so they are opened
  // once, on the main thread, and could not be reopened later from a session's thread.
  if (bpf_) bpf_->detach();
}

void SyscallCounter::start() {
  if (task_io_) {
    task_io_start_ = task_io_->read();
    return;
  }
  if (bpf_) {
    arm();
    // The total last: the bpf() calls reading the other slots fall before the window.
    for (size_t i = 0; i < bpf_slots_.size(); ++i)
      baseline_[i] = bpf_->read(static_cast<uint32_t>(bpf_slots_[i].second));
    baseline_.back() = bpf_->read(BpfSyscallCounter::kTotal);
    return;
  }
  if (leader_ < 0) return;
  ioctl(leader_, PERF_EVENT_IOC_RESET, PERF_IOC_FLAG_GROUP);
  // RESET zeroes the live threads' counts but not those of threads that exited (the kernel
  // folds them into the parent for good): read a baseline, while still disabled, to subtract.
  baseline_.assign(2 + members_.size(), 0);
  if (::read(leader_, baseline_.data(), baseline_.size() * sizeof(uint64_t)) <
      static_cast<ssize_t>(baseline_.size() * sizeof(uint64_t)))
    baseline_.assign(baseline_.size(), 0);
  ioctl(leader_, PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP);
}

KernelSyscalls SyscallCounter::stop_task_io() {
  KernelSyscalls k;
  // Without the start reading there is no window: the counts would be the process's lifetime.
  if (!task_io_start_) {
    k.reason = "at the start of the data phase: " + task_io_start_.error().message;
    return k;
  }
  const auto r = task_io_->read();
  if (!r) {
    k.reason = r.error().message;
    return k;
  }
  k.available = true;
  k.source = SyscallSource::kTaskIo;
  k.coverage =
      "read/write families only (read, readv, pread; write, writev, pwrite): send/recv*, "
      "epoll_wait, io_uring_enter not seen, total = reads + writes";
  // The start reading's own pread counted once it returned: inside the window.
  const uint64_t reads = r->reads - task_io_start_->reads;
  const uint64_t writes = r->writes - task_io_start_->writes;
  const uint64_t data_reads = reads > 0 ? reads - 1 : 0;
  k.total = data_reads + writes;
  if (data_reads > 0) k.by_name.emplace_back("read", data_reads);
  if (writes > 0) k.by_name.emplace_back("write", writes);
  return k;
}

KernelSyscalls SyscallCounter::stop_bpf() {
  KernelSyscalls k;
  k.missing = missing_;
  if (!bpf_->attached()) {
    k.reason = "bpf program not attached: " + arm_error_;
    return k;
  }
  k.available = true;
  k.source = SyscallSource::kBpf;
  // The total first, so only the bpf() call reading it falls inside the window: taken out.
  const uint64_t total = bpf_->read(BpfSyscallCounter::kTotal) - baseline_.back();
  k.total = total > 0 ? total - 1 : 0;
  for (size_t i = 0; i < bpf_slots_.size(); ++i) {
    const uint64_t v = bpf_->read(static_cast<uint32_t>(bpf_slots_[i].second)) - baseline_[i];
    if (v > 0) k.by_name.emplace_back(bpf_slots_[i].first, v);
  }
  return k;
}

KernelSyscalls SyscallCounter::stop() {
  if (bpf_) return stop_bpf();
  if (task_io_) return stop_task_io();
  KernelSyscalls k;
  k.missing = missing_;
  if (leader_ < 0) {
    k.reason = reason_;
    return k;
  }
  ioctl(leader_, PERF_EVENT_IOC_DISABLE, PERF_IOC_FLAG_GROUP);
  // PERF_FORMAT_GROUP: nr, then one value per event in group order (leader first).
  std::vector<uint64_t> buf(2 + members_.size());
  const ssize_t n = ::read(leader_, buf.data(), buf.size() * sizeof(uint64_t));
  if (n < static_cast<ssize_t>(sizeof(uint64_t) * 2) || buf[0] != 1 + members_.size()) {
    k.reason =
        fmt::format("reading the counters failed: {}", n < 0 ? std::strerror(errno) : "short read");
    return k;
  }
  k.available = true;
  k.source = SyscallSource::kPerfEvent;
  if (!bpf_refusal_.empty()) k.fallback = "bpf unavailable (" + bpf_refusal_ + ")";
  if (baseline_.size() == buf.size())
    for (size_t i = 1; i < buf.size(); ++i) buf[i] -= std::min(buf[i], baseline_[i]);
  // The disabling ioctl itself entered the kernel while counting: take it out of the total.
  k.total = buf[1] > 0 ? buf[1] - 1 : 0;
  for (size_t i = 0; i < members_.size(); ++i) {
    uint64_t v = buf[2 + i];
    if (names_[i] == "ioctl" && v > 0) --v;
    if (v > 0) k.by_name.emplace_back(names_[i], v);
  }
  return k;
}

}  // namespace iobench
