// The results of an invocation as data, and the writers that turn them into a table, JSON or CSV.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/options.h"
#include "fanout/figures.h"
#include "probe/softirqs.h"
#include "probe/tracer.h"
#include "proto/messages.h"
#include "tls/crypto_cost.h"

namespace iobench {

// Where the server side ran: a private server on this host, or `iobench server` elsewhere.
enum class RunMode { kLoopback, kClient };
template <>
struct Names<RunMode> {
  static constexpr std::array table{std::pair{RunMode::kLoopback, std::string_view{"loopback"}},
                                    std::pair{RunMode::kClient, std::string_view{"client"}}};
};

inline constexpr int kSchemaVersion = 1;

struct Stat {
  double median = 0, min = 0, max = 0;
};

// One connection of a --conns run.
struct ConnRecord {
  uint32_t index = 0;
  uint64_t bytes = 0;                                 // what it was to move
  int64_t start_ns = 0;                               // its data phase start, since the run's start
  std::optional<proto::SideResult> sender, receiver;  // absent where it never got that far
  std::string error;                                  // empty: moved and verified
  std::optional<FanoutReplica> fanout;                // --fanout: as the writer saw it
};

struct GroupRecord {
  std::vector<ConnRecord> conns;
  proto::GroupResult sender, receiver;                // each side's whole-run figures
  bool sender_known = false, receiver_known = false;  // the server's side may be unreachable
  std::string error;                                  // empty: every connection verified
  std::optional<FanoutWriterFigures> fanout;               // --fanout: the writer thread
};

struct RunRecord {
  int run = 0;  // 0-based among measured runs
  // With --conns / adaptive: each side's totals over the run (sums of the connections, CPU and
  // kernel counts of the process), so every table and summary reads the same fields.
  proto::SideResult sender;
  proto::SideResult receiver;
  std::optional<GroupRecord> group;
  // Interrupted (Ctrl-C) or failed (`error`): this side's figures up to that moment.
  bool partial = false;
  std::string error;  // why the run failed (empty: it did not, or a signal ended it)
  // The peer's RESULT never came (interrupted or failed first): its side holds no figures.
  bool sender_reported = true;
  bool receiver_reported = true;
  // NET_RX/NET_TX softirqs per CPU on the client's host over the run (session set-up included).
  SoftirqCounts softirqs;
  bool reported(bool of_sender) const { return of_sender ? sender_reported : receiver_reported; }
  // --syscalls strace|perf: the tool attached to each side's process for the whole session
  // (connect to close); absent for a side it could not reach (the server in two-host mode).
  std::optional<TracerCounts> sender_tracer, receiver_tracer;
};

// --repeat auto: where a size's measured runs stopped, and how precisely each side's CPU per GiB
// is known then (the half-width of the 95% bootstrap interval of the median, over the median).
struct RepeatAuto {
  int runs = 0;
  double sender_ci = 0, receiver_ci = 0;
  bool reached = false;  // both within --target-ci; otherwise --max-repeat ended the runs
};

// Computed over a size's measured runs that completed (partial ones left out).
RepeatAuto repeat_auto_precision(const std::vector<RunRecord>& runs, double target);

struct SizeResults {
  BufPair buf;
  std::vector<RunRecord> runs;
  // --syscalls auto: the one run (after the warm-ups) in which the kernel counted syscalls; the
  // measured runs then counted nothing, and the summary's syscall figures come from this one.
  std::optional<RunRecord> counting_run;
  std::optional<RepeatAuto> repeat_auto;
  // The measured runs, then the counting run if there is one.
  std::vector<const RunRecord*> all_runs() const {
    std::vector<const RunRecord*> out;
    out.reserve(runs.size() + 1);
    for (const RunRecord& r : runs) out.push_back(&r);
    if (counting_run) out.push_back(&*counting_run);
    return out;
  }
};

// Whose CPU a ProcessCpu is: this client, loopback's forked server, or the strace/perf tools
// the client started and reaped.
enum class ProcessKind { kClient, kServer, kTracers };
template <>
struct Names<ProcessKind> {
  static constexpr std::array table{std::pair{ProcessKind::kClient, std::string_view{"client"}},
                                    std::pair{ProcessKind::kServer, std::string_view{"server"}},
                                    std::pair{ProcessKind::kTracers, std::string_view{"tracers"}}};
};

// One process's whole CPU, from its start (or fork) until the report, set beside what its data
// phases account for: the cost of running the tool that no data phase shows.
struct ProcessCpu {
  ProcessKind host = ProcessKind::kClient;
  int64_t cpu_ns = 0;         // user + sys (getrusage: the total is exact, the split sampled)
  int64_t user_us = 0, sys_us = 0;
  int64_t measured_ns = 0;    // the data phases of the measured runs (this process's side)
  int64_t other_runs_ns = 0;  // the data phases of warm-up and counting runs
  int64_t payload_ns = 0;     // building or mapping the payload before the first run
  bool phase_unreported = false;  // an interrupted run's figures never came: its CPU is in rest
  // The rest: start-up, handshakes, control messages, session set-up, exit.
  int64_t rest_ns() const { return cpu_ns - measured_ns - other_runs_ns - payload_ns; }
};

struct Report {
  nlohmann::json context;      // host, kernel, CPU, libraries, git commit
  ClientOptions options;       // effective options
  RunMode mode = RunMode::kLoopback;
  std::string server;          // address the client connected to
  std::string payload_source;  // "resp-v1 seed=1 level=3"
  std::vector<SizeResults> sizes;
  std::string interrupted;  // "SIGINT" when a signal ended the run early
  // Whole processes (client; loopback's server, reaped; the strace/perf tools, reaped). Empty
  // until the client has finished its runs.
  std::vector<ProcessCpu> processes;
  // TLS: the cipher's own cost on the client's host per record size seen, timed after the runs
  // (in the client's process CPU, `rest`), so the report can say where a side's CPU goes beyond.
  std::vector<tls::CryptoCost> crypto;
};

// TLS: per size and side, CPU per GiB split into crypto and the rest per record ("tls cost").
// The record size a side's summary shows (bytes / records, 64..16384), 0 if none.
uint64_t record_bytes(const SizeResults& size, bool sender);
std::string tls_cost_lines(const Report& r);
nlohmann::json tls_cost_json(const Report& r, const SizeResults& size);

// "process CPU" lines of the table and the JSON "processes" block.
std::string process_cpu_lines(const std::vector<ProcessCpu>& processes);
nlohmann::json process_cpu_json(const std::vector<ProcessCpu>& processes);

// Figures derived from one side's raw result; names carry units.
struct SideFigures {
  double bytes = 0;
  double wall_s = 0;
  double throughput_gbps = 0;
  double throughput_mib_s = 0;
  double cpu_user_s = 0;
  double cpu_sys_s = 0;
  double cpu_s = 0;  // exact total (CLOCK_PROCESS_CPUTIME_ID)
  double cpu_s_per_gib = 0;
  double io_calls = 0;
  double bytes_per_call = 0;
  // In this side's direction: write(2) and kin for the sender, read(2) and kin for the receiver.
  double syscalls = 0;
  double syscalls_total = 0;  // every syscall of the data phase (kernel count, else the stream's)
  double syscalls_per_mib = 0;
  double bytes_per_syscall = 0;
  double records = 0;  // TLS records sent (sender) or received (receiver)
  // TCP segments this side sent per engine call (TCP_INFO; 0 when either is unknown): about 1
  // when each small write left alone, well below when writes coalesced in the send queue.
  double segments_per_call = 0;
};

// A syscall count by name from the kernel's counters, or 0 when not counted.
uint64_t kernel_count(const proto::SideResult& r, std::string_view name);

SideFigures side_figures(const proto::SideResult& r);

// Fairness across a --conns run's connections: each connection's throughput measured on its
// receiver (first byte read to last), failed connections left out.
struct GroupFigures {
  Stat conn_gbps;
  uint32_t slowest_conn = 0;
  double aggregate_gbps = 0;  // all bytes received over the receiver side's run time
};
GroupFigures group_figures(const GroupRecord& g);

// --fanout: the writer's derived figures over its replicas.
struct FanoutFigures {
  double cpu_s_per_gib_delivered = 0;  // the writer thread's CPU over N x bytes delivered
  double cpu_us_per_chunk = 0;         // ... over its rounds (one chunk to every live replica)
  double last_done_s = 0;              // the first chunk to the last replica done
  double slowest_s = 0;                // the slowest replica's time to complete
  uint32_t slowest = 0;                // and its index
};
FanoutFigures fanout_figures(const GroupRecord& g);
// The table's lines for a --fanout run (empty without one) and its JSON block.
std::string fanout_lines(const GroupRecord& g);
nlohmann::json fanout_json(const GroupRecord& g);

// "16K", "4K/64K" (sender/receiver differ) or "adaptive".
std::string buf_label(const BufPair& b);

// Median/min/max of each SideFigures field across runs, for one side.
struct SideSummary {
  size_t runs = 0;  // runs in which this side reported figures; 0: nothing to show
  Stat bytes, wall_s, throughput_gbps, throughput_mib_s, cpu_user_s, cpu_sys_s, cpu_s,
      cpu_s_per_gib, io_calls, bytes_per_call, syscalls, syscalls_total, syscalls_per_mib,
      bytes_per_syscall, records;
};

SideSummary summarize(const std::vector<RunRecord>& runs, bool sender);
// The size's summary: its measured runs, with the syscall figures of its counting run if any.
SideSummary summarize(const SizeResults& size, bool sender);
Stat stat_of(std::vector<double> values);

nlohmann::json collect_context();
std::string render_table(const Report& r);
nlohmann::json render_json(const Report& r);
std::string render_csv(const Report& r);

}  // namespace iobench
