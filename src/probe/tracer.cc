#include "probe/tracer.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "probe/syscall_counter.h"

namespace iobench {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// strace: the tracee's TracerPid turns non-zero once ptrace has attached.
bool strace_attached(pid_t target) {
  std::ifstream in(fmt::format("/proc/{}/status", target));
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("TracerPid:")) return std::stol(line.substr(10)) != 0;
  return false;
}

// perf stat: its counters exist once it holds perf_event descriptors — after exec, since
// between fork and exec the child still holds ours.
bool perf_attached(pid_t perf) {
  std::ifstream comm(fmt::format("/proc/{}/comm", perf));
  std::string name;
  if (!std::getline(comm, name) || name != "perf") return false;
  const std::string dir = fmt::format("/proc/{}/fd", perf);
  DIR* d = opendir(dir.c_str());
  if (!d) return false;
  bool found = false;
  while (dirent* e = readdir(d)) {
    char target[128] = {};
    const std::string link = dir + "/" + e->d_name;
    if (readlink(link.c_str(), target, sizeof target - 1) > 0 && std::strstr(target, "perf_event"))
      found = true;
  }
  closedir(d);
  return found;
}

std::vector<std::string> perf_events() {
  std::vector<std::string> ev{"raw_syscalls:sys_enter"};
  for (const auto& n : counted_syscall_names()) ev.push_back("syscalls:sys_enter_" + n);
  return ev;
}

// The forked child: the tool with stdio on /dev/null and, for perf, its control pipe's read end
// on descriptor 3 and its acknowledgement pipe's write end on 4. Never returns.
[[noreturn]] void exec_tool(std::vector<std::string>& args, int ctl_read, int ack_write) {
  const int devnull = ::open("/dev/null", O_RDWR);
  dup2(devnull, STDIN_FILENO);
  dup2(devnull, STDOUT_FILENO);
  dup2(devnull, STDERR_FILENO);
  if (ctl_read >= 0) {
    // Via high descriptors first: a pipe end may itself be 3 or 4 (or /dev/null may be).
    const int c = fcntl(ctl_read, F_DUPFD, 10);
    const int a = fcntl(ack_write, F_DUPFD, 10);
    dup2(c, 3);  // dup2 to another number clears close-on-exec on the copy
    dup2(a, 4);
  }
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  _exit(127);
}

// Tells an attached `perf stat -D -1 --control` to enable its counters; true once it acked.
bool enable_perf(int ctl_write, int ack_read) {
  const bool sent = ::write(ctl_write, "enable\n", 7) == 7;
  char reply[8] = {};
  pollfd p{ack_read, POLLIN, 0};
  return sent && ::poll(&p, 1, 5000) == 1 && ::read(ack_read, reply, 4) > 0;
}

}  // namespace

Result<Tracer> Tracer::attach(TracerTool tool, pid_t pid, const std::string& out_file) {
  const std::string_view name = name_of(tool);
  std::vector<std::string> args;
  const std::string target = std::to_string(pid);
  // perf stat starts with its counters disabled and enables them when told, acknowledging on a
  // second pipe: only then is every syscall of the session counted (seeing its descriptors is
  // not enough — it opens them before it enables them).
  int ctl[2] = {-1, -1}, ack[2] = {-1, -1};
  if (tool == TracerTool::kStrace) {
    args = {"strace", "-f", "-c", "-o", out_file, "-p", target};
  } else {
    std::string events;
    for (const auto& e : perf_events()) events += (events.empty() ? "" : ",") + e;
    if (pipe2(ctl, O_CLOEXEC) != 0 || pipe2(ack, O_CLOEXEC) != 0)
      return fail(fmt::format("pipe: {}", std::strerror(errno)));
    args = {"perf", "stat", "-x,",       "-e",     events, "-o",  out_file,
            "-D",   "-1",   "--control", "fd:3,4", "-p",   target};
  }
  auto close_pipes = [&] {
    for (int fd : {ctl[0], ctl[1], ack[0], ack[1]})
      if (fd >= 0) ::close(fd);
  };
  const pid_t child = fork();
  if (child < 0) {
    close_pipes();
    return fail(fmt::format("fork: {}", std::strerror(errno)));
  }
  if (child == 0) exec_tool(args, ctl[0], ack[1]);
  if (ctl[0] >= 0) {
    ::close(ctl[0]);
    ::close(ack[1]);
    ctl[0] = ack[1] = -1;
  }
  Tracer t(tool, child, out_file);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  auto exited = [&]() -> std::optional<Error> {
    int status = 0;
    if (waitpid(child, &status, WNOHANG) != child) return std::nullopt;
    t.pid_ = -1;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
      return Error{fmt::format("--syscalls {}: {} not found on PATH", name, name)};
    return Error{
        fmt::format("--syscalls {}: {} exited before attaching (status {})", name, name, status)};
  };
  while (!(tool == TracerTool::kStrace ? strace_attached(pid) : perf_attached(child))) {
    if (auto e = exited()) {
      close_pipes();
      return std::unexpected(*e);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      close_pipes();
      return fail(fmt::format("--syscalls {}: {} did not attach within 5 s", name, name));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const bool acked = tool != TracerTool::kPerf || enable_perf(ctl[1], ack[0]);
  close_pipes();
  if (!acked) return fail("--syscalls perf: perf stat did not acknowledge 'enable'");
  return t;
}

Tracer::Tracer(Tracer&& o) noexcept
    : tool_(o.tool_), pid_(std::exchange(o.pid_, -1)), out_(std::move(o.out_)) {}

Tracer::~Tracer() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

Result<TracerCounts> Tracer::detach() {
  if (pid_ <= 0) return fail("tracer not running");
  kill(pid_, SIGINT);  // both tools write their summary on SIGINT
  int status = 0;
  waitpid(std::exchange(pid_, -1), &status, 0);
  const std::string text = read_file(out_);
  return tool_ == TracerTool::kStrace ? parse_strace_summary(text) : parse_perf_stat_csv(text);
}

Result<TracerCounts> parse_strace_summary(const std::string& text) {
  // % time     seconds  usecs/call     calls    errors syscall
  // ------ ----------- ----------- --------- --------- ----------------
  //  21.24    0.001701          25        68           write
  // ------ ----------- ----------- --------- --------- ----------------
  // 100.00    0.008007          13       584        13 total
  TracerCounts c{TracerTool::kStrace, 0, {}};
  std::istringstream in(text);
  std::string line;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line.starts_with("------")) {
      in_table = true;
      continue;
    }
    if (!in_table || line.empty()) continue;
    std::istringstream f(line);
    std::vector<std::string> tok;
    for (std::string t; f >> t;) tok.push_back(t);
    if (tok.size() < 5) continue;
    uint64_t calls = 0;
    const char* end = tok[3].data() + tok[3].size();
    auto [ptr, ec] = std::from_chars(tok[3].data(), end, calls);
    if (ec != std::errc{} || ptr != end)
      return fail(fmt::format("unexpected strace -c line: '{}'", line));
    if (tok.back() == "total")
      c.total = calls;
    else
      c.by_name.emplace_back(tok.back(), calls);
  }
  if (!in_table && text.find("% time") == std::string::npos && !text.empty())
    return fail("strace -c output has no summary table");
  if (c.total == 0)
    for (const auto& [n, v] : c.by_name) c.total += v;
  return c;
}

Result<TracerCounts> parse_perf_stat_csv(const std::string& text) {
  // value,unit,event,run-time,percent,... ; "<not counted>" when the task never ran.
  TracerCounts c{TracerTool::kPerf, 0, {}};
  std::istringstream in(text);
  std::string line;
  bool any = false;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cols;
    std::istringstream f(line);
    for (std::string col; std::getline(f, col, ',');) cols.push_back(col);
    if (cols.size() < 3) continue;
    any = true;
    uint64_t v = 0;
    if (!cols[0].starts_with("<")) {
      const char* end = cols[0].data() + cols[0].size();
      auto [ptr, ec] = std::from_chars(cols[0].data(), end, v);
      if (ec != std::errc{} || ptr != end)
        return fail(fmt::format("unexpected perf stat line: '{}'", line));
    }
    const std::string& event = cols[2];
    if (event == "raw_syscalls:sys_enter") {
      c.total = v;
    } else if (event.starts_with("syscalls:sys_enter_")) {
      if (v > 0) c.by_name.emplace_back(event.substr(19), v);
    }
  }
  if (!any) return fail("perf stat wrote no counts");
  return c;
}

}  // namespace iobench
