// The client's plan, made once at the door from its options (plan_client), before anything is
// opened, built or started: what the door prepares (the report's files, the payload, loopback's
// private server), every size's runs in order and, for each run, the HELLO each connection sends
// and this side's plan for it (plan_side, called once per connection of each kind of run). The
// files that run it read the plan, never the options, and nothing patches it: where the runs go
// is known once the door has started what they need (ClientReach), a session copies its
// connection's side plan, and prepare_side fills in the payload that copy streams.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "adaptive/policy.h"
#include "config/options.h"
#include "net/address.h"
#include "payload/payload.h"
#include "payload/spec.h"
#include "proto/messages.h"
#include "server/server.h"
#include "session/plan.h"
#include "tls/options.h"
#include "tls/tls.h"

namespace iobench {

// One of a size's runs: a warm-up, a measured run, or the counting run (the last, with
// --syscalls auto).
struct RunStep {
  bool counting = false;
  bool measured = false;
  int index = 0;      // the measured run's number; -1: the counting run
  std::string name;   // "run 2", "warm-up run 0", "the counting run": the errors' words
  std::string label;  // "16K run 2/5 (size 1/3)": the live line's
};

// One connection of a run: the server it reaches, what it says, and how this side runs it.
struct ConnPlan {
  size_t server = 0;   // index into ClientPlan::servers
  proto::Hello hello;  // sent with the run's group id (0 for a lone connection)
  SidePlan side;
  double start_s = 0;  // after the run's first connection (--stagger)
};

// A run's connections: one, or --conns of them as a group (--conns, --buf adaptive, --fanout).
// Runs of a size differ only in what the kernel counts, so a size has at most two such sets.
struct RunConns {
  bool grouped = false;
  bool kernel_counts = false;  // the HELLOs ask for kernel counters (a group's run-wide ones)
  std::optional<TracerTool> tracer;  // --syscalls strace|perf: attached around a lone run
  std::vector<ConnPlan> conns;
};

struct SizePlan {
  BufPair buf;
  RunConns runs;                   // warm-ups and measured runs
  std::optional<RunConns> counting;  // --syscalls auto: this size's counting run
  std::vector<RunStep> steps;
  // The counting step is planned only with its connections (plan_client).
  const RunConns& conns_for(const RunStep& s) const {
    return s.counting && counting ? *counting : runs;
  }
};

// How every connection reaches its server and waits on it.
struct ClientAccess {
  double timeout_s = 30;
  double hello_timeout_s = 10;
  double build_timeout_s = 300;  // the HELLO to the ACK, PROGRESS or not
  std::string auth_token;  // proven to a server that asks (never sent)
  bool quiet = false;
};

// What a group run shares beyond its connections: the buffer policy's limits, the fan-out writer.
struct GroupShape {
  bool client_sends = true;
  PolicyLimits limits;
  FanoutShape fanout = FanoutShape::kOff;
  EngineKind fanout_engine = EngineKind::kBlocking;
  uint64_t source_rate = 0;
  bool staggered = false;
};

// The payload built or loaded before any connection, so generation is never inside a measurement.
struct PayloadPlan {
  std::optional<PayloadSpec> load;  // none: two-host --reverse (the server sends)
  bool sent_here = false;  // false: loopback --reverse, built here so the server finds it cached
};

// Loopback: the private server forked on 127.0.0.1 (an ephemeral port), and its TLS.
struct LoopbackPlan {
  ServerConfig config;                 // its TLS context is made in the child, from `tls`
  std::optional<tls::TlsOptions> tls;  // TLS runs: the server's side, with an in-memory identity
};

// What the report says before any run, and where it goes.
struct ReportPlan {
  ClientOptions options;        // echoed as the run's effective options
  std::string json_path, csv_path;  // "": none; "-": stdout (the table then goes to stderr)
  bool quiet = false;
  std::string payload_source;  // loopback: the spec's description; else the loaded payload's
};

struct ClientPlan {
  std::vector<HostPort> servers;  // two-host: --connect's; loopback: none until it is started
  std::optional<LoopbackPlan> loopback;
  PayloadPlan payload;
  CounterKind counter = CounterKind::kAuto;  // set before the loopback fork: both count alike
  ReportPlan report;
  ClientAccess access;
  std::optional<tls::TlsOptions> tls;  // the client's TLS context (absent: TCP)
  GroupShape group;
  std::vector<SizePlan> sizes;
  bool counting_run = false;  // --syscalls auto: each size ends with its counting run
  bool repeat_auto = false;
  double target_ci = 0.02;
  double time_s = 0;  // -t: measured runs until their data phases add up to this (0: --repeat)
  int last_measured_step = 0;  // --repeat auto skips to the step after this one
  uint64_t run_bytes = 0;      // one run's bytes over every connection (the live line's total)

  // The lone connections' engine is made once for the whole series, as the first run plans it.
  const SidePlan& first_side() const { return sizes.front().runs.conns.front().side; }
};

// The plan for `o`: two-host against o.servers, or loopback with its private server.
ClientPlan plan_client(const ClientOptions& o);

// Where a plan's runs go, known once the door has started what they need: the servers (loopback:
// the private server's port), the certificate loopback's client pins (the only one it trusts),
// the private server's pid (--syscalls strace|perf trace it) and the payload this side sends.
struct ClientReach {
  std::vector<HostPort> servers;  // connection i of a group reaches servers[conn.server]
  const tls::Identity* pinned = nullptr;
  pid_t local_server = 0;
  const Payload* payload = nullptr;
};

}  // namespace iobench
