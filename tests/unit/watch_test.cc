// iobench watch: the kernel's counts of a program whose syscalls are known (exact counts and
// sizes, a child forked after the watch began), and the report built from counts.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>

#include "probe/syscall_counter.h"
#include "watch/bpf_watch.h"
#include "watch/watch_report.h"

namespace iobench {
namespace {

constexpr int kUnusedFd = 999;

// The watched program: waits for "go", then makes exactly these calls and exits.
[[noreturn]] void known_program(int go, int devnull, int sock_a, int sock_b) {
  char c = 0;
  if (::read(go, &c, 1) != 1) _exit(3);
  std::array<char, 16384> buf{};
  for (int i = 0; i < 2; ++i) (void)!::write(sock_a, buf.data(), 16384);
  for (int i = 0; i < 3; ++i) (void)!::write(devnull, buf.data(), 100);
  for (int i = 0; i < 2; ++i) (void)!::read(sock_b, buf.data(), 4096);
  (void)!::write(kUnusedFd, buf.data(), 1);  // EBADF
  int made[2];  // made while watched: the kernel side knows what they are
  if (pipe(made) != 0) _exit(4);
  (void)!::write(made[1], buf.data(), 50);
  const int file = open("/dev/null", O_WRONLY);
  (void)!::write(file, buf.data(), 9);
  const pid_t child = fork();  // after the watch began: watched from its first instruction
  if (child == 0) {
    for (int i = 0; i < 5; ++i) (void)!::write(devnull, buf.data(), 7);
    (void)!::write(made[1], buf.data(), 2);  // inherited: its kind is its parent's
    _exit(0);
  }
  waitpid(child, nullptr, 0);
  _exit(0);
}

TEST(Watch, CountsAKnownProgramAndTheChildItForks) {
#if defined(__SANITIZE_THREAD__)
  // Exact counts of a forked child's calls: ThreadSanitizer's runtime adds calls and a process of
  // its own (seen: a ninth write, a second child) to what the watch rightly counts.
  GTEST_SKIP() << "ThreadSanitizer's runtime makes calls and forks the exact counts would include";
#endif
  const std::string tracefs = find_tracefs();
  int go[2], sv[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  const int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) known_program(go[0], devnull, sv[0], sv[1]);
  auto w = BpfWatch::open({pid}, tracefs);
  if (!w) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    // Only a missing privilege is a reason to skip: a verifier refusal is a bug.
    ASSERT_NE(w.error().message.find("needs root"), std::string::npos) << w.error().message;
    GTEST_SKIP() << "eBPF refused here: " << w.error().message;
  }
  ASSERT_EQ(::write(go[1], "g", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const WatchCounts c = (*w)->read();
  auto io = [&](pid_t p, int fd, long nr, int64_t result, WatchKind made = WatchKind::kBefore) {
    const auto it =
        c.io.find({p, static_cast<uint32_t>(fd), static_cast<uint32_t>(nr), result, made});
    return it == c.io.end() ? uint64_t{0} : it->second;
  };
  EXPECT_EQ(io(pid, sv[0], SYS_write, 16384), 2u);
  EXPECT_EQ(io(pid, devnull, SYS_write, 100), 3u);
  EXPECT_EQ(io(pid, sv[1], SYS_read, 4096), 2u);
  EXPECT_EQ(io(pid, kUnusedFd, SYS_write, -EBADF), 1u);
  EXPECT_EQ(c.calls.at({pid, static_cast<uint32_t>(SYS_write)}), 8u);
  // Results counted with what their descriptor was made as, when made while watched.
  auto kind_of_write = [&](pid_t p, int64_t size) {
    for (const auto& [key, n] : c.io)
      if (std::get<0>(key) == p && std::get<2>(key) == SYS_write && std::get<3>(key) == size)
        return std::get<4>(key);
    return static_cast<WatchKind>(99);
  };
  EXPECT_EQ(kind_of_write(pid, 50), WatchKind::kPipe);
  EXPECT_EQ(kind_of_write(pid, 9), WatchKind::kFile);
  EXPECT_EQ(kind_of_write(pid, 100), WatchKind::kBefore);
  // The child: one watched id besides the program, rooted at it, with its five writes.
  pid_t child = 0;
  for (const auto& [id, root] : c.watched)
    if (id != pid) {
      EXPECT_EQ(child, 0) << "a second child " << id;
      EXPECT_EQ(root, pid);
      child = id;
    }
  ASSERT_NE(child, 0);
  EXPECT_EQ(io(child, devnull, SYS_write, 7), 5u);
  EXPECT_EQ(kind_of_write(child, 2), WatchKind::kPipe);
  EXPECT_EQ(c.calls.at({child, static_cast<uint32_t>(SYS_write)}), 6u);
  EXPECT_EQ(c.lost_calls + c.lost_io, 0u);
  for (int fd : {go[0], go[1], sv[0], sv[1], devnull}) close(fd);
}

// Counts as the kernel would give them: a root (pid 10) writing 16K and a tail to a TCP socket,
// reading a file; a child (pid 11) it forked writing to a pipe and dying between two samples.
WatchCounts sample_counts() {
  WatchCounts c;
  c.watched = {{10, 10}, {11, 10}};
  const auto w = static_cast<uint32_t>(SYS_write), r = static_cast<uint32_t>(SYS_read);
  c.calls = {{{10, w}, 12}, {{10, r}, 4}, {{10, 9999}, 3}, {{11, w}, 2}};
  const auto before = WatchKind::kBefore;
  c.io = {{{10, 5, w, 16384, before}, 5}, {{10, 5, w, 11, before}, 4},
          {{10, 5, w, 3, before}, 1},     {{10, 5, w, -EAGAIN, before}, 2},
          {{10, 7, r, 16384, before}, 3}, {{10, 7, r, 0, before}, 1},
          {{11, 9, w, 65536, WatchKind::kPipe}, 2}};
  return c;
}

TEST(WatchReport, GroupsByProcessKindAndDirection) {
  // The child's pipe was made while watched (the kernel says so); no sample saw it.
  const std::map<pid_t, std::map<int, std::string>> kinds = {{10, {{5, "tcp"}, {7, "file"}}}};
  std::map<pid_t, ProcessCpuSamples> cpu;
  ProcStat first, last;
  first.comm = last.comm = "valkey-server";
  first.tgid = last.tgid = 10;
  first.utime = 100, last.utime = 150, first.stime = 10, last.stime = 30;
  first.cutime = 5, last.cutime = 205;
  first.cpu_ns = 1'000'000'000, last.cpu_ns = 1'700'000'000;
  cpu[10] = {first, last, true};
  const auto ps = watch_processes(sample_counts(), kinds, cpu, {10}, 100);
  ASSERT_EQ(ps.size(), 2u);
  const WatchProcess& root = ps[0];
  EXPECT_EQ(root.pid, 10);
  EXPECT_DOUBLE_EQ(root.cpu_s, 0.7);  // the CPU clock, exact
  EXPECT_TRUE(root.cpu_complete);
  EXPECT_DOUBLE_EQ(root.cpu_user_s, 0.5);
  EXPECT_DOUBLE_EQ(root.cpu_sys_s, 0.2);
  EXPECT_DOUBLE_EQ(root.reaped_children_cpu_s, 2.0);
  EXPECT_EQ(root.syscalls_total, 19u);
  EXPECT_EQ(root.syscalls.back(), (std::pair<std::string, uint64_t>{"other", 3}));
  ASSERT_EQ(root.io.size(), 2u);
  const WatchIo& tcp = root.io[0];
  EXPECT_EQ(tcp.kind, "tcp");
  EXPECT_EQ(tcp.family, "write");
  EXPECT_EQ(tcp.calls, 12u);
  EXPECT_EQ(tcp.errors, 2u);
  EXPECT_EQ(tcp.bytes, 5u * 16384 + 4 * 11 + 3);
  const auto top = top_sizes(tcp, 0.7, 8);  // 16384 (5 of 12) then 11 (4): 9 of 12 calls
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0], (std::pair<int64_t, uint64_t>{16384, 5}));
  EXPECT_EQ(top[1], (std::pair<int64_t, uint64_t>{11, 4}));
  const auto hist = size_histogram(tcp);  // errors left out
  EXPECT_EQ(hist, (std::map<uint64_t, uint64_t>{{2, 1}, {8, 4}, {16384, 5}}));
  EXPECT_EQ(root.io[1].kind, "file");
  EXPECT_EQ(root.io[1].zero, 1u);
  const WatchProcess& child = ps[1];
  EXPECT_EQ(child.pid, 11);
  EXPECT_EQ(child.root, 10);
  EXPECT_EQ(child.comm, "valkey-server");  // never sampled: its parent's name
  EXPECT_FALSE(child.cpu_complete);
  ASSERT_EQ(child.io.size(), 1u);
  EXPECT_EQ(child.io[0].kind, "pipe");
  EXPECT_EQ(child.io[0].bytes, 2u * 65536);
}

TEST(WatchReport, JsonAndCsvCarryEveryProcess) {
  WatchReport r;
  r.roots = {10};
  r.duration_s = 1.5;
  r.ended_by = "pid 10 exited";
  r.sample_interval_s = 0.1;
  r.processes = watch_processes(sample_counts(), {}, {}, {10}, 100);
  const auto j = watch_json(r);
  EXPECT_EQ(j["kind"], "watch");
  ASSERT_EQ(j["watch"]["processes"].size(), 2u);
  EXPECT_EQ(j["watch"]["processes"][0]["io"][0]["fd_kind"], "unknown");
  EXPECT_TRUE(j["sources"].contains("cpu") && j["sources"].contains("children"));
  const std::string csv = watch_csv(r);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 3);  // header, root's 2, child's 1
  EXPECT_NE(csv.find("16384:5 11:4"), std::string::npos) << csv;
}

}  // namespace
}  // namespace iobench
