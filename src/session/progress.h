// What a person sees while a payload is built: a line on stderr once building has taken a
// second (size so far, rate, ETA, where the result is cached), redrawn in place on a terminal,
// a line every few seconds elsewhere, nothing with -q. Ctrl-C stops the build.
#pragma once

#include <cstdint>
#include <string>

#include "payload/payload.h"

namespace iobench {

class ProgressLine {
 public:
  // `what`: "building payload resp-v2 seed=1 level=3"; `note`: said on the last line.
  ProgressLine(std::string what, std::string note, bool quiet);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  void update(uint64_t done, uint64_t total, double elapsed_s);

 private:
  std::string what_, note_;
  bool quiet_, tty_;
  bool shown_ = false;
  double last_s_ = 0;
  uint64_t done_ = 0, total_ = 0;
  double elapsed_s_ = 0;
};

// "412.0 MiB of 1.0 GiB (40%), 95.3 MiB/s, ETA 6 s"
std::string progress_text(uint64_t done, uint64_t total, double elapsed_s);

// Build options for a payload built here: all cores, this line, stopped by SIGINT/SIGTERM.
BuildOptions build_with_progress(ProgressLine& line);

// The payload `spec` from the cache, or built with a progress line (unless `quiet`).
Result<Payload> load_payload_shown(const PayloadSpec& spec, bool quiet);

}  // namespace iobench
