// The client: one connection per run, over every buffer size and repeat, then one report.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "client/client.h"
#include "client/client_internal.h"
#include "client/live_line.h"
#include "engine/engine.h"
#include "net/interrupt.h"
#include "net/socket.h"
#include "payload/payload.h"
#include "payload/window.h"
#include "probe/probe.h"
#include "probe/syscall_counter.h"
#include "probe/tracer.h"
#include "report/report.h"
#include "server/server.h"
#include "session/progress.h"
#include "session/session.h"
#include "tls/tls.h"
#include "util/size.h"

namespace iobench {
namespace {

// --syscalls strace|perf: the tool attached to a process for one session.
struct TracedProcess {
  std::optional<Tracer> tracer;
  std::string file;
  ~TracedProcess() {
    if (!file.empty()) ::unlink(file.c_str());
  }
};

Result<std::unique_ptr<TracedProcess>> trace(TracerTool tool, pid_t pid) {
  auto t = std::make_unique<TracedProcess>();
  char name[] = "/tmp/iobench-trace-XXXXXX";
  const int fd = mkstemp(name);
  if (fd < 0) return fail(fmt::format("mkstemp: {}", std::strerror(errno)));
  ::close(fd);
  t->file = name;
  auto tracer = Tracer::attach(tool, pid, t->file);
  if (!tracer) return std::unexpected(tracer.error());
  t->tracer.emplace(std::move(*tracer));
  return t;
}

// A lone connection's run, with --syscalls strace|perf's tools attached around it.
Result<RunRecord> run_once(const ClientPlan& p, const ClientReach& reach, const RunConns& run,
                           Engine& engine, const tls::Context* tls_ctx, LiveLine& live) {
  std::unique_ptr<TracedProcess> my_trace, server_trace;
  if (run.tracer) {
    // The server's tracer first: `strace -f` on this process would follow that fork.
    if (reach.local_server > 0) {
      auto theirs = trace(*run.tracer, reach.local_server);
      if (!theirs) return std::unexpected(theirs.error());
      server_trace = std::move(*theirs);
    }
    auto mine = trace(*run.tracer, getpid());
    if (!mine) return std::unexpected(mine.error());
    my_trace = std::move(*mine);
  }
  auto session = open_session(p, reach, run.conns.front(), 0, tls_ctx, engine);
  if (!session) return std::unexpected(session.error());
  Stream& stream = *session->stream;
  const SidePlan& plan = session->side;
  const DataPhase& d = plan.data;
  live.attach(session->fd.get(), d.is_sender);
  SideOutcome ended = run_side(stream, stream, engine, plan, nullptr, 0);
  const SessionOutcome& out = ended.session;
  live.detach();
  stream.close();
  if (!out.error.empty()) {
    // Ctrl-C or a failure (a stalled link, a reset, a dead server): this side's figures up to
    // that moment, kept as evidence; the server's never came.
    RunRecord rec;
    rec.partial = true;
    if (!interrupt::received())
      rec.error = fmt::format("{} (client {}: {} of {} bytes moved)", out.error,
                              d.is_sender ? "sender" : "receiver", out.mine.io.bytes, d.bytes);
    proto::SideResult theirs;
    theirs.is_sender = !d.is_sender;
    theirs.bytes_expected = d.bytes;
    theirs.error = rec.error.empty() ? "not reported: interrupted" : "not reported: the run failed";
    rec.sender = d.is_sender ? out.mine : theirs;
    rec.receiver = d.is_sender ? theirs : out.mine;
    (d.is_sender ? rec.receiver_reported : rec.sender_reported) = false;
    return rec;
  }
  if (!ended.mismatch.empty()) return fail(ended.mismatch);
  if (!out.peer) return fail("no result from the server");
  RunRecord rec;
  rec.sender = d.is_sender ? out.mine : *out.peer;
  rec.receiver = d.is_sender ? *out.peer : out.mine;
  for (auto [traced, mine] : {std::pair{my_trace.get(), true}, {server_trace.get(), false}}) {
    if (!traced) continue;
    if (!mine) {
      // The server logs and loops back to accept() after its RESULT: give it that moment.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    auto counts = traced->tracer->detach();
    if (!counts) return std::unexpected(counts.error());
    (mine == d.is_sender ? rec.sender_tracer : rec.receiver_tracer) = *counts;
  }
  return rec;
}

}  // namespace

namespace {

// A measured run under --syscalls auto counted nothing on purpose: say where the counts are.
// This client asked both sides for no kernel counts, so a side that reported figures without
// them did so for that reason, whatever its note's wording; a side whose figures never came
// keeps the note that says so.
void mark_counted_apart(RunRecord& r) {
  constexpr const char* kNote =
      "kernel counts: this size's counting_run (the measured runs count nothing: no tracing "
      "while CPU is measured)";
  for (proto::SideResult* side : {&r.sender, &r.receiver})
    if (r.reported(side->is_sender) && !kernel_counted(side->syscalls.source))
      side->syscalls.note = kNote;
  if (r.group)
    for (auto [g, known] : {std::pair{&r.group->sender, r.group->sender_known},
                            {&r.group->receiver, r.group->receiver_known}})
      if (known && !kernel_counted(g->syscalls.source)) g->syscalls.note = kNote;
}

}  // namespace

void time_tls_crypto(Report& report) {
  if (report.options.proto != Proto::kTls) return;
  std::vector<uint64_t> records;
  for (const SizeResults& size : report.sizes)
    for (bool sender : {true, false})
      if (const uint64_t b = record_bytes(size, sender);
          b > 0 && std::find(records.begin(), records.end(), b) == records.end())
        records.push_back(b);
  for (uint64_t b : records)
    if (auto c = tls::measure_crypto_cost(report.options.tls.cipher, b))
      report.crypto.push_back(*c);
}

namespace {

// What every run of a series shares: the plan, where it goes, the engine and the TLS context.
struct Series {
  const ClientPlan& plan;
  const ClientReach& reach;
  Engine& engine;
  const tls::Context* tls;
  LiveLine& live;

  // One run: a group or a lone connection, as the server will see it (both sides decide from
  // the same HELLO), with the softirqs around it; its data phases are tallied in `report`.
  Result<RunRecord> run(const SizePlan& size, const RunStep& step, Report& report) {
    const RunConns& conns = size.conns_for(step);
    const SoftirqCounts softirqs_before = read_softirqs();
    live.begin_run(step.label, plan.run_bytes, step.counting);
    auto rec = conns.grouped ? run_group(plan, reach, size, conns, tls)
                             : run_once(plan, reach, conns, engine, tls, live);
    live.end_run();
    if (!rec) return rec;
    rec->softirqs = softirq_delta(softirqs_before, read_softirqs());
    if (interrupt::received()) rec->partial = true;
    rec->run = step.index;
    if (step.measured && plan.counting_run) mark_counted_apart(*rec);
    tally_data_phases(report, *rec, step.measured);
    return rec;
  }
};

// Why a run ends the series (nullopt: it does not): an interrupt, a failed group, an error.
std::optional<std::string> stop_reason(const Result<RunRecord>& rec, const BufPair& buf,
                                       const RunStep& step) {
  if (rec && rec->partial && !rec->error.empty())
    return fmt::format("buf {}: {}", buf_label(buf), rec->error);
  if (rec && rec->partial)
    return fmt::format("interrupted by {}: {} of buf {} is partial",
                       interrupt::name(interrupt::received()), step.name, buf_label(buf));
  if (rec) {
    const std::optional<GroupRecord>& group = rec->group;
    if (group && !group->error.empty())
      return fmt::format("buf {}: {}", buf_label(buf), group->error);
    return std::nullopt;
  }
  std::string error = fmt::format("buf {}: {}", buf_label(buf), rec.error().message);
  if (interrupt::received())
    error = fmt::format("interrupted by {} ({})", interrupt::name(interrupt::received()), error);
  return error;
}

// A run's record goes where the report shows it: the counting run apart, measured runs in the
// table; a warm-up only when it failed as a group (its finished connections are reported).
void keep(SizeResults& size, const RunRecord& rec, const RunStep& step, bool failed_group) {
  if (step.counting)
    size.counting_run = rec;
  else if (step.measured || failed_group)
    size.runs.push_back(rec);
}

// Whether a size's measured runs are enough after one more (`phase_ns`: its data phase, the
// sender's clock): --repeat auto once each side's CPU per GiB is known well enough, -t once
// the data phases add up to the time (`phases_ns` their sum so far).
bool measured_enough(const ClientPlan& plan, SizeResults& size, int64_t phase_ns,
                     int64_t& phases_ns) {
  if (plan.repeat_auto) {
    size.repeat_auto = repeat_auto_precision(size.runs, plan.target_ci);
    return size.repeat_auto->reached;
  }
  if (plan.time_s <= 0) return false;
  phases_ns += phase_ns;
  return static_cast<double>(phases_ns) >= plan.time_s * 1e9 &&
         size.runs.size() >= static_cast<size_t>(ClientOptions::kTimeMinRuns);
}

Result<std::optional<tls::Context>> client_tls(const ClientPlan& p, const tls::Identity* pinned) {
  if (!p.tls) return std::optional<tls::Context>{};
  auto ctx = tls::Context::client(*p.tls, pinned);
  if (!ctx) return std::unexpected(ctx.error());
  return std::optional<tls::Context>(std::move(*ctx));
}

}  // namespace

Result<Report> run_all(const ClientPlan& plan, const ClientReach& reach, Report report,
                       std::string& error) {
  auto tls_ctx = client_tls(plan, reach.pinned);
  if (!tls_ctx) return std::unexpected(tls_ctx.error());
  const SidePlan& first = plan.first_side();
  auto engine = make_engine(first.engine, first.engine_options);
  if (!engine) return std::unexpected(engine.error());
  LiveLine live(!plan.access.quiet && isatty(STDERR_FILENO));
  const std::optional<tls::Context>& ctx = *tls_ctx;
  Series series{plan, reach, **engine, ctx ? &*ctx : nullptr, live};
  for (const SizePlan& planned : plan.sizes) {
    SizeResults size{planned.buf, {}, std::nullopt, std::nullopt};
    const auto steps = static_cast<int>(planned.steps.size());
    int64_t phases_ns = 0;  // -t: the measured runs' data phases so far
    for (int i = 0; i < steps; ++i) {
      const RunStep& step = planned.steps[static_cast<size_t>(i)];
      auto rec = series.run(planned, step, report);
      const std::optional<std::string> stop = stop_reason(rec, planned.buf, step);
      if (rec) keep(size, *rec, step, stop && !rec->partial);
      if (stop) {
        error = *stop;
        if (!size.runs.empty() || size.counting_run) report.sizes.push_back(std::move(size));
        return report;
      }
      if (step.measured && measured_enough(plan, size, rec ? rec->sender.probe.wall_ns : 0,
                                           phases_ns))
        i = plan.last_measured_step;  // on to the counting run (if any) and the next size
    }
    report.sizes.push_back(std::move(size));
  }
  return report;
}

int emit_report(const ReportPlan& plan, ReportFiles& files, const Report& report) {
  const bool stdout_taken = plan.json_path == "-" || plan.csv_path == "-";
  if (!plan.quiet) {
    const std::string table = render_table(report);
    std::fputs(table.c_str(), stdout_taken ? stderr : stdout);
    std::fflush(stdout_taken ? stderr : stdout);
  }
  if (files.json.is_open()) {
    if (auto st = files.json.write(render_json(report).dump(2) + "\n"); !st) {
      print_error(st.error().message);
      return 1;
    }
  }
  if (files.csv.is_open()) {
    if (auto st = files.csv.write(render_csv(report)); !st) {
      print_error(st.error().message);
      return 1;
    }
  }
  return 0;
}

int finish_client(const ReportPlan& plan, ReportFiles& files, Result<Report> report,
                  const std::string& error) {
  const int sig = interrupt::received();
  if (!report) {
    print_error(report.error().message);
    return interrupt::exit_code(1, sig);
  }
  if (sig) report->interrupted = interrupt::name(sig);
  int rc = report->sizes.empty() ? 0 : emit_report(plan, files, *report);
  if (!error.empty()) {
    print_error(error);
    return interrupt::exit_code(1, sig);
  }
  return interrupt::exit_code(rc, sig);
}

namespace {

int error_exit(const std::string& message, int code) {
  print_error(message);
  return interrupt::exit_code(code);
}

// The payload as the plan says, built or loaded before any connection, so generation is never
// inside a measurement; kept only when this process sends it.
Result<std::optional<Payload>> load_planned_payload(const PayloadPlan& plan, bool quiet) {
  if (!plan.load) return std::optional<Payload>{};
  auto p = load_payload_shown(*plan.load, quiet);
  if (!p) return std::unexpected(p.error());
  if (!plan.sent_here) return std::optional<Payload>{};
  return std::optional<Payload>(std::move(*p));
}

// The report's header: where the run went and what the sender streamed.
Report report_header(const ReportPlan& plan, const std::optional<LocalServer>& local,
                     const std::optional<Payload>& payload) {
  Report report;
  report.context = collect_context();
  report.options = plan.options;
  report.mode = local ? RunMode::kLoopback : RunMode::kClient;
  report.server = local ? local->addr.str() : plan.options.connect;
  report.payload_source = !plan.payload_source.empty() ? plan.payload_source
                          : payload                    ? payload->source
                                                       : "generated by the server";
  return report;
}

}  // namespace

int run_client_command(const ClientOptions& o) {
  interrupt::install({SIGINT, SIGTERM});
  // The plan, made once: everything below reads it, not the options.
  const ClientPlan plan = plan_client(o);
  // --json and --csv, opened before anything is built or run: a bad path costs nothing.
  auto files = ReportFiles::open(plan.report.json_path, plan.report.csv_path);
  if (!files) return error_exit(files.error().message, 2);
  set_process_counter_kind(plan.counter);
  const int64_t payload_start = probe_now().cpu_ns;
  auto payload = load_planned_payload(plan.payload, plan.access.quiet);
  if (!payload) return error_exit(payload.error().message, 1);
  const int64_t payload_ns = probe_now().cpu_ns - payload_start;
  std::optional<LocalServer> local;
  if (plan.loopback) {
    auto started = start_local_server(*plan.loopback, *payload);
    if (!started) return error_exit(started.error().message, 1);
    local = std::move(*started);
  }
  const std::optional<Payload>& mine = *payload;
  const ClientReach reach{local ? std::vector{local->addr} : plan.servers,
                          local && local->identity ? &*local->identity : nullptr,
                          local ? local->pid : 0, mine ? &*mine : nullptr};
  std::string error;
  auto done = run_all(plan, reach, report_header(plan.report, local, mine), error);
  // The loopback server is reaped before the report: its whole CPU is part of the run's cost,
  // and anything measuring this process from outside (GNU time, a parent's RUSAGE_CHILDREN)
  // then sees it.
  const auto server_times = local ? reap_server(local->pid, 5.0) : std::nullopt;
  if (done) time_tls_crypto(*done);
  if (done) finish_process_cpu(*done, payload_ns, server_times);
  return finish_client(plan.report, *files, std::move(done), error);
}

}  // namespace iobench
