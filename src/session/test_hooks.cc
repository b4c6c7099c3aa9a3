#include "session/test_hooks.h"

#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>

namespace iobench {
namespace {

// Forwards everything to the inner stream; the wrappers override what they break.
class ForwardingStream : public Stream {
 public:
  explicit ForwardingStream(Stream& inner) : inner_(inner) {}
  IoResult read(std::span<std::byte> buf) override { return sync().read(buf); }
  IoResult write(std::span<const std::byte> buf) override { return sync().write(buf); }
  int fd() const override { return inner_.fd(); }
  Proto proto() const override { return inner_.proto(); }
  StreamCounters counters() const override { return inner_.counters(); }
  std::string describe(const IoResult& r) const override { return inner_.describe(r); }
  IoResult flush() override { return inner_.flush(); }
  void close() override { inner_.close(); }

 protected:
  // An event-loop engine switched this wrapper to non-blocking: the inner stream must read
  // EAGAIN as "would block" too, not as a timeout.
  Stream& sync() {
    if (inner_.nonblocking() != nonblocking()) (void)inner_.set_nonblocking(nonblocking());
    return inner_;
  }
  Stream& inner_;
};

class BreakingStream final : public ForwardingStream {
 public:
  BreakingStream(Stream& inner, uint64_t after) : ForwardingStream(inner), left_(after) {}
  IoResult write(std::span<const std::byte> buf) override {
    if (left_ == 0) {
      ::shutdown(inner_.fd(), SHUT_RDWR);
      return {IoResult::State::kError, 0, EPIPE};
    }
    IoResult r = sync().write(buf.first(std::min<uint64_t>(buf.size(), left_)));
    if (r.ok()) left_ -= r.bytes;
    return r;
  }

 private:
  uint64_t left_;
};

class StallingStream final : public ForwardingStream {
 public:
  StallingStream(Stream& inner, uint64_t after, double seconds)
      : ForwardingStream(inner), left_(after), seconds_(seconds) {}
  IoResult read(std::span<std::byte> buf) override {
    if (left_ == 0 && !stalled_) {
      stalled_ = true;
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds_));
    }
    if (left_ > 0) buf = buf.first(std::min<uint64_t>(buf.size(), left_));
    IoResult r = sync().read(buf);
    if (r.ok() && left_ > 0) left_ -= std::min<uint64_t>(left_, r.bytes);
    return r;
  }

 private:
  uint64_t left_;
  double seconds_;
  bool stalled_ = false;
};

}  // namespace

std::unique_ptr<Stream> client_fault(Stream& inner, uint32_t index) {
  const char* env = std::getenv("IOBENCH_TEST_BREAK_CONN");
  unsigned long long i = 0, n = 0;
  if (!env || std::sscanf(env, "%llu:%llu", &i, &n) != 2 || i != index) return nullptr;
  return std::make_unique<BreakingStream>(inner, n);
}

std::unique_ptr<Stream> server_fault(Stream& inner, uint32_t index) {
  const char* env = std::getenv("IOBENCH_TEST_STALL_CONN");
  unsigned long long i = 0, n = 0;
  double s = 0;
  if (!env || std::sscanf(env, "%llu:%llu:%lf", &i, &n, &s) != 3 || i != index) return nullptr;
  return std::make_unique<StallingStream>(inner, n, s);
}

namespace {

void sleep_for_env(const char* name) {
  const char* env = std::getenv(name);
  double s = 0;
  if (env && std::sscanf(env, "%lf", &s) == 1 && s > 0)
    std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

}  // namespace

void server_slow_end() { sleep_for_env("IOBENCH_TEST_SLOW_END"); }

void client_slow_handshake_step() { sleep_for_env("IOBENCH_TEST_SLOW_HANDSHAKE"); }

}  // namespace iobench
