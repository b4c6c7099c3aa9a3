#include "session/session.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "engine/write_pattern.h"
#include "net/tcp_segments.h"
#include "payload/verifier.h"
#include "probe/host_busy.h"
#include "probe/placement.h"
#include "probe/probe.h"
#include "probe/syscall_counter.h"
#include "util/escape.h"

namespace iobench {
namespace {

Status write_all(Stream& s, std::span<const std::byte> data) {
  while (!data.empty()) {
    IoResult r = s.write(data);
    if (!r.ok()) return fail(s.describe(r));
    data = data.subspan(r.bytes);
  }
  return {};
}

Status read_exact(Stream& s, std::span<std::byte> buf, int64_t deadline_ns) {
  while (!buf.empty()) {
    IoResult r = s.read(buf);
    if (!r.ok())
      return fail(s.describe(r),
                  r.state == IoResult::State::kTimedOut ? ErrorKind::kTimedOut : ErrorKind::kOther);
    buf = buf.subspan(r.bytes);
    if (!buf.empty() && deadline_ns > 0 && monotonic_ns() > deadline_ns)
      return fail("timed out: message still incomplete at its deadline", ErrorKind::kTimedOut);
  }
  return {};
}

// An engine's error on a connection that TCP_USER_TIMEOUT aborted reads as the kernel's last
// soft error ("No route to host", "Broken pipe"): say that it timed out, and after how long.
Status name_a_stall(const Stream& s, Status st) {
  if (st) return st;
  const std::optional<double> silent_s = unacknowledged_abort_s(s.fd());
  if (!silent_s) return st;
  return fail(fmt::format("{} (timed out: the peer acknowledged nothing for {:.1f} s)",
                          st.error().message, *silent_s),
              ErrorKind::kTimedOut);
}

// The sender's wait for the receiver's RESULT, which comes once the receiver has read all that
// was written. The kernel may hold megabytes of it (a loopback socket's send and receive
// buffers), so a slow receiver can still be reading long after the last write returned: while it
// keeps acknowledging bytes or opening its window, the no-progress timeout (the socket's
// SO_RCVTIMEO) counts from the last such sign, not from the last write. Without this a server
// whose 2 MiB sat in the buffers dropped a loaded client that had read 128000 bytes of it
// within --idle-timeout (the 200-clients hardening test under ASan, 1 run in ~50).
void wait_while_peer_reads(int fd) {
  timeval tv{};
  socklen_t len = sizeof tv;
  if (getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &len) != 0) return;
  const int timeout_ms = static_cast<int>(tv.tv_sec * 1000 + tv.tv_usec / 1000);
  if (timeout_ms <= 0) return;
  PeerProgress last = peer_progress(fd);
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) != 0) return;  // readable, closed, or a signal: read it
    const PeerProgress now = peer_progress(fd);
    if (now == last) return;  // nothing moved for the whole timeout: the read times out
    last = now;
  }
}

class VerifierSink final : public ByteSink {
 public:
  explicit VerifierSink(Verifier& v) : v_(v) {}
  Status consume(std::span<const std::byte> chunk) override { return v_.consume(chunk); }

 private:
  Verifier& v_;
};

Result<proto::SideResult> expect_result(Stream& s) {
  auto m = recv_expected(s, proto::Type::kResult, proto::kMaxBodyBytes, 0, true);
  if (!m) return fail(fmt::format("no result from peer: {}", m.error().message));
  if (auto* e = std::get_if<proto::ErrorMsg>(&*m)) return fail("peer: " + clip_peer_text(e->message));
  auto* r = std::get_if<proto::SideResult>(&*m);
  if (!r) return fail(fmt::format("expected RESULT from peer, got {}", proto::type_name(*m)));
  return *r;
}

// What a data phase is measured with, around the engine's loop: the kernel's syscall counters
// (when this session may take them), the Stream's own counters, and where the thread ran. Set
// up before the clock starts; each figure is read into `me` as the phase ends.
class PhaseMeasure {
 public:
  PhaseMeasure(Stream& s, const DataPhase& d, proto::SideResult& me)
      : s_(s),
        me_(me),
        lease_(d.kernel_syscalls ? CounterLease::try_take() : CounterLease{}),
        kernel_(lease_.held() ? &process_syscall_counter() : nullptr),
        thread_cpu_(d.thread_cpu),
        before_(s.counters()),
        segments_before_(tcp_segments(s.fd())) {
    me.syscalls.source = SyscallSource::kCounted;
    me.cpu_scope = d.thread_cpu ? CpuScope::kThread : CpuScope::kProcess;
    if (!d.kernel_syscalls) me.syscalls.note = "kernel counting off";
    if (d.kernel_syscalls && !lease_.held())
      me.syscalls.note = "another session of this process held the kernel counters";
    // Before pinning: the set the side could have used.
    me.placement.allowed_cpus = allowed_cpus_text();
  }
  PhaseMeasure(const PhaseMeasure&) = delete;
  PhaseMeasure& operator=(const PhaseMeasure&) = delete;
  // After both clocks stopped and the results were exchanged, while the lease holds: the bpf
  // program leaves sys_enter.
  ~PhaseMeasure() {
    if (kernel_) kernel_->disarm();
  }

  // --cpus: the thread runs the phase on one CPU (it returns to its old set after the phase);
  // then the bpf program attaches (up to ~20 ms), all before the clock starts.
  Status prepare(int cpu) {
    auto pin = ThreadPin::pin(cpu);
    if (!pin) return std::unexpected(pin.error());
    pin_.emplace(std::move(*pin));
    me_.placement.pinned_cpu = cpu;
    seen_.sample();
    if (kernel_) kernel_->arm();
    return {};
  }
  // The data phase's clocks: this process's (or thread's) and the host's busy time.
  void start_clock() {
    host_start_ = host_idle_now();
    start_ = probe_now(thread_cpu_);
  }
  void stop_clock() {
    me_.probe = probe_now(thread_cpu_) - start_;
    me_.host_busy = host_idle_now() - host_start_;
  }
  void start_kernel() {
    if (kernel_) kernel_->start();
  }
  void stop_kernel() {
    if (kernel_) take_kernel_counts(kernel_->stop(), me_.syscalls);
  }
  // The segments the socket sent and received since the phase was set up.
  void take_segments() {
    me_.segments = tcp_segments(s_.fd()) - segments_before_;
  }
  // The Stream's syscalls and records, and the CPUs the thread was seen on.
  void take_stream_and_placement() {
    me_.stream = s_.counters() - before_;
    seen_.sample();
    me_.placement.seen_cpus = seen_.text();
  }

 private:
  Stream& s_;
  proto::SideResult& me_;
  CounterLease lease_;
  SyscallCounter* kernel_;
  bool thread_cpu_;
  ProbeSample start_;
  HostIdleSample host_start_;
  StreamCounters before_;
  TcpSegments segments_before_;
  std::optional<ThreadPin> pin_;
  CpuSamples seen_;
};

// The payload through the engine: in one call, or with --source-window in passes over the
// window's span (whole windows each) until `bytes` are out.
Status send_passes(Stream& s, Engine& engine, const DataPhase& d, IoBuffer& buf, IoCounters& io) {
  if (d.bytes > 0 && d.payload.empty()) return fail("no payload to send");
  for (uint64_t sent = 0; sent < d.bytes;) {
    const auto pass = d.payload.first(static_cast<size_t>(
        std::min<uint64_t>(d.payload.size(), d.bytes - sent)));
    if (auto st = engine.send(s, pass, buf, io); !st) {
      if (pass.size() == d.bytes) return st;
      return fail(fmt::format("{} (in the pass from byte {} of {})", st.error().message, sent,
                              d.bytes),
                  st.error().kind);
    }
    sent += pass.size();
  }
  return {};
}

// The sender's phase: the payload through the engine, then the receiver's RESULT (the end-to-end
// acknowledgement that stops the sender's clock), then this side's RESULT.
void send_phase(Stream& s, Engine& engine, const DataPhase& d, PhaseMeasure& m,
                SessionOutcome& out) {
  proto::SideResult& me = out.mine;
  IoCounters io;
  me.xxh3 = d.payload_xxh3;
  me.decoded_bytes = d.payload_decoded_bytes;
  IoBuffer buf(d.buf_bytes, false);
  if (d.follow) buf.follow(d.follow);
  if (d.data_done) buf.on_done(d.data_done);
  std::optional<WritePattern> pattern;  // read (a watch report, maybe) before the clock starts
  if (!d.write_pattern.empty()) {
    auto p = WritePattern::parse(d.write_pattern, d.pattern_seed);
    if (!p) {
      out.error = me.error = p.error().message;
      return;
    }
    pattern.emplace(std::move(*p));
    buf.use_sequence(&*pattern);
  }
  m.start_clock();
  m.start_kernel();
  Status sent = send_passes(s, engine, d, buf, io);
  m.stop_kernel();
  sent = name_a_stall(s, std::move(sent));  // after the counters: its getsockopt is not data I/O
  buf.done();
  me.buf_resizes = buf.resizes();
  // Counters stop before the acknowledgement is read: it is control traffic, not data.
  m.take_stream_and_placement();
  if (sent) wait_while_peer_reads(s.fd());
  Result<proto::SideResult> peer =
      sent ? expect_result(s) : Result<proto::SideResult>(std::unexpected(sent.error()));
  m.stop_clock();
  m.take_segments();  // every data segment has left once the receiver's RESULT is here
  me.io = io;
  if (!peer) {
    me.error = peer.error().message;
    out.error = me.error;
    // Best effort, once the data is all out: the peer may be gone. After a failed send the
    // receiver would read the frame as payload, and it would only wait behind unsent data.
    if (sent) (void)send_message(s, me);
    return;
  }
  out.peer = *peer;
  if (auto st = send_message(s, me); !st) out.error = st.error().message;
}

// The receiver's phase: exactly `bytes` through the engine into the verifier (its buffer is
// allocated and touched before the clock starts), this side's RESULT, then the sender's.
void receive_phase(Stream& s, Engine& engine, const DataPhase& d, PhaseMeasure& m,
                   SessionOutcome& out) {
  proto::SideResult& me = out.mine;
  IoCounters io;
  IoBuffer buf(d.buf_bytes, true);
  if (d.follow) buf.follow(d.follow);
  Verifier verifier(d.decompress, d.window, d.max_decode_ratio);
  VerifierSink sink(verifier);
  m.start_clock();
  m.start_kernel();
  Status got = engine.recv(s, d.bytes, buf, sink, io);
  m.stop_kernel();
  got = name_a_stall(s, std::move(got));
  if (d.data_done) d.data_done();
  me.buf_resizes = buf.resizes();
  if (got) got = verifier.finish();
  m.stop_clock();
  m.take_stream_and_placement();
  m.take_segments();
  me.io = io;
  me.xxh3 = verifier.xxh3();
  me.decoded = d.decompress;
  me.decoded_bytes = verifier.decoded_bytes();
  if (!got) me.error = got.error().message;
  if (auto st = send_message(s, me); !st && me.error.empty()) me.error = st.error().message;
  out.error = me.error;
  if (!out.error.empty()) return;
  auto peer = expect_result(s);
  if (!peer) {
    out.error = peer.error().message;
    return;
  }
  out.peer = *peer;
}

}  // namespace

Status send_message(Stream& s, const proto::Message& m) {
  auto frame = proto::encode(m);
  if (auto st = write_all(s, frame); !st)
    return fail(fmt::format("sending {}: {}", proto::type_name(m), st.error().message));
  return {};
}

namespace {

// One frame whose header decode_header bounds and `accept` takes; its body read only then.
// A frame begun must end within the socket's read timeout of its first byte (and by the
// caller's deadline, if that is sooner): a peer dripping a byte every few seconds, each inside SO_RCVTIMEO, would
// otherwise hold this side past its --timeout for as long as it dripped.
int64_t frame_deadline(int fd) {
  timeval tv{};
  socklen_t len = sizeof tv;
  if (fd < 0 || ::getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &len) != 0) return 0;
  const int64_t ns = tv.tv_sec * 1'000'000'000LL + tv.tv_usec * 1000LL;
  return ns > 0 ? monotonic_ns() + ns : 0;
}

template <typename Accept>
Result<proto::Message> recv_accepted(Stream& s, int64_t deadline_ns, Accept&& accept) {
  std::array<std::byte, proto::kHeaderBytes> header{};
  if (auto st = read_exact(s, std::span(header).first(1), deadline_ns); !st)
    return std::unexpected(st.error());
  if (const int64_t frame = frame_deadline(s.fd()); frame && (!deadline_ns || frame < deadline_ns))
    deadline_ns = frame;
  if (auto st = read_exact(s, std::span(header).subspan(1), deadline_ns); !st)
    return std::unexpected(st.error());
  auto h = proto::decode_header(header);
  if (!h) return std::unexpected(h.error());
  if (Status st = accept(*h); !st) return std::unexpected(st.error());
  std::vector<std::byte> body(h->body_bytes);  // bounded by decode_header (and `accept`)
  if (auto st = read_exact(s, body, deadline_ns); !st) return std::unexpected(st.error());
  auto m = proto::decode_body(*h, body);
  if (m) proto::escape_printable(*m);  // the peer's strings reach this side's output
  return m;
}

}  // namespace

Result<proto::Message> recv_message(Stream& s, int64_t deadline_ns) {
  return recv_accepted(s, deadline_ns, [](const proto::FrameHeader&) { return Status{}; });
}

Result<proto::Message> recv_expected(Stream& s, proto::Type type, uint32_t max_body,
                                     int64_t deadline_ns, bool or_error) {
  return recv_accepted(s, deadline_ns, [&](const proto::FrameHeader& h) -> Status {
    if (h.type != type && !(or_error && h.type == proto::Type::kError))
      return fail(fmt::format("expected {}, got {}", proto::type_name(type),
                              proto::type_name(h.type)));
    if (h.body_bytes > max_body)
      return fail(fmt::format("{} of {} bytes: at most {} here", proto::type_name(h.type),
                              h.body_bytes, max_body));
    return {};
  });
}

proto::SideResult describe_transport(const Stream& s) {
  proto::SideResult r;
  r.socket = query_socket_info(s.fd());
  r.tls = s.tls_info().value_or(tls::TlsInfo{});
  return r;
}

SessionOutcome run_data_phase(Stream& s, Engine& engine, const DataPhase& d,
                              proto::SideResult base) {
  SessionOutcome out;
  out.mine = std::move(base);
  proto::SideResult& me = out.mine;
  me.is_sender = d.is_sender;
  me.bytes_expected = d.bytes;
  me.buf_bytes = d.buf_bytes;
  me.engine = std::string(engine.name());
  // Opened before the clock starts (once per process); started and stopped tightly around the
  // engine's loop, so control messages are never counted.
  PhaseMeasure measure(s, d, me);
  if (auto st = measure.prepare(d.cpu); !st) {
    me.error = out.error = st.error().message;
    return out;
  }
  if (d.is_sender)
    send_phase(s, engine, d, measure, out);
  else
    receive_phase(s, engine, d, measure, out);
  return out;
}

Status verify_outcome(const proto::SideResult& sender, const proto::SideResult& receiver) {
  if (!sender.error.empty()) return fail("sender failed: " + sender.error);
  if (!receiver.error.empty()) return fail("receiver failed: " + receiver.error);
  if (sender.io.bytes != sender.bytes_expected || receiver.io.bytes != sender.bytes_expected)
    return fail(fmt::format("short transfer: expected {} bytes, sender sent {}, receiver got {}",
                            sender.bytes_expected, sender.io.bytes, receiver.io.bytes));
  if (sender.xxh3 != receiver.xxh3)
    return fail(fmt::format("checksum mismatch: sender xxh3 {:016x}, receiver xxh3 {:016x}",
                            sender.xxh3, receiver.xxh3));
  if (receiver.decoded && receiver.decoded_bytes != sender.decoded_bytes)
    return fail(fmt::format("decoded size mismatch: payload decodes to {} bytes, receiver got {}",
                            sender.decoded_bytes, receiver.decoded_bytes));
  return {};
}

}  // namespace iobench
