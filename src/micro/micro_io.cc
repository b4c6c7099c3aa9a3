// Per-call cost of moving one buffer through the kernel: write + read over a socketpair and over
// a loopback TCP pair, by buffer size.
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "net/socket.h"
#include "probe/syscall_counter.h"

namespace {

void set_buffers(int fd) {
  // Large enough that one thread can write a whole buffer and then read it back.
  int big = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
}

// One iteration = one write(2) of `size` bytes and the read(2)s that take it back out.
void write_read(benchmark::State& state, int wfd, int rfd) {
  const auto size = static_cast<size_t>(state.range(0));
  std::vector<char> out(size, 'x'), in(size);
  uint64_t calls = 0;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores)
    if (::write(wfd, out.data(), size) != static_cast<ssize_t>(size)) {
      state.SkipWithError("short write");
      break;
    }
    ++calls;
    size_t got = 0;
    while (got < size) {
      const ssize_t n = ::read(rfd, in.data() + got, size - got);
      ++calls;
      if (n <= 0) {
        state.SkipWithError("read failed");
        return;
      }
      got += static_cast<size_t>(n);
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
  state.counters["syscalls"] =
      benchmark::Counter(static_cast<double>(calls), benchmark::Counter::kAvgIterations);
}

void BM_SocketpairWriteRead(benchmark::State& state) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
    state.SkipWithError("socketpair failed");
    return;
  }
  set_buffers(sv[0]);
  set_buffers(sv[1]);
  write_read(state, sv[0], sv[1]);
  ::close(sv[0]);
  ::close(sv[1]);
}

void tcp_loopback(benchmark::State& state, bool counting) {
  auto listener = iobench::listen_on({"127.0.0.1", 0});
  if (!listener) {
    state.SkipWithError(listener.error().message.c_str());
    return;
  }
  auto client = iobench::connect_to({"127.0.0.1", iobench::local_port(listener->get())}, 5,
                                    {4 << 20, 4 << 20, true});
  std::string peer;
  auto server = client ? iobench::accept_client(listener->get(), peer)
                       : iobench::Result<iobench::Fd>(std::unexpected(client.error()));
  if (!client || !server) {
    state.SkipWithError("loopback connection failed");
    return;
  }
  set_buffers(server->get());
  iobench::SyscallCounter& counter = iobench::process_syscall_counter();
  if (counting && !counter.available()) {
    state.SkipWithError(counter.reason().c_str());
    return;
  }
  if (counting) counter.start();
  write_read(state, client->get(), server->get());
  if (counting) (void)counter.stop();
}

void BM_TcpLoopbackWriteRead(benchmark::State& state) { tcp_loopback(state, false); }
// The same with the kernel's syscall counters enabled: the cost of counting a real transfer.
void BM_TcpLoopbackWriteReadCounted(benchmark::State& state) { tcp_loopback(state, true); }

}  // namespace

// Powers of two from 64 B to 64 KiB (1K, 4K, 8K, 16K and 64K among them).
BENCHMARK(BM_SocketpairWriteRead)->RangeMultiplier(2)->Range(64, 64 << 10);
BENCHMARK(BM_TcpLoopbackWriteRead)->RangeMultiplier(2)->Range(64, 64 << 10);
BENCHMARK(BM_TcpLoopbackWriteReadCounted)->Arg(1 << 10)->Arg(64 << 10);

namespace {

// What kernel counting adds to each syscall: the cheapest syscall (write to a bad descriptor),
// with the perf_event tracepoint group enabled (arg 1) or not (arg 0).
void BM_SyscallWithCounting(benchmark::State& state) {
  iobench::SyscallCounter& counter = iobench::process_syscall_counter();
  const bool on = state.range(0) != 0;
  if (on && !counter.available()) {
    state.SkipWithError(counter.reason().c_str());
    return;
  }
  if (on) counter.start();
  for (auto _ : state)  // NOLINT(clang-analyzer-deadcode.DeadStores)
                        // benchmark::DoNotOptimize(::write(-1, nullptr, 0));
    if (on) {
      const auto k = counter.stop();
      state.counters["counted"] =
          benchmark::Counter(static_cast<double>(k.total), benchmark::Counter::kAvgIterations);
    }
}

}  // namespace

BENCHMARK(BM_SyscallWithCounting)->Arg(0)->Arg(1);
