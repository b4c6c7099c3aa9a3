// `strace -c` and `perf stat` attached to a process for the span of a session: the classic tools'
// view of the syscalls, beside the in-process kernel counters of the data phase alone.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <string_view>
#include <string>
#include <utility>
#include <vector>

#include "util/names.h"
#include "util/result.h"

namespace iobench {

// The classic tool attached to a side: `strace -f -c` or `perf stat` on the syscall tracepoints.
enum class TracerTool { kStrace, kPerf };
template <>
struct Names<TracerTool> {
  static constexpr std::array table{std::pair{TracerTool::kStrace, std::string_view{"strace"}},
                                    std::pair{TracerTool::kPerf, std::string_view{"perf"}}};
};

struct TracerCounts {
  TracerTool tool = TracerTool::kStrace;
  uint64_t total = 0;  // every syscall the tool saw
  std::vector<std::pair<std::string, uint64_t>> by_name;
};

class Tracer {
 public:
  // Starts `tool` on `pid` and returns once it is attached.
  static Result<Tracer> attach(TracerTool tool, pid_t pid, const std::string& out_file);
  Tracer(Tracer&& o) noexcept;
  Tracer& operator=(Tracer&&) = delete;
  ~Tracer();
  // Stops the tool (SIGINT), waits for it and parses what it wrote.
  Result<TracerCounts> detach();

 private:
  Tracer(TracerTool tool, pid_t tracer, std::string out)
      : tool_(tool), pid_(tracer), out_(std::move(out)) {}
  TracerTool tool_;
  pid_t pid_ = -1;
  std::string out_;
};

// Parsers for the tools' output, exposed for tests.
Result<TracerCounts> parse_strace_summary(const std::string& text);
Result<TracerCounts> parse_perf_stat_csv(const std::string& text);

}  // namespace iobench
