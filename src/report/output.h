// Report files opened before the first run, so a bad path fails in a second with its reason
// instead of after the benchmark, and a failed or interrupted run leaves an older file intact.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "util/result.h"

namespace iobench {

// The report is written to a temporary file beside the target and renamed onto it; a target
// that exists and is not a regular file (/dev/null, a FIFO) is written in place; "-" is stdout.
// Move-only; the temporary file is removed if nothing was written.
class OutputFile {
 public:
  // `option` names the flag (--json, --csv, --out) in errors.
  static Result<OutputFile> open(const std::string& path, std::string_view option);
  OutputFile() = default;
  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&& other) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();

  bool is_open() const { return fd_ >= 0 || to_stdout_; }
  // Writes everything and puts it in place. One call per file.
  Status write(std::string_view text);

 private:
  void discard();
  std::string option_, path_, temp_;  // temp_ empty: written in place (not a regular file)
  int fd_ = -1;
  bool to_stdout_ = false;
  pid_t owner_ = 0;  // a forked child never removes the parent's temporary file
};

// A command's --json and --csv ("": not asked), both opened before it runs.
struct ReportFiles {
  OutputFile json, csv;
  static Result<ReportFiles> open(const std::string& json_path, const std::string& csv_path);
};

}  // namespace iobench
