// The transport seam: engines and the control channel move bytes through a Stream, which is a
// plain socket or an OpenSSL session (tls/); "would block" is a state, not an error.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "util/result.h"

namespace iobench {

struct IoResult {
  enum class State { kOk, kEof, kWouldBlock, kTimedOut, kError };
  State state = State::kOk;
  size_t bytes = 0;  // valid for kOk
  int err = 0;       // errno for kError (0 when the stream has its own error text)

  bool ok() const { return state == State::kOk; }
};

// What happened underneath the Stream's calls: the syscalls it issued and, for TLS, the records.
struct StreamCounters {
  uint64_t sys_reads = 0;
  uint64_t sys_writes = 0;
  uint64_t records_in = 0;
  uint64_t records_out = 0;
};

StreamCounters operator-(const StreamCounters& a, const StreamCounters& b);

class Stream {
 public:
  virtual ~Stream() = default;
  // One call = one attempt (a syscall for a plain socket, an SSL_read/SSL_write for TLS).
  virtual IoResult read(std::span<std::byte> buf) = 0;
  virtual IoResult write(std::span<const std::byte> buf) = 0;
  virtual int fd() const = 0;
  virtual std::string_view kind() const = 0;  // "tcp" or "tls"
  virtual StreamCounters counters() const = 0;
  // Human text for a failed result: "Connection reset by peer", "timed out", a TLS reason.
  virtual std::string describe(const IoResult& r) const;
  // Ends the session cleanly (TLS: close_notify). Best effort.
  virtual void close() {}
  // Event-loop engines switch the descriptor to O_NONBLOCK for the data phase: "no data now"
  // is then kWouldBlock instead of a receive timeout (kTimedOut).
  Status set_nonblocking(bool on);
  bool nonblocking() const { return nonblocking_; }

 protected:
  bool nonblocking_ = false;
};

// Plain socket: read(2)/write(2) on the descriptor, which the Stream does not own.
class FdStream final : public Stream {
 public:
  explicit FdStream(int fd) : fd_(fd) {}
  IoResult read(std::span<std::byte> buf) override;
  IoResult write(std::span<const std::byte> buf) override;
  // send(2) with flags (MSG_ZEROCOPY), counted as a write.
  IoResult send_flags(std::span<const std::byte> buf, int flags);
  int fd() const override { return fd_; }
  std::string_view kind() const override { return "tcp"; }
  StreamCounters counters() const override { return counters_; }

 private:
  int fd_;
  StreamCounters counters_;
};

// The result of a raw read(2)/write(2) returning `n` (errno set when n < 0): EAGAIN is
// kWouldBlock on a non-blocking descriptor and kTimedOut (SO_RCVTIMEO/SO_SNDTIMEO) otherwise.
IoResult io_result_from_syscall(ssize_t n, bool nonblocking);

// Text for errno-style results (used by Stream::describe's default).
std::string describe_io(const IoResult& r);

}  // namespace iobench
