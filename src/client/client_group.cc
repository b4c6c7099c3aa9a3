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

// Connection i's length: --bytes shortened by a seeded fraction of up to --bytes-spread.
std::vector<uint64_t> conn_lengths(const ClientOptions& o) {
  std::vector<uint64_t> out(o.conns, o.payload.bytes);
  if (o.bytes_spread <= 0) return out;
  std::mt19937_64 rng(o.payload.seed * 0x9e3779b97f4a7c15ull + o.conns);
  std::uniform_real_distribution<double> u(0, 1);
  for (uint64_t& n : out) {
    const auto cut = static_cast<uint64_t>(static_cast<double>(n) * o.bytes_spread * u(rng));
    n = std::max(n - cut, kMinBytes);
  }
  return out;
}

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

// One --conns run in flight: what its connection threads share.
struct GroupRun {
  const ClientOptions& o;
  std::vector<HostPort> servers;  // connection i goes to servers[i % size]
  const BufPair& buf;
  const Payload* payload;
  const tls::Context* tls;
  GroupSide& mine;
  std::vector<uint64_t> lengths;
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
  const ClientOptions& o = r.o;
  const bool client_sends = !o.reverse;
  ConnRecord& c = r.g.conns[i];
  c.index = i;
  c.bytes = r.lengths[i];
  std::this_thread::sleep_until(std::chrono::steady_clock::time_point(
      std::chrono::nanoseconds(r.t0 + static_cast<int64_t>(o.stagger_s * 1e9 * i))));
  // Each server sees its share of the connections as a group of its own.
  const auto k = static_cast<uint32_t>(r.servers.size());
  const HostPort& server = r.servers[i % k];
  proto::Hello hello = make_hello(o, r.buf);
  hello.conns = (o.conns - i % k + k - 1) / k;
  hello.conn_index = i / k;
  hello.group_id = r.group_id;
  hello.bytes = r.lengths[i];
  hello.payload_bytes = o.payload.bytes;
  SidePlan plan = plan_side(hello, Side::kClient, client_choice(o));
  auto engine = connection_engine(r, i, plan);
  auto session = engine ? open_session(o, server, r.tls, hello, plan, **engine, r.payload)
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
    auto group = expect_group(stream, session->fd.get(), o.timeout_s);
    if (group) r.theirs[i] = std::move(*group);
  }
  stream.close();
}

// The run's record: both sides' whole-run figures and totals. Fails when every connection did;
// record.group->error says which failed otherwise.
Result<RunRecord> group_record(GroupRun& r, proto::GroupResult my_side) {
  const bool client_sends = !r.o.reverse;
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
  if (failed == r.o.conns) return fail(fmt::format("every connection failed; {}", first_error));
  if (failed > 0)
    g.error = fmt::format("{} of {} connections failed; {}", failed, r.o.conns, first_error);
  RunRecord rec;
  rec.sender = side_totals(g, true);
  rec.receiver = side_totals(g, false);
  rec.group = std::move(g);
  return rec;
}

}  // namespace

Result<RunRecord> run_group(const ClientOptions& o, const HostPort& server, const BufPair& buf,
                            const Payload* payload, const tls::Context* tls_ctx) {
  const bool client_sends = !o.reverse;
  const uint64_t my_buf = client_sends ? buf.send_bytes : buf.recv_bytes;
  const bool one_writer = o.fanout != FanoutShape::kOff;
  GroupSide mine(make_policy(buf.adaptive, one_writer, {o.budget, o.buf_min, o.buf_max}, my_buf),
                 client_sends, o.syscalls != SyscallsMode::kOff, o.conns);
  std::random_device rd;
  const uint64_t group_id = (uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(monotonic_ns());
  std::optional<FanoutWriter> fanout;
  if (one_writer)
    fanout.emplace(o.fanout, o.send_engine, o.conns, o.stagger_s == 0, o.timeout_s,
                   o.source_rate);
  const std::vector<HostPort> servers =
      o.servers.size() > 1 ? o.servers : std::vector<HostPort>{server};
  GroupRun r{o,        servers,        buf, payload, tls_ctx, mine, conn_lengths(o),
             group_id, monotonic_ns(), {},  {},      fanout ? &*fanout : nullptr};
  r.g.conns.resize(o.conns);
  r.theirs.resize(o.conns);
  std::vector<std::thread> threads;
  threads.reserve(o.conns);
  for (uint32_t i = 0; i < o.conns; ++i) threads.emplace_back(run_connection, std::ref(r), i);
  for (std::thread& t : threads) t.join();
  if (fanout) {
    fanout->finish();
    r.g.fanout = fanout->figures();
    for (uint32_t i = 0; i < o.conns; ++i) r.g.conns[i].fanout = fanout->replica(i);
  }
  return group_record(r, mine.wait(0));
}

}  // namespace iobench
