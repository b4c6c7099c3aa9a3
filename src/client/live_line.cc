#include "client/live_line.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <linux/tcp.h>  // tcp_info with tcpi_bytes_acked/received (glibc's lacks them)
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "probe/probe.h"
#include "util/size.h"

namespace iobench {
namespace {

// Bytes this side has moved on `fd` so far, from the kernel: acknowledged when sending, received
// otherwise (TLS records included). 0 when the socket cannot say.
uint64_t tcp_bytes(int fd, bool sending) {
  if (fd < 0) return 0;
  tcp_info info{};
  socklen_t len = sizeof info;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return 0;
  return sending ? info.tcpi_bytes_acked : info.tcpi_bytes_received;
}

}  // namespace

void LiveLine::begin_run(std::string label, uint64_t total_bytes, bool counting) {
  if (!enabled_) return;
  end_run();
  std::lock_guard lock(mu_);
  label_ = std::move(label);
  total_ = total_bytes;
  start_ns_ = monotonic_ns();
  counting_ = counting;
  stop_ = false;
  if (counting)
    draw();  // once, before the counters start
  else
    thread_ = std::thread([this] { loop(); });
}

void LiveLine::attach(int fd, bool sending) {
  sending_ = sending;
  fd_ = fd;
}

void LiveLine::detach() { fd_ = -1; }

void LiveLine::end_run() {
  if (!enabled_) return;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  fd_ = -1;
  if (drawn_) std::fputs("\r\033[K", stderr);
  drawn_ = false;
}

void LiveLine::draw() {
  const double elapsed = static_cast<double>(monotonic_ns() - start_ns_) / 1e9;
  std::string text = counting_ ? fmt::format("iobench: {}: counting syscalls (no live figures)", label_)
                               : fmt::format("iobench: {}: {:.1f} s", label_, elapsed);
  if (const uint64_t done = counting_ ? 0 : tcp_bytes(fd_.load(), sending_.load()); done > 0) {
    text += fmt::format(", {} of {}, {:.2f} Gbit/s", format_bytes_human(done),
                        format_bytes_human(total_), static_cast<double>(done) * 8 / elapsed / 1e9);
  }
  fmt::print(stderr, "\r{}\033[K", text);
  std::fflush(stderr);
  drawn_ = true;
}

void LiveLine::loop() {
  std::unique_lock lock(mu_);
  // A quick run says nothing: the first draw after half a second, then every quarter.
  if (wake_.wait_for(lock, std::chrono::milliseconds(500), [&] { return stop_; })) return;
  do draw();
  while (!wake_.wait_for(lock, std::chrono::milliseconds(250), [&] { return stop_; }));
}

}  // namespace iobench
