"""What a Valkey reviewer asks first of the pull requests in patches/upstream/: each build beside
stock Valkey 9.1.2 (or --against another) in real full syncs, with the sync's time and writes, the socket writer's CPU,
the client latency a steady load sees while the sync streams, and the memory the sync takes.

  scripts/valkey-evidence [--builds stock,series] [--against stock] [--proto tcp,tls] [--modes dual,diskless,disk]
      [--replicas 1,4] [--rounds 5] [--rdb 100M] [--load-rps 2000] [--load-seconds 2]
      [--no-load] [--large-value SIZE] [--child-cpu CPU] [--where loopback|fleet]
      [--out results/upstream-9.1/evidence]

Each build is Valkey 9.1.2 with TLS (`build/valkey/9.1/NAME`: stock, a PR folder's name such as
04-whole-chunks, or series), built when missing (a few minutes each) exactly as scripts/valkey-pr
builds it. Per cell (a build, TCP or TLS, a mode, N replicas) the same RDB is synced to N empty
replicas at once under `iobench watch`; from REPLICAOF a steady GET load (valkey-benchmark
--rps, the build's own) runs for --load-seconds, and the primary's memory is sampled every 20 ms
until the sync is done. An idle cell per build and protocol runs the same load with no sync: the
latency the sync's is read against. Every cell once per round in the experiment kernel's balanced
order: a failed sync is tried again, and the same command resumes a stopped study (progress.json
in --out). Writes OUT/results.json and OUT/report.md; every server it starts is stopped.
"""
import os
import shutil
import signal
import sys
import tempfile

from iobench_tools.lib.kernel import hostid
from iobench_tools.lib.kernel import axes
from iobench_tools.lib.kernel import experiment, hostlock, iobenchlib
from iobench_tools.lib.kernel.iobenchlib import ROOT
from iobench_tools.lib.valkey import realsync, replsynclib, syncload, valkeypr
from iobench_tools.lib.valkey import valkeyevidence as ve
from iobench_tools.lib.valkey.replsynclib import Node, Place

PROG = "valkey-evidence"


def fail(msg):
    sys.exit(f"{PROG}: error: {msg}")


def parse_args(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    ap.add_argument("--builds", default="stock,series",
                    help="the baseline and the builds set beside it: stock, PR folder names, "
                         "series, NAME@SIZE (NAME with its REPL_CHUNK_SIZE set to SIZE: the "
                         "harness's chunk variants, one build each), or NAME~SIZE (one binary "
                         "of NAME for every size, its chunk read at start from "
                         "IOBENCH_REPL_CHUNK=SIZE; NAME~SIZE#K is the same again, an A/A twin)")
    ap.add_argument("--against", default="stock",
                    help="the build every other is compared with (one of --builds)")
    axes.add_proto(ap)
    ap.add_argument("--modes", default="dual,diskless,disk", help="dual, diskless, disk")
    ap.add_argument("--load-rps", type=int, default=2000,
                    help="the client load's requests per second (GET, 4 connections)")
    ap.add_argument("--load-command", default="get", choices=["get", "set"],
                    help="the load's command: get, or set (writes the replicas' output buffers "
                         "carry while they sync)")
    ap.add_argument("--load-seconds", type=int, default=2,
                    help="the load's window from REPLICAOF, seconds")
    ap.check_before_run(lambda a: (
        f"{PROG}: error: --load-tool open speaks plain RESP over TCP: give --proto tcp (a TLS "
        "cell's primary serves its tls-port only)") if a.load_tool == "open" and "tls" in a.proto
        else None)
    ap.add_argument("--load-tool", default="valkey-benchmark",
                    choices=["valkey-benchmark", "open"],
                    help="valkey-benchmark --rps (closed loop: a stall delays the sends), or "
                         "open: iobench load (each request's latency from its intended send "
                         "time, the sync's window cut from its slices; plain TCP cells only)")
    ap.add_argument("--plain", action="store_true",
                    help="no iobench watch on the primary: the sync's time, the clients' "
                         "latency and the memory alone, with no instrument in the primary's "
                         "way (the writer's writes, CPU and event loop need the watch)")
    ap.add_argument("--event-loop", action="store_true",
                    help="iobench watch --event-loop on the primary alone: each event-loop "
                         "pass's busy time, with a chunk written in it and without, and each "
                         "chunk write's duration, in µs (the mechanism; take latency from "
                         "--plain cells, never from these)")
    ap.add_argument("--no-load", dest="load", action="store_false",
                    help="no client load (and no idle cells): sync and memory figures only")
    ap.add_argument("--large-value", type=iobenchlib.size_arg, default=None,
                    help="one more key of this many random bytes in the RDB (e.g. 64M): a write "
                         "larger than a chunk, which a writer that copies it shows in the fork "
                         "child's private memory (none)")
    ap.add_argument("--child-cpu", type=int, default=None,
                    help="the primary's fork child on this CPU (Valkey's bgsave-cpulist), apart "
                         "from the main thread's: the latency then shows the change without "
                         "the child sharing the main thread's CPU (default: it inherits the "
                         "primary's)")
    ap.add_argument("--retries", type=int, default=1, help="a failed run is tried again (1)")
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "upstream-9.1", "evidence"),
                    help="the folder results.json, report.md and progress.json go to")
    replsynclib.add_sync_options(ap)
    iobenchlib.add_binary_option(ap)
    a = ap.parse_args(argv)
    a.builds = a.builds.split(",")
    known = valkeypr.build_names()
    bad = [b for b in a.builds if not valkeypr.known_build(b) or b == valkeypr.SERIES_ASAN]
    if bad or len(set(a.builds)) != len(a.builds) or len(a.builds) < 2:
        ap.error(f"invalid --builds '{','.join(a.builds)}': expected two or more of "
                 f"{', '.join(b for b in known if b != valkeypr.SERIES_ASAN)} "
                 "(or NAME@SIZE, NAME~SIZE, NAME~SIZE#K), each once")
    if a.against not in a.builds:
        ap.error(f"invalid --against '{a.against}': expected one of --builds "
                 f"({','.join(a.builds)})")
    if a.event_loop and a.plain:
        ap.error("invalid --event-loop with --plain: the event loop is timed by iobench watch, "
                 "which --plain leaves out")
    if not 100 <= a.load_rps <= 100000:
        ap.error(f"invalid --load-rps {a.load_rps}: expected 100..100000")
    if not 1 <= a.load_seconds <= 60:
        ap.error(f"invalid --load-seconds {a.load_seconds}: expected 1..60")

    if a.child_cpu is not None and a.child_cpu not in os.sched_getaffinity(0):
        ap.error(f"invalid --child-cpu {a.child_cpu}: expected one of this host's CPUs "
                 f"({','.join(map(str, sorted(os.sched_getaffinity(0))))})")
    if not 0 <= a.retries <= 5:
        ap.error(f"invalid --retries {a.retries}: expected 0..5")
    replsynclib.check_sync_args(ap, a, {"proto": ("tcp", "tls"),
                                        "modes": ("dual", "diskless", "disk")})
    return a


def cells(a):
    out = [{"build": b, "proto": p, "mode": m, "replicas": n}
           for b in a.builds for p in a.proto for m in a.modes for n in a.replicas]
    if a.load:
        out += [{"build": b, "proto": p, "mode": "idle", "replicas": None}
                for b in a.builds for p in a.proto]
    return [dict(c, id=ve.cell_id(c)) for c in out]


def builds(a):
    """{name: its valkey-server}, each built when missing."""
    out = {}
    for name in a.builds:
        print(f"{PROG}: build {name} (cached after the first time)", file=sys.stderr, flush=True)
        try:
            out[name] = os.path.join(valkeypr.build(name, unit_tests=False), "valkey-server")
        except valkeypr.PrError as e:
            fail(f"build {name}: {e}")
        if a.load and not syncload.benchmark_of(out[name]):
            fail(f"build {name} has no valkey-benchmark beside {out[name]}")
    return out


def run_one(a, servers, dataset, certs, tmp):
    load_cpu = a.placement[1]

    def one(c, k, attempt):
        server = servers[c["build"]]
        env = valkeypr.env_of(c["build"])
        bench = syncload.OPEN_LOOP if a.load_tool == "open" else syncload.benchmark_of(server)
        work = os.path.join(tmp, f"{c['id']}-{k}-{attempt}")
        try:
            if c["mode"] == "idle":
                return idle(a, server, env, bench, c, certs, dataset, work, load_cpu)
            load = ((bench, a.load_rps, a.load_seconds, load_cpu, a.load_command)
                    if a.load else None)
            fig = realsync.real_sync(server, env, c, a, dataset, certs, work, c["id"],
                                     during=lambda primary: syncload.During(primary, load))
        except (realsync.SyncFailed, syncload.LoadFailed) as e:
            raise experiment.RunFailed(str(e)) from None
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return ve.flat(fig)
    return one


def idle(a, server, env, bench, c, certs, dataset, work, load_cpu):
    """The load alone on a primary holding the same dataset, not syncing (`env`: the build's
    chunk, valkeypr.env_of)."""
    fleet = a.fleet
    primary = Node(server, os.path.join(work, "primary"), c["proto"], certs,
                   fleet.primary() if fleet else Place(), realsync.primary_options(a),
                   env=env, cpus=a.placement[0], rdb=dataset)
    watch = None
    try:
        if a.event_loop:  # the loop's passes with no sync: what the chunk is read against
            watch = replsynclib.Watch([primary.proc.pid], os.path.join(work, "watch.json"),
                                      event_loop=True)
        fig = syncload.idle_load(bench, primary, a.load_rps, a.load_seconds, cpus=load_cpu,
                                 command=a.load_command)
        if watch:
            watch.stop()
            fig.update(watch.event_loop())
        return fig
    finally:
        if watch:
            watch.kill()
        primary.stop()


def build_trees(servers):
    """Each build's tree under build/valkey-src/, named by the hash of what went into it."""
    return {b: os.path.basename(os.path.dirname(os.path.realpath(s))) for b, s in servers.items()}


def main(argv=None):
    a = parse_args(argv)
    replsynclib.IOBENCH = a.iobench
    replsynclib.PROG = PROG
    iobenchlib.require_binary(PROG, a.iobench)
    if not shutil.which("redis-cli"):
        fail("redis-cli not found (scripts/setup --studies installs redis-tools)")
    servers = builds(a)
    host = hostid.local_host()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    todo = cells(a)
    tmp = tempfile.mkdtemp(prefix="iobench-evidence-")
    try:
        with realsync.sync_place(a, tmp) as certs:
            dataset, rdb, _ = realsync.make_dataset(servers[a.against], a, certs, tmp)
            print(f"{PROG}: RDB {rdb} bytes; {len(todo)} cells x {a.rounds} rounds",
                  file=sys.stderr, flush=True)
            done = experiment.Experiment(
                PROG, a.out, todo, a.rounds, run_one(a, servers, dataset, certs, tmp),
                seed=a.seed, retries=a.retries,
                # Each cell on a quiet host: the last sync's RDB files written back first.
                before_each=hostlock.settle,
                # The host too: a run resumed on another machine is refused, never pooled.
                identity={"servers": build_trees(servers), "host": hostid.host_key(host),
                          "rdb": a.rdb, "where": a.where,
                          **({"large_value": a.large_value} if a.large_value else {}), "cpus": a.cpus,
                          **({"child_cpu": a.child_cpu} if a.child_cpu is not None else {}),
                          **({"plain": True} if a.plain else {}),
                          **({"event_loop": True} if a.event_loop else {}),
                          **({"load_tool": a.load_tool} if a.load_tool != "valkey-benchmark"
                             else {}), "load":
                          [a.load_rps, a.load_seconds] if a.load else None,
                          **({"load_command": a.load_command} if a.load_command != "get"
                             else {})}).run()
    except KeyboardInterrupt:
        fail("interrupted (every server stopped)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    runs = experiment.figures_by_cell(done, with_host=True)
    doc = {"tool": "iobench", "kind": "valkey-evidence", "base": "9.1.2",
           "command": iobenchlib.recorded_command(PROG), "builds": a.builds,
           **({"against": a.against} if a.against != "stock" else {}),
           "build_trees": build_trees(servers),
           "rdb_bytes": rdb, **({"large_value_bytes": a.large_value} if a.large_value else {}),
           "rounds": a.rounds, "cpus": a.cpus, **({"plain": True} if a.plain else {}),
           **({"event_loop": True} if a.event_loop else {}),
           # The host, so a design's reading never takes another host's harms for its own.
           "host": host, "started": experiment.first_started(done),
           **({"child_cpu": a.child_cpu} if a.child_cpu is not None else {}), "where": a.where,
           "link": {"rate": a.rate, "mtu": a.mtu} if a.where == "fleet" else None,
           "load": {"rps": a.load_rps, "seconds": a.load_seconds, "command": a.load_command,
                    "tool": a.load_tool}
           if a.load else None,
           "sources": {"sync": "iobench watch (eBPF) on the primary and replicas: the socket "
                               "writer's writes and CPU; the sync's time from REPLICAOF to every "
                               "replica's link up",
                       "primary's sync": "the primary's log, millisecond timestamps: its first "
                                         "'Starting BGSAVE for SYNC' to its last replica online "
                                         "('Synchronization with replica ... succeeded'; a dual "
                                         "channel replica's at its first ACK after its load)",
                       "event loop": "iobench watch (eBPF, raw sys_enter): the socket writer's "
                                     "epoll_wait (+ epoll_pwait) calls, one per pass of its event "
                                     "loop, its epoll_ctl calls and its reads of pipes",
                       "latency": ("iobench load (open loop): each request's latency from "
                                   "its intended send time, HdrHistogram-layout slices of "
                                   "100 ms; the sync's figures from the slices inside "
                                   "REPLICAOF..done" if a.load_tool == "open" else
                                   "valkey-benchmark's own percentile distribution (p99.9: the "
                                   "first percentile it lists at or above 99.9%)"),
                       **({"loop passes": "iobench watch --event-loop on the primary alone "
                                          "(eBPF raw tracepoints): each epoll thread's busy "
                                          "time from a wait's return to its next wait, and "
                                          "each write of at least 4 KiB (a chunk, not an INFO reply), timed in the kernel "
                                          "into HdrHistogram-layout buckets"}
                          if a.event_loop else {}),
                       **({"chunk": "NAME~SIZE builds: one binary (NAME~env) whose "
                                    "REPL_CHUNK_SIZE is read at start from IOBENCH_REPL_CHUNK, "
                                    "set to SIZE in each cell's primary"}
                          if any(valkeypr.runtime_binary(b) for b in a.builds) else {}),
                       "memory": "/proc/PID/status VmRSS and /proc/CHILD/smaps_rollup "
                                 "Private_Dirty every 20 ms; INFO memory every 100 ms",
                       "child CPU": "/proc/CHILD/stat's processor field with each memory "
                                    "sample: the CPUs the fork child was seen on",
                       "interval": "95% bootstrap interval of the median per-round ratio "
                                   "(statslib.compare), rounds in a balanced order"},
           "cells": [dict(c, runs=runs.get(c["id"], [])) for c in todo],
           "failures": experiment.failures(done)}
    doc["comparisons"] = ve.comparisons(doc)
    report = iobenchlib.write_result_folder(a.out, doc, ve.report_md(doc))
    print(f"{PROG}: {len(todo)} cells in {report}")
    if doc["failures"]:
        fail(f"{len(doc['failures'])} run(s) failed every attempt (the same command retries "
             f"them): {doc['failures'][0]}")


if __name__ == "__main__":
    main()
