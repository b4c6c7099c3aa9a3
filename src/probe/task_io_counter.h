// The kernel's task I/O accounting (/proc/<pid>/io): `syscr` and `syscw` count a process's
// read-family and write-family syscalls — read, readv, pread64, preadv(2); write, writev,
// pwrite64, pwritev(2); sendfile and copy_file_range count in both — over every thread, exited
// ones included, including calls that fail with EAGAIN. The kernel keeps these counts whether or
// not anyone reads them, so counting this way costs nothing per syscall. What it does not see:
// every other syscall (sendto/sendmsg, recvfrom/recvmsg, epoll_wait, io_uring_enter, ...).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "util/result.h"

namespace iobench {

class TaskIoCounter {
 public:
  struct Reading {
    uint64_t reads = 0;   // syscr
    uint64_t writes = 0;  // syscw
  };

  // Opens `path` (empty: $IOBENCH_PROC_IO, else /proc/self/io — the whole process) and reads it
  // once; the error names the path and the refusal.
  static Result<std::unique_ptr<TaskIoCounter>> open(std::string path = {});
  ~TaskIoCounter();
  TaskIoCounter(const TaskIoCounter&) = delete;
  TaskIoCounter& operator=(const TaskIoCounter&) = delete;

  // One pread(2) of the open file. That pread counts in `reads` once it returns, after the
  // kernel formatted the figures it returns: a window's start reading adds one read to the
  // window, its stop reading none.
  Result<Reading> read() const;
  const std::string& path() const { return path_; }

 private:
  TaskIoCounter() = default;
  int fd_ = -1;
  std::string path_;
};

// Parses the text of /proc/<pid>/io; an error names what is missing.
Result<TaskIoCounter::Reading> parse_task_io(std::string_view text);

}  // namespace iobench
