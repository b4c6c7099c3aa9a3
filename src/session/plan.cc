#include "session/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "probe/syscall_counter.h"

namespace iobench {

// A pass over a source window's span is never shorter than the largest buffer asked for.
static_assert(kWindowSpan >= kMaxBuf, "a --source-window span would cut the largest writes");

SideChoice server_choice(const proto::Hello& h, double idle_timeout_s) {
  return {parse_name<EngineKind>(h.engine).value_or(EngineKind::kBlocking),
          parse_name<tls::TlsIo>(h.tls_io).value_or(tls::TlsIo::kSocket), static_cast<int>(h.cpu),
          idle_timeout_s, "", 1};
}

SidePlan plan_side(const proto::Hello& h, Side side, const SideChoice& mine) {
  SidePlan p;
  const bool sends = side == Side::kClient ? h.client_sends : !h.client_sends;
  p.grouped = h.conns > 1 || h.adaptive || h.fanout;
  p.engine = mine.engine;
  p.engine_options = side_engine_options(h.tuning, sends, mine.timeout_s);
  p.socket = h.socket;
  p.tls_io = mine.tls_io;
  p.tls_records = h.tls_records;
  DataPhase& d = p.data;
  d.is_sender = sends;
  d.bytes = h.bytes;
  d.buf_bytes = sends ? h.send_buf_bytes : h.recv_buf_bytes;
  d.decompress = h.decompress;
  // In a group the run's counters cover every connection; a connection's CPU is its thread's.
  d.kernel_syscalls = h.kernel_syscalls && !p.grouped;
  d.thread_cpu = p.grouped;
  d.cpu = mine.cpu;
  d.window = window_for(h.bytes, h.source_window);
  if (sends) {
    d.write_pattern = mine.write_pattern;
    d.pattern_seed = mine.pattern_seed;
  }
  return p;
}

namespace {

// The size every write of a pass over the window's span has, when the span may be as short as
// whole windows of such writes (RepeatedWindow::map): the blocking engine's fixed-size writes,
// for which a pass is one more call of its loop. 0 keeps the long span: writes whose size
// varies (adaptive, a group's, a --write-pattern), or an engine that pays for a pass (uring
// drains its queue, epoll registers the socket again, a zero-copy sender waits for every
// notification).
uint64_t pass_unit(const SidePlan& plan) {
  const DataPhase& d = plan.data;
  if (plan.engine != EngineKind::kBlocking || plan.engine_options.zerocopy || plan.grouped ||
      !d.write_pattern.empty())
    return 0;
  return d.buf_bytes;
}

}  // namespace

Status prepare_side(SidePlan& plan, Stream& s, Engine& engine, const Payload* payload,
                    WindowCache& windows) {
  DataPhase& d = plan.data;
  // The process's kernel counters are opened (a bpf program loaded and checked) here, before the
  // HELLO: after the ACK the peer's no-progress clock runs, and this side should only arm them.
  if (d.kernel_syscalls) (void)process_syscall_counter();
  const tls::TlsRecords& records = plan.tls_records;
  if (auto st = s.configure(plan.tls_io, records.read_ahead, records.max_fragment, d.buf_bytes);
      !st)
    return st;
  if (d.is_sender && plan.engine_options.notsent_lowat > 0)
    if (auto st = set_notsent_lowat(s.fd(), plan.engine_options.notsent_lowat); !st) return st;
  if (!d.is_sender || !payload) return {};
  const auto all = payload->bytes();
  if (d.window > 0) {
    if (d.window > all.size())  // map() checks the rest (whole pages)
      return fail(fmt::format("source window {} bytes is larger than the payload ({})", d.window,
                              all.size()));
    auto w = windows.get(all.first(d.window), pass_unit(plan));
    if (!w) return std::unexpected(w.error());
    plan.window = std::move(*w);
    d.payload = plan.window->bytes_for(d.bytes);
    d.payload_xxh3 = plan.window->digest(d.bytes);
  } else {
    d.payload = all.first(std::min<uint64_t>(d.bytes, all.size()));
    d.payload_xxh3 = prefix_xxh3(*payload, d.bytes);
  }
  d.payload_decoded_bytes = payload->decoded_bytes;
  return engine.prepare_send(d.payload);
}

SideOutcome run_side(Stream& data_stream, const Stream& transport, Engine& engine,
                     const SidePlan& plan, GroupSide* group, uint32_t conn_index) {
  DataPhase d = plan.data;
  std::unique_ptr<LiveRegistry::Member> member;
  if (group) {
    member = group->join(conn_index);
    d.follow = member.get();
    d.data_done = [&member, outer = plan.data.data_done] {
      member.reset();
      if (outer) outer();
    };
  }
  SideOutcome out;
  out.session = run_data_phase(data_stream, engine, d, describe_transport(transport));
  member.reset();
  const proto::SideResult& mine = out.session.mine;
  if (const auto& peer = out.session.peer; out.session.error.empty() && peer)
    if (auto st = verify_outcome(mine.is_sender ? mine : *peer, mine.is_sender ? *peer : mine); !st)
      out.mismatch = st.error().message;
  if (group) group->end(out.ok());
  return out;
}

}  // namespace iobench
