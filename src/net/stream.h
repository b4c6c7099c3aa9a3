// The transport seam: engines and the control channel move bytes through a Stream, which is a
// plain socket or an OpenSSL session (tls/); "would block" is a state, not an error.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "util/fields.h"
#include "util/names.h"
#include "util/result.h"

namespace iobench {

// The transport a session runs over.
enum class Proto { kTcp, kTls };
template <>
struct Names<Proto> {
  static constexpr std::array table{std::pair{Proto::kTcp, std::string_view{"tcp"}},
                                    std::pair{Proto::kTls, std::string_view{"tls"}}};
};

namespace tls {

// Who moves a TLS session's records: OpenSSL on the socket, or the engine through memory BIOs;
// kAuto: bio where the engine moves the records itself (uring), socket otherwise.
enum class TlsIo { kAuto, kSocket, kBio };
// Kernel TLS: where the kernel has it (kAuto), required (kOn), or not used (kOff).
enum class Ktls { kAuto, kOn, kOff };
// --tls-version: the protocol version a client asks for (a server accepts both).
enum class TlsVersion { k12, k13 };

}  // namespace tls

template <>
struct Names<tls::TlsIo> {
  static constexpr std::array table{std::pair{tls::TlsIo::kAuto, std::string_view{"auto"}},
                                    std::pair{tls::TlsIo::kSocket, std::string_view{"socket"}},
                                    std::pair{tls::TlsIo::kBio, std::string_view{"bio"}}};
};
template <>
struct Names<tls::TlsVersion> {
  static constexpr std::array table{std::pair{tls::TlsVersion::k12, std::string_view{"1.2"}},
                                    std::pair{tls::TlsVersion::k13, std::string_view{"1.3"}}};
};
template <>
struct Names<tls::Ktls> {
  static constexpr std::array table{std::pair{tls::Ktls::kAuto, std::string_view{"auto"}},
                                    std::pair{tls::Ktls::kOn, std::string_view{"on"}},
                                    std::pair{tls::Ktls::kOff, std::string_view{"off"}}};
};

namespace tls {

// What a TLS session negotiated and how its data phase runs (plain data: no OpenSSL here).
// Described once: it crosses in each side's RESULT and the JSON's `tls` object walks it.
struct TlsInfo {
  std::string version;  // "TLSv1.3"; empty on a plain socket
  std::string cipher;   // "TLS_AES_128_GCM_SHA256"
  std::string group;    // "X25519"
  int64_t handshake_ns = 0;
  std::string io;  // "socket" or "bio"
  bool read_ahead = false;
  uint64_t max_fragment = 0;
  bool ktls_send = false;
  bool ktls_recv = false;
  std::string ktls;  // "off", "unavailable (<reason>)", "enabled: send yes, recv no"
  bool verified = false;
};

template <typename Self, typename Visit>
  requires DescribesAs<Self, TlsInfo>
void describe(Self& t, Visit&& visit) {
  visit(Field{"version"}, t.version);
  visit(Field{"cipher"}, t.cipher);
  visit(Field{"group"}, t.group);
  visit(Field{"handshake_ns"}, t.handshake_ns);
  visit(Field{"io"}, t.io);
  visit(Field{"read_ahead"}, t.read_ahead);
  visit(Field{"max_fragment_bytes"}, t.max_fragment);
  visit(Field{"ktls_send"}, t.ktls_send);
  visit(Field{"ktls_recv"}, t.ktls_recv);
  visit(Field{"ktls"}, t.ktls);
  visit(Field{"verified"}, t.verified);
}

}  // namespace tls

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
  // The socket's send queue as the writes found it: every kQueueSampleEvery-th write(2) reads
  // the bytes not yet sent (SIOCOUTQNSD) — a sender that runs ahead of its link finds megabytes
  // queued, one that keeps pace finds little (docs/measurement.md, two regimes).
  uint64_t queue_samples = 0;
  uint64_t queue_unsent_bytes = 0;  // summed over the samples
};

// One send-queue sample per this many write(2)s: a few hundred ioctls per 100 MiB at 1K.
inline constexpr uint64_t kQueueSampleEvery = 256;

StreamCounters operator-(const StreamCounters& a, const StreamCounters& b);

template <typename Self, typename Visit>
  requires DescribesAs<Self, StreamCounters>
void describe(Self& c, Visit&& visit) {
  visit(Field{.name = "sys_reads", .summed = true}, c.sys_reads);
  visit(Field{.name = "sys_writes", .summed = true}, c.sys_writes);
  visit(Field{.name = "records_in", .summed = true}, c.records_in);
  visit(Field{.name = "records_out", .summed = true}, c.records_out);
  visit(Field{.name = "queue_samples", .summed = true}, c.queue_samples);
  visit(Field{.name = "queue_unsent_bytes", .summed = true}, c.queue_unsent_bytes);
}

// A Stream whose bytes on the wire are not the application's (TLS in the memory-BIO model),
// for engines that issue the socket I/O themselves (io_uring): the engine moves wire bytes in
// and out of the codec's buffers, the codec seals and opens them.
class WireCodec {
 public:
  virtual ~WireCodec() = default;
  // Turns all of `plain` into wire bytes, appended to the outbox.
  virtual Status seal(std::span<const std::byte> plain) = 0;
  // Wire bytes waiting to be sent (stable until the next seal); `sent` drops the first n.
  virtual std::span<const std::byte> outbox() const = 0;
  virtual void sent(size_t n) = 0;
  // Room for n received wire bytes at the end of the inbox; `received` commits what arrived.
  virtual std::span<std::byte> inbox_space(size_t n) = 0;
  virtual void received(size_t n) = 0;
  // Wire bytes received but not yet opened (a partial record, or records not yet read).
  virtual size_t inbox_pending() const = 0;
  // Application bytes from the inbox; kWouldBlock when it holds no complete record.
  virtual IoResult open(std::span<std::byte> plain) = 0;
};

class Stream {
 public:
  virtual ~Stream() = default;
  // One call = one attempt (a syscall for a plain socket, an SSL_read/SSL_write for TLS).
  virtual IoResult read(std::span<std::byte> buf) = 0;
  virtual IoResult write(std::span<const std::byte> buf) = 0;
  virtual int fd() const = 0;
  virtual Proto proto() const = 0;
  virtual StreamCounters counters() const = 0;
  // Human text for a failed result: "Connection reset by peer", "timed out", a TLS reason.
  virtual std::string describe(const IoResult& r) const;
  // Puts on the wire what an earlier write() accepted but a non-blocking socket did not take
  // yet (TLS, memory-BIO model); kWouldBlock while some remains. A sender's engine calls it
  // until kOk before its phase ends.
  virtual IoResult flush() { return {}; }
  // send(2) with flags (MSG_ZEROCOPY), counted as a write; EOPNOTSUPP where the stream is not a
  // plain socket.
  virtual IoResult send_flags(std::span<const std::byte> buf, int flags);
  // The data phase's TLS model, once the HELLO has set it: a plain socket has nothing to set.
  virtual Status configure(tls::TlsIo /*io*/, bool /*read_ahead*/, uint64_t /*max_fragment*/,
                           uint64_t /*net_buf_bytes*/) {
    return {};
  }
  // What the TLS session negotiated; none on a plain socket.
  virtual std::optional<tls::TlsInfo> tls_info() const { return std::nullopt; }
  // Non-null where the engine may move wire bytes itself (TLS in the memory-BIO model).
  virtual WireCodec* wire_codec() { return nullptr; }
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
  IoResult send_flags(std::span<const std::byte> buf, int flags) override;
  int fd() const override { return fd_; }
  Proto proto() const override { return Proto::kTcp; }
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
