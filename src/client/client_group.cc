// The client side of a --conns run: N connections, each on its own thread with its own engine,
// started `--stagger` apart, each moving its own length and verified on its own; one side's
// whole-run figures from GroupSide, the server's from its GROUP message.
#include <fmt/format.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

#include "client/client_internal.h"
#include "engine/engine.h"
#include "fanout/fanout.h"
#include "proto/fields.h"
#include "session/group.h"
#include "session/session.h"
#include "session/test_hooks.h"
#include "util/size.h"

namespace iobench {
namespace {

// Waits for the server's GROUP on a connection whose own exchange completed.
Result<proto::GroupResult> expect_group(Stream& s, int fd, double timeout_s) {
  // The server sends it when the run's last connection ends, up to its idle timeout later.
  if (auto st = set_io_timeout(fd, timeout_s + 5); !st) return std::unexpected(st.error());
  auto m = recv_message(s);
  if (!m) return fail(fmt::format("no GROUP from the server: {}", m.error().message));
  auto* g = std::get_if<proto::GroupResult>(&*m);
  if (!g) return fail(fmt::format("expected GROUP from the server, got {}", proto::type_name(*m)));
  return *g;
}

// One side's totals: the connections' sums, the run's wall/CPU/kernel counts.
proto::SideResult side_totals(const GroupRecord& g, bool sender) {
  const proto::GroupResult& run = sender ? g.sender : g.receiver;
  proto::SideResult t;
  bool first = true;
  for (const ConnRecord& c : g.conns) {
    const auto& side = sender ? c.sender : c.receiver;
    t.bytes_expected += c.bytes;
    if (!side) continue;
    if (first) {
      // Transport facts are the same for every connection: take the first's.
      t = *side;
      t.bytes_expected = c.bytes;
      zero_summed(t);  // the counts start from zero
      t.xxh3 = 0;
      t.error.clear();
      first = false;
    }
    add_summed(t, *side);  // every count the field list marks summed
  }
  t.is_sender = sender;
  t.probe = run.probe;  // the process's clocks over the whole run, and the host's
  t.host_busy = run.host_busy;
  t.cpu_scope = CpuScope::kProcess;
  t.syscalls = run.syscalls;
  if (!(sender ? g.sender_known : g.receiver_known)) {
    t.syscalls.source = SyscallSource::kCounted;
    t.syscalls.note = "the server's whole-run figures did not arrive";
  }
  return t;
}

// One group run in flight: what its connection threads share.
struct GroupRun {
  const ClientPlan& plan;
  const ClientReach& reach;
  const RunConns& run;
  const tls::Context* tls;
  GroupSide& mine;
  uint64_t group_id;
  int64_t t0;
  GroupRecord g;
  std::vector<std::optional<proto::GroupResult>> theirs;  // the server side's, per connection
  FanoutWriter* fanout;  // --fanout: the one thread that writes every connection's data
};

// Connection i's engine: its own, or under --fanout its share of the writer's.
Result<std::unique_ptr<Engine>> connection_engine(GroupRun& r, uint32_t i, const SidePlan& plan) {
  if (r.fanout) return r.fanout->engine_for(i);
  return make_engine(plan.engine, plan.engine_options);
}

// Connection i: started at its stagger, one session as a member of the run's group, verified on
// its own; then the server side's whole-run figures.
void run_connection(GroupRun& r, uint32_t i) {
  const ConnPlan& conn = r.run.conns[i];
  const bool client_sends = r.plan.group.client_sends;
  ConnRecord& c = r.g.conns[i];
  c.index = i;
  c.bytes = conn.hello.bytes;
  std::this_thread::sleep_until(std::chrono::steady_clock::time_point(
      std::chrono::nanoseconds(r.t0 + static_cast<int64_t>(conn.start_s * 1e9))));
  auto engine = connection_engine(r, i, conn.side);
  auto session = engine ? open_session(r.plan, r.reach, conn, r.group_id, r.tls, **engine)
                        : Result<ClientSession>(std::unexpected(engine.error()));
  if (!session) {
    c.error = session.error().message;
    if (r.fanout) r.fanout->leave(i);
    r.mine.end(false);
    return;
  }
  Stream& stream = *session->stream;
  const std::unique_ptr<Stream> breaking = client_fault(stream, i);
  Stream& data_stream = breaking ? *breaking : stream;
  c.start_ns = monotonic_ns() - r.t0;
  const SidePlan& plan = session->side;
  const SideOutcome ended = run_side(data_stream, stream, **engine, plan, &r.mine, i);
  if (r.fanout) r.fanout->leave(i);
  const SessionOutcome& out = ended.session;
  (client_sends ? c.sender : c.receiver) = out.mine;
  if (out.peer) (client_sends ? c.receiver : c.sender) = *out.peer;
  if (!out.error.empty())
    c.error = fmt::format("{} ({} of {} bytes moved)", out.error, out.mine.io.bytes,
                          plan.data.bytes);
  else
    c.error = ended.mismatch;
  if (out.error.empty()) {
    auto group = expect_group(stream, session->fd.get(), r.plan.access.timeout_s);
    if (group) r.theirs[i] = std::move(*group);
  }
  stream.close();
}

// The run's record: both sides' whole-run figures and totals. Fails when every connection did;
// record.group->error says which failed otherwise.
Result<RunRecord> group_record(GroupRun& r, proto::GroupResult my_side) {
  const bool client_sends = r.plan.group.client_sends;
  const auto conns = static_cast<uint32_t>(r.run.conns.size());
  GroupRecord& g = r.g;
  (client_sends ? g.sender : g.receiver) = std::move(my_side);
  (client_sends ? g.sender_known : g.receiver_known) = true;
  for (auto& t : r.theirs) {
    if (!t) continue;
    (client_sends ? g.receiver : g.sender) = *t;
    (client_sends ? g.receiver_known : g.sender_known) = true;
    break;
  }
  uint32_t failed = 0;
  std::string first_error;
  for (const ConnRecord& c : g.conns) {
    if (c.error.empty()) continue;
    if (failed++ == 0) first_error = fmt::format("connection {}: {}", c.index, c.error);
  }
  if (failed == conns) return fail(fmt::format("every connection failed; {}", first_error));
  if (failed > 0)
    g.error = fmt::format("{} of {} connections failed; {}", failed, conns, first_error);
  RunRecord rec;
  rec.sender = side_totals(g, true);
  rec.receiver = side_totals(g, false);
  rec.group = std::move(g);
  return rec;
}

}  // namespace

Result<RunRecord> run_group(const ClientPlan& plan, const ClientReach& reach, const SizePlan& size,
                            const RunConns& run, const tls::Context* tls_ctx) {
  const GroupShape& shape = plan.group;
  const auto conns = static_cast<uint32_t>(run.conns.size());
  const BufPair& buf = size.buf;
  const uint64_t my_buf = shape.client_sends ? buf.send_bytes : buf.recv_bytes;
  const bool one_writer = shape.fanout != FanoutShape::kOff;
  GroupSide mine(make_policy(buf.adaptive, one_writer, shape.limits, my_buf), shape.client_sends,
                 run.kernel_counts, conns);
  std::random_device rd;
  const uint64_t group_id = (uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(monotonic_ns());
  std::optional<FanoutWriter> fanout;
  if (one_writer)
    fanout.emplace(shape.fanout, shape.fanout_engine, conns, !shape.staggered,
                   plan.access.timeout_s, shape.source_rate);
  GroupRun r{plan,           reach, run, tls_ctx, mine, group_id,
             monotonic_ns(), {},    {},  fanout ? &*fanout : nullptr};
  r.g.conns.resize(conns);
  r.theirs.resize(conns);
  std::vector<std::thread> threads;
  threads.reserve(conns);
  for (uint32_t i = 0; i < conns; ++i) threads.emplace_back(run_connection, std::ref(r), i);
  for (std::thread& t : threads) t.join();
  if (fanout) {
    fanout->finish();
    r.g.fanout = fanout->figures();
    for (uint32_t i = 0; i < conns; ++i) r.g.conns[i].fanout = fanout->replica(i);
  }
  return group_record(r, mine.wait(0));
}

}  // namespace iobench
