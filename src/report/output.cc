#include "report/output.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

namespace iobench {

Result<OutputFile> OutputFile::open(const std::string& path, std::string_view option) {
  OutputFile f;
  f.option_ = option;
  f.path_ = path;
  f.owner_ = getpid();
  if (path == "-") {
    f.to_stdout_ = true;
    return f;
  }
  if (path.empty()) return fail(fmt::format("invalid {} '': empty path", option));
  auto cannot_write = [&] {
    return fail(fmt::format("cannot write {} '{}': {}", option, path, std::strerror(errno)));
  };
  struct stat st {};
  const bool exists = stat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode))
    return fail(fmt::format("cannot write {} '{}': it is a directory", option, path));
  if (exists && !S_ISREG(st.st_mode)) {
    // /dev/null, a FIFO, a terminal: written in place, as `> PATH` would. A rename would put a
    // regular file where the device was (as root, /dev/null itself).
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return cannot_write();
    f.fd_ = fd;
    return f;
  }
  // The temporary file lives in the target's directory, so the final rename stays on one file
  // system; its creation proves the directory exists and is writable.
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  std::string temp = (dir == "." ? std::string() : dir) + "." + base + ".XXXXXX";
  std::vector<char> name(temp.begin(), temp.end());
  name.push_back('\0');
  const int fd = mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) return cannot_write();
  fchmod(fd, 0644);
  f.fd_ = fd;
  f.temp_ = name.data();
  return f;
}

OutputFile::OutputFile(OutputFile&& other) noexcept { *this = std::move(other); }

OutputFile& OutputFile::operator=(OutputFile&& other) noexcept {
  if (this != &other) {
    discard();
    option_ = std::move(other.option_);
    path_ = std::move(other.path_);
    temp_ = std::move(other.temp_);
    fd_ = std::exchange(other.fd_, -1);
    to_stdout_ = std::exchange(other.to_stdout_, false);
    owner_ = other.owner_;
  }
  return *this;
}

OutputFile::~OutputFile() { discard(); }

void OutputFile::discard() {
  if (fd_ < 0) return;
  close(fd_);
  fd_ = -1;
  if (owner_ == getpid() && !temp_.empty()) unlink(temp_.c_str());
}

Status OutputFile::write(std::string_view text) {
  if (to_stdout_) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return {};
  }
  if (fd_ < 0) return fail(fmt::format("{} '{}': written already", option_, path_));
  auto failed = [&](const char* what) {
    const std::string why = std::strerror(errno);
    discard();
    return fail(fmt::format("cannot write {} '{}': {}: {}", option_, path_, what, why));
  };
  while (!text.empty()) {
    const ssize_t n = ::write(fd_, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return failed("write");
    text.remove_prefix(static_cast<size_t>(n));
  }
  if (!temp_.empty() && rename(temp_.c_str(), path_.c_str()) != 0) return failed("rename");
  close(fd_);
  fd_ = -1;
  return {};
}

Result<ReportFiles> ReportFiles::open(const std::string& json_path, const std::string& csv_path) {
  ReportFiles files;
  for (auto [path, file, option] : {std::tuple{&json_path, &files.json, "--json"},
                                    {&csv_path, &files.csv, "--csv"}}) {
    if (path->empty()) continue;
    auto f = OutputFile::open(*path, option);
    if (!f) return std::unexpected(f.error());
    *file = std::move(*f);
  }
  return files;
}

}  // namespace iobench
