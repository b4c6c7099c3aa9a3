// `strace -c` and `perf stat` attached to a process for the span of a session: the classic tools'
// view of the syscalls, beside the in-process kernel counters of the data phase alone.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "util/result.h"

namespace iobench {

struct TracerCounts {
  std::string tool;    // "strace" or "perf"
  uint64_t total = 0;  // every syscall the tool saw
  std::vector<std::pair<std::string, uint64_t>> by_name;
};

class Tracer {
 public:
  // Starts `tool` ("strace" or "perf") on `pid` and returns once it is attached.
  static Result<Tracer> attach(const std::string& tool, pid_t pid, const std::string& out_file);
  Tracer(Tracer&& o) noexcept;
  Tracer& operator=(Tracer&&) = delete;
  ~Tracer();
  // Stops the tool (SIGINT), waits for it and parses what it wrote.
  Result<TracerCounts> detach();

 private:
  Tracer(std::string tool, pid_t tracer, std::string out)
      : tool_(std::move(tool)), pid_(tracer), out_(std::move(out)) {}
  std::string tool_;
  pid_t pid_ = -1;
  std::string out_;
};

// Parsers for the tools' output, exposed for tests.
Result<TracerCounts> parse_strace_summary(const std::string& text);
Result<TracerCounts> parse_perf_stat_csv(const std::string& text);

}  // namespace iobench
