#include "session/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>

#include "payload/xxh3_fast.h"
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

// The last source window mapped in this process, kept for the next session that asks for the
// same one (the same window bytes, by their hash, and length): a run of --repeat N, or the
// connections of a group, map and hash the whole span once, not per session. The key is the
// window's content, not its address: a server that loads another payload where the last one
// was mapped must not stream the old one's prefix.
Result<std::shared_ptr<const RepeatedWindow>> shared_window(std::span<const std::byte> first,
                                                            uint64_t total, uint64_t pass_unit) {
  static std::mutex mu;
  static std::shared_ptr<const RepeatedWindow> last;
  static std::tuple<uint64_t, uint64_t, uint64_t, uint64_t> last_key{0, 0, 0, 0};
  const std::tuple key{xxh3_oneshot(first.data(), first.size()), uint64_t{first.size()}, total,
                       pass_unit};
  std::lock_guard lock(mu);
  if (last && last_key == key) return last;
  auto w = RepeatedWindow::map(first, total, pass_unit);
  if (!w) return std::unexpected(w.error());
  last = std::make_shared<const RepeatedWindow>(std::move(*w));
  last_key = key;
  return last;
}

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

Status prepare_side(SidePlan& plan, Stream& s, Engine& engine, const Payload* payload) {
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
    auto w = shared_window(all.first(d.window), d.bytes, pass_unit(plan));
    if (!w) return std::unexpected(w.error());
    plan.window = std::move(*w);
    d.payload = plan.window->bytes();
    d.payload_xxh3 = plan.window->xxh3();
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
    d.data_done = [&member] { member.reset(); };
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
