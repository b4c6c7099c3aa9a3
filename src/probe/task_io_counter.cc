#include "probe/task_io_counter.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>

namespace iobench {

Result<TaskIoCounter::Reading> parse_task_io(std::string_view text) {
  TaskIoCounter::Reading r;
  bool have_r = false, have_w = false;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    const size_t colon = line.find(": ");
    if (colon == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, colon), value = line.substr(colon + 2);
    uint64_t* field = key == "syscr" ? &r.reads : key == "syscw" ? &r.writes : nullptr;
    if (!field) continue;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), *field);
    if (ec != std::errc{} || end != value.data() + value.size())
      return fail(fmt::format("bad {} value '{}'", key, value));
    (field == &r.reads ? have_r : have_w) = true;
  }
  if (!have_r || !have_w) return fail("no syscr/syscw lines (kernel without task I/O accounting)");
  return r;
}

Result<std::unique_ptr<TaskIoCounter>> TaskIoCounter::open(std::string path) {
  if (path.empty()) {
    const char* env = std::getenv("IOBENCH_PROC_IO");
    path = env && *env ? env : "/proc/self/io";
  }
  std::unique_ptr<TaskIoCounter> c(new TaskIoCounter);
  c->path_ = path;
  // /proc/self resolves now, to this process: the descriptor keeps reading it from any thread.
  c->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (c->fd_ < 0) return fail(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  if (auto r = c->read(); !r) return std::unexpected(r.error());
  return c;
}

TaskIoCounter::~TaskIoCounter() {
  if (fd_ >= 0) ::close(fd_);
}

Result<TaskIoCounter::Reading> TaskIoCounter::read() const {
  char buf[512];
  const ssize_t n = ::pread(fd_, buf, sizeof buf, 0);
  if (n < 0) return fail(fmt::format("cannot read {}: {}", path_, std::strerror(errno)));
  auto r = parse_task_io({buf, static_cast<size_t>(n)});
  if (!r) return fail(fmt::format("{}: {}", path_, r.error().message));
  return r;
}

}  // namespace iobench
