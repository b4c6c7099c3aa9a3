// The transport seam: engines and the control channel move bytes through a Stream, which is a
// plain socket today and an OpenSSL session later; "would block" is a state, not an error.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace iobench {

struct IoResult {
  enum class State { kOk, kEof, kWouldBlock, kTimedOut, kError };
  State state = State::kOk;
  size_t bytes = 0;  // valid for kOk
  int err = 0;       // errno for kError

  bool ok() const { return state == State::kOk; }
};

class Stream {
 public:
  virtual ~Stream() = default;
  // One call = one attempt (a syscall for a plain socket); EINTR is retried inside.
  virtual IoResult read(std::span<std::byte> buf) = 0;
  virtual IoResult write(std::span<const std::byte> buf) = 0;
  virtual int fd() const = 0;
  virtual std::string_view kind() const = 0;  // "tcp"
};

// Plain socket: read(2)/write(2) on the descriptor, which the Stream does not own.
class FdStream final : public Stream {
 public:
  explicit FdStream(int fd) : fd_(fd) {}
  IoResult read(std::span<std::byte> buf) override;
  IoResult write(std::span<const std::byte> buf) override;
  int fd() const override { return fd_; }
  std::string_view kind() const override { return "tcp"; }

 private:
  int fd_;
};

// Human text for a failed IoResult: "connection reset by peer", "timed out", "peer closed".
std::string describe(const IoResult& r);

}  // namespace iobench
