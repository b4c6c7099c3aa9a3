#include "session/plan.h"


namespace iobench {

SideChoice server_choice(const proto::Hello& h, double idle_timeout_s) {
  return {parse_name<EngineKind>(h.engine).value_or(EngineKind::kBlocking),
          parse_name<tls::TlsIo>(h.tls_io).value_or(tls::TlsIo::kSocket), static_cast<int>(h.cpu),
          idle_timeout_s};
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
  return p;
}

Status prepare_side(SidePlan& plan, Stream& s, Engine& engine, const Payload* payload) {
  DataPhase& d = plan.data;
  const tls::TlsRecords& records = plan.tls_records;
  if (auto st = s.configure(plan.tls_io, records.read_ahead, records.max_fragment, d.buf_bytes);
      !st)
    return st;
  if (d.is_sender && plan.engine_options.notsent_lowat > 0)
    if (auto st = set_notsent_lowat(s.fd(), plan.engine_options.notsent_lowat); !st) return st;
  if (!d.is_sender || !payload) return {};
  d.payload = payload->bytes().first(std::min<uint64_t>(d.bytes, payload->bytes().size()));
  d.payload_xxh3 = prefix_xxh3(*payload, d.bytes);
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
