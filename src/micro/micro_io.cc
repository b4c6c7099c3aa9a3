// Per-call cost of moving one buffer through the kernel: write + read over a socketpair and over
// a loopback TCP pair, by buffer size.
#include <benchmark/benchmark.h>
#include <linux/bpf.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "net/socket.h"
#include "probe/syscall_counter.h"
#include "watch/bpf_watch.h"

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

// The floor under any counter on sys_enter: a raw tracepoint program that returns at once. Its
// cost is the traced entry path every syscall of the machine takes while any program or perf
// counter sits on the tracepoint, plus calling a program; the bpf counter's own instructions
// come on top. Returns the link descriptor (closing it detaches), or -1 with errno.
int attach_empty_program() {
  bpf_insn insns[2] = {};
  insns[0].code = BPF_ALU64 | BPF_MOV | BPF_K;  // r0 = 0
  insns[1].code = BPF_JMP | BPF_EXIT;
  bpf_attr load{};
  load.prog_type = BPF_PROG_TYPE_RAW_TRACEPOINT;
  load.insns = reinterpret_cast<uint64_t>(insns);
  load.insn_cnt = 2;
  load.license = reinterpret_cast<uint64_t>("GPL");
  const int prog = static_cast<int>(syscall(SYS_bpf, BPF_PROG_LOAD, &load, sizeof load));
  if (prog < 0) return -1;
  bpf_attr open{};
  open.raw_tracepoint.name = reinterpret_cast<uint64_t>("sys_enter");
  open.raw_tracepoint.prog_fd = static_cast<uint32_t>(prog);
  const int link = static_cast<int>(syscall(SYS_bpf, BPF_RAW_TRACEPOINT_OPEN, &open, sizeof open));
  ::close(prog);  // the link holds it
  return link;
}

// Arg 4 of the counting benchmarks: the empty program attached for the benchmark's lifetime.
class EmptyProgram {
 public:
  explicit EmptyProgram(benchmark::State& state) : link_(attach_empty_program()) {
    if (link_ < 0) state.SkipWithError(std::strerror(errno));
  }
  ~EmptyProgram() {
    if (link_ >= 0) ::close(link_);
  }
  EmptyProgram(const EmptyProgram&) = delete;
  EmptyProgram& operator=(const EmptyProgram&) = delete;
  bool ok() const { return link_ >= 0; }

 private:
  int link_;
};

// Counting backends by benchmark argument: 0 none, 1 perf tracepoints, 2 bpf, 3 task I/O
// accounting (4, the empty program, is not a counter: see EmptyProgram). Each benchmark opens its
// own counter (perf tracepoints stay registered while open, so an open one would tax the uncounted
// runs too).
std::unique_ptr<iobench::SyscallCounter> counter_for(benchmark::State& state, int64_t kind) {
  if (kind == 0 || kind >= 4) return nullptr;
  auto c = std::make_unique<iobench::SyscallCounter>(kind == 1 ? iobench::CounterKind::kTracepoints
                                                     : kind == 2 ? iobench::CounterKind::kBpf
                                                                 : iobench::CounterKind::kTaskIo);
  if (!c->available()) state.SkipWithError(c->reason().c_str());
  return c;
}

// `iobench watch` on this process (5) or on another one (6: what every unwatched process of the
// machine pays while a watch runs: the traced entry and exit paths plus a map lookup).
std::unique_ptr<iobench::BpfWatch> watch_for(benchmark::State& state, int64_t kind) {
  if (kind != 5 && kind != 6) return nullptr;
  auto w = iobench::BpfWatch::open({kind == 5 ? getpid() : getppid()}, iobench::find_tracefs());
  if (!w) {
    state.SkipWithError(w.error().message.c_str());
    return nullptr;
  }
  return std::move(*w);
}

// What a benchmark counting with `kind` holds while it runs, in the order it opens them.
struct Counting {
  std::optional<EmptyProgram> empty;
  std::unique_ptr<iobench::BpfWatch> watch;
  std::unique_ptr<iobench::SyscallCounter> counter;
  // Opens what `kind` asks for and starts the counter; false: the benchmark was skipped.
  bool arm(benchmark::State& state, int64_t kind) {
    if (kind == 4 && !empty.emplace(state).ok()) return false;
    watch = watch_for(state, kind);
    if ((kind == 5 || kind == 6) && !watch) return false;
    counter = counter_for(state, kind);
    if (counter && !counter->available()) return false;
    if (counter) counter->start();
    return true;
  }
};

void tcp_loopback(benchmark::State& state, int64_t kind) {
  auto listener = iobench::listen_on({"127.0.0.1", 0});
  if (!listener) {
    state.SkipWithError(listener.error().message.c_str());
    return;
  }
  iobench::SocketOptions big_buffers;
  big_buffers.sndbuf = big_buffers.rcvbuf = 4 << 20;
  auto client = iobench::connect_to({"127.0.0.1", iobench::local_port(listener->get())}, 5,
                                    big_buffers);
  std::string peer;
  auto server = client ? iobench::accept_client(listener->get(), peer)
                       : iobench::Result<iobench::Fd>(std::unexpected(client.error()));
  if (!client || !server) {
    state.SkipWithError("loopback connection failed");
    return;
  }
  set_buffers(server->get());
  Counting counting;
  if (!counting.arm(state, kind)) return;
  auto& counter = counting.counter;
  write_read(state, client->get(), server->get());
  if (counter) (void)counter->stop();
}

void BM_TcpLoopbackWriteRead(benchmark::State& state) { tcp_loopback(state, 0); }
// The same with the kernel's syscall counters on (arg 2: 1 perf tracepoints, 2 bpf, 3 task I/O
// accounting, 4 the empty program, 5 `iobench watch` on it, 6 a watch on another process): the
// cost of counting a real transfer.
void BM_TcpLoopbackWriteReadCounted(benchmark::State& state) {
  tcp_loopback(state, state.range(1));
}

}  // namespace

// Powers of two from 64 B to 64 KiB (1K, 4K, 8K, 16K and 64K among them).
BENCHMARK(BM_SocketpairWriteRead)->RangeMultiplier(2)->Range(64, 64 << 10);
BENCHMARK(BM_TcpLoopbackWriteRead)->RangeMultiplier(2)->Range(64, 64 << 10);
BENCHMARK(BM_TcpLoopbackWriteReadCounted)->ArgsProduct({{1 << 10, 64 << 10}, {1, 2, 3, 4, 5, 6}});

namespace {

// What kernel counting adds to each syscall: the cheapest syscall (write to a bad descriptor),
// uncounted (arg 0), with the perf tracepoint group enabled (1), the bpf counter (2), task I/O
// accounting (3: a write to a bad descriptor fails before the kernel counts it, so the row shows
// that having it read costs nothing), an empty program on sys_enter (4: the floor above), or
// `iobench watch` on this process (5: its result counted on exit too) or on another (6).
void BM_SyscallWithCounting(benchmark::State& state) {
  const int64_t kind = state.range(0);
  Counting counting;
  if (!counting.arm(state, kind)) return;
  auto& counter = counting.counter;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores)
    benchmark::DoNotOptimize(::write(-1, nullptr, 0));
  }
  if (counter) {
    const auto k = counter->stop();
    state.counters["counted"] =
        benchmark::Counter(static_cast<double>(k.total), benchmark::Counter::kAvgIterations);
  }
}

}  // namespace

BENCHMARK(BM_SyscallWithCounting)->Arg(0)->Arg(1)->Arg(2)->Arg(3)->Arg(4)->Arg(5)->Arg(6);
