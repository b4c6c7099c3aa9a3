#include "session/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "net/interrupt.h"
#include "probe/probe.h"
#include "util/size.h"

namespace iobench {

std::string progress_text(uint64_t done, uint64_t total, double elapsed_s) {
  const double rate = elapsed_s > 0 ? static_cast<double>(done) / elapsed_s : 0;
  std::string out = fmt::format("{} of {} ({:.0f}%)", format_bytes_human(done),
                                format_bytes_human(total),
                                total ? 100.0 * static_cast<double>(done) / static_cast<double>(total)
                                      : 0.0);
  if (rate > 0) {
    out += fmt::format(", {:.1f} MiB/s", rate / (1 << 20));
    if (done < total) out += fmt::format(", ETA {:.0f} s", static_cast<double>(total - done) / rate);
  }
  return out;
}

ProgressLine::ProgressLine(std::string what, std::string note, bool quiet)
    : what_(std::move(what)), note_(std::move(note)), quiet_(quiet), tty_(isatty(STDERR_FILENO)) {}

void ProgressLine::update(uint64_t done, uint64_t total, double elapsed_s) {
  done_ = done;
  total_ = total;
  elapsed_s_ = elapsed_s;
  // Quiet for the first second (a cached or small payload says nothing), then every 0.25 s on
  // a terminal, every 5 s on a pipe or file.
  if (quiet_ || elapsed_s < 1.0 || (shown_ && elapsed_s - last_s_ < (tty_ ? 0.25 : 5.0))) return;
  last_s_ = elapsed_s;
  shown_ = true;
  fmt::print(stderr, "{}iobench: {}: {}{}", tty_ ? "\r" : "", what_,
             progress_text(done, total, elapsed_s), tty_ ? "\033[K" : "\n");
  std::fflush(stderr);
}

ProgressLine::~ProgressLine() {
  if (!shown_) return;
  const bool complete = done_ >= total_;
  fmt::print(stderr, "{}iobench: {}: {}{}\n", tty_ ? "\r" : "", what_,
             complete ? fmt::format("{} in {:.1f} s", format_bytes_human(total_), elapsed_s_)
                      : "stopped at " + progress_text(done_, total_, elapsed_s_),
             complete && !note_.empty() ? "; " + note_ : std::string(tty_ ? "\033[K" : ""));
  std::fflush(stderr);
}

BuildOptions build_with_progress(ProgressLine& line) {
  BuildOptions b;
  const int64_t start = monotonic_ns();
  b.progress = [&line, start](uint64_t done, uint64_t total) {
    line.update(done, total, static_cast<double>(monotonic_ns() - start) / 1e9);
    return interrupt::received() == 0;
  };
  return b;
}

Result<Payload> load_payload_shown(const PayloadSpec& spec, bool quiet) {
  auto path = payload_cache_path(spec);
  std::string note;
  if (spec.bytes > spec.cache_max)
    note = "not cached: larger than --cache-max " + format_size(spec.cache_max);
  else if (path)
    note = "cached for next time in " + *path;
  ProgressLine line("building payload " + describe_payload(spec), note, quiet);
  return load_payload(spec, build_with_progress(line));
}

}  // namespace iobench
