"""scripts/valkey-evidence: valkey-benchmark's report read right, builds compared round by round,
bad input refused in one line; and, where the 9.1.2 builds are already made, one tiny real study
with its load and memory probes and nothing left running."""
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from iobench_tools.lib.valkey import realsync, syncload, valkeyevidence as ve
from iobench_tools.lib.valkey.replsynclib import Fleet, bits_per_second
from kernel_progress import servers_in

# Shares no namespace name, netns lock, package or host-wide check with the other script tests:
# a lane apart (scripts/test).
pytestmark = pytest.mark.apart

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "valkey-evidence"
BIN = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))
BUILDS = ROOT / "build" / "valkey" / "9.1"

# The tail of a real valkey-benchmark 9.1.2 run (-t get -c 4 --rps 5000 --duration 2).
REPORT = """Latency by percentile distribution:
0.000% <= 0.015 milliseconds (cumulative count 1272)
50.000% <= 0.039 milliseconds (cumulative count 5418)
99.805% <= 0.279 milliseconds (cumulative count 9984)
99.902% <= 0.311 milliseconds (cumulative count 9993)
100.000% <= 0.423 milliseconds (cumulative count 10002)

Cumulative distribution of latencies:
99.900% <= 0.303 milliseconds (cumulative count 9992)

Summary:
  throughput summary: 4983.56 requests per second
  latency summary (msec):
          avg       min       p50       p95       p99       max
        0.043     0.008     0.039     0.111     0.175     0.423
"""


def test_the_primarys_sync_runs_from_its_bgsave_to_its_last_replica_online(tmp_path):
    """sync_s counts from REPLICAOF, so a replica's cron (about a second) quantises it; the
    primary's log times the sync from its BGSAVE to each replica online, to the millisecond."""
    log = tmp_path / "primary.log"
    log.write_text(
        "1:M 29 Nov 2026 04:12:09.100 * Replica 127.0.0.1:7001 asks for synchronization\n"
        "1:M 29 Nov 2026 04:12:09.200 * Starting BGSAVE for SYNC with target: replicas sockets\n"
        # A dual channel replica's main channel asks at once: not the end of its sync.
        "1:M 29 Nov 2026 04:12:09.207 * Partial resynchronization request from 127.0.0.1:7002 "
        "accepted. Sending 0 bytes of backlog starting from offset 1.\n"
        "1:M 29 Nov 2026 04:12:10.450 * Synchronization with replica 127.0.0.1:7001 succeeded\n"
        "1:M 29 Nov 2026 04:12:10.900 * Synchronization with replica 127.0.0.1:7002 succeeded\n")
    assert realsync.replsynclib.sync_span(log.read_text(), 1) == pytest.approx(1.25, abs=1e-3)
    assert realsync.replsynclib.sync_span(log.read_text(), 2) == pytest.approx(1.7, abs=1e-3)
    assert realsync.replsynclib.sync_span(log.read_text(), 3) is None  # a replica never came online


def test_the_benchmarks_own_percentiles_are_read():
    got = syncload.parse_benchmark(REPORT)
    assert got == {"avg_ms": 0.043, "p50_ms": 0.039, "p95_ms": 0.111, "p99_ms": 0.175,
                   "p999_ms": 0.311, "max_ms": 0.423, "rps": 4983.56}
    with pytest.raises(syncload.LoadFailed, match="no latency summary: Could not connect"):
        syncload.parse_benchmark("Could not connect to Valkey at 127.0.0.1:1: refused\n")


def runs(values, key="p99_ms"):
    return [{key: v, "round": k} for k, v in enumerate(values)]


def test_a_build_is_set_against_stock_round_by_round():
    # The series' p99 is 1.5x stock's in every round under a drift of 1x..3x: paired, it is
    # shown higher; an equal figure is parity within noise.
    drift = [1.0, 3.0, 1.5, 2.5, 1.2]
    doc = {"cells": [
        {"id": "tcp-dual-n1-stock", "build": "stock", "proto": "tcp", "mode": "dual",
         "replicas": 1, "runs": [dict(r, sync_s=1.0) for r in runs(drift)]},
        {"id": "tcp-dual-n1-series", "build": "series", "proto": "tcp", "mode": "dual",
         "replicas": 1, "runs": [dict(r, sync_s=1.0) for r in runs([1.5 * d for d in drift])]}]}
    [c] = ve.comparisons(doc)
    assert c["build"] == "series" and c["figures"]["p99_ms"]["verdict"] == "higher"
    assert abs(c["figures"]["p99_ms"]["ratio"] - 1.5) < 1e-9
    assert c["figures"]["sync_s"]["verdict"] == "parity within noise"
    assert "writes" not in c["figures"]  # no run has it: no column
    text = ve.report_md(dict(doc, comparisons=[c], command="scripts/valkey-evidence", builds=[
        "stock", "series"], rdb_bytes=1, rounds=5, cpus="0,1", where="loopback",
        load={"rps": 2000, "seconds": 2}, failures=[]))
    assert "## series against stock" in text and "x1.500 [" in text and "higher" in text
    # Against another baseline (the chunk variants against the series at 16K): the same pairs,
    # the baseline named in every heading.
    renamed = [dict(c, build={"stock": "series@16k", "series": "series@64k"}[c["build"]])
               for c in doc["cells"]]
    moved = {"cells": [dict(c, id=ve.cell_id(c)) for c in renamed], "against": "series@16k"}
    [c2] = ve.comparisons(moved)
    assert c2["build"] == "series@64k" and c2["figures"]["p99_ms"] == c["figures"]["p99_ms"]
    text = ve.report_md(dict(moved, comparisons=[c2], command="x", builds=["series@16k",
                        "series@64k"], rdb_bytes=1, rounds=5, cpus="0,1", where="loopback",
                        load=None, failures=[]))
    assert "## series@64k against series@16k" in text and "beside series@16k" in text


def test_the_writers_event_loop_calls_are_columns_only_where_the_runs_counted_them():
    loop = {"writer_epoll_waits": 700, "writer_epoll_ctls": 40, "writer_pipe_reads": 1600}
    def doc(extra):
        return {"cells": [
            {"id": "tls-diskless-n1-stock", "build": "stock", "proto": "tls", "mode": "diskless",
             "replicas": 1, "runs": [dict(r, sync_s=1.0, **extra) for r in runs([1, 2, 3])]},
            {"id": "tls-diskless-n1-series", "build": "series", "proto": "tls",
             "mode": "diskless", "replicas": 1,
             "runs": [dict(r, sync_s=1.0, **{k: 2 * v for k, v in extra.items()})
                      for r in runs([1, 2, 3])]}],
            "command": "x", "builds": ["stock", "series"], "rdb_bytes": 1, "rounds": 3,
            "cpus": "0,1", "where": "loopback", "load": None, "failures": []}
    counted = doc(loop)
    [c] = ve.comparisons(counted)
    assert c["figures"]["writer_epoll_waits"]["ratio"] == 2.0
    text = ve.report_md(dict(counted, comparisons=[c]))
    assert "writer epoll_wait | writer epoll_ctl | writer pipe reads |" in text
    assert "700 → 1400 x2.000" in text
    older = doc({})
    [c] = ve.comparisons(older)
    assert "writer_epoll_waits" not in c["figures"]
    assert "epoll" not in ve.report_md(dict(older, comparisons=[c]))


def test_one_slow_link_among_fast_ones_is_timed_apart():
    assert Fleet.link_rates(4, ["100mbit", "5gbit"]) == ["100mbit", "5gbit", "5gbit", "5gbit"]
    assert Fleet.link_rates(2, "5gbit") == ["5gbit", "5gbit"]
    assert bits_per_second("5Gbit") == 5e9 and bits_per_second("100mbit") == 1e8
    rates = ["100mbit", "5gbit", "5gbit", "5gbit"]
    assert realsync.sync_by_link_rate({0: 9.0, 1: 8.5, 2: 8.7, 3: 8.6}, rates) == {
        "fast_sync_s": 8.7, "slow_sync_s": 9.0}
    assert realsync.sync_by_link_rate({0: 1.0, 1: 1.2}, ["5gbit", "5gbit"]) == {}
    assert ve.links_text({"rate": "100mbit,5gbit", "mtu": 9001}) == (
        "; links: replica 1 at 100mbit, the others at 5gbit (tbf, MTU 9001)")
    assert ve.links_text({"rate": "5gbit", "mtu": 9001}) == ""


def test_a_chunk_variant_is_a_harness_build_of_a_pr_that_names_the_chunk(tmp_path):
    from iobench_tools.lib.valkey import valkeypr
    assert valkeypr.split_variant("series@256k") == ("series", 262144)
    assert valkeypr.split_variant("05-chunk-size") == ("05-chunk-size", None)
    assert valkeypr.known_build("04-whole-chunks@32k") and not valkeypr.known_build("x@16k")
    for bad in ("series@0", "series@huge", "series-asan@16k", "series@512"):
        with pytest.raises(valkeypr.PrError, match="invalid chunk variant"):
            valkeypr.split_variant(bad)
    src = tmp_path / "src"
    src.mkdir()
    (src / "server.h").write_text("#define A 1\n#define REPL_CHUNK_SIZE (64 * 1024)\n")
    valkeypr.set_chunk(str(tmp_path), 16384)
    assert (src / "server.h").read_text() == "#define A 1\n#define REPL_CHUNK_SIZE 16384\n"
    (src / "server.h").write_text("#define PROTO_IOBUF_LEN (1024 * 16)\n")
    with pytest.raises(valkeypr.PrError, match="define REPL_CHUNK_SIZE"):
        valkeypr.set_chunk(str(tmp_path), 16384)


def test_one_binary_runs_every_chunk_read_once_at_start(tmp_path):
    """NAME~SIZE: one build (NAME~env) for every size, its chunk from IOBENCH_REPL_CHUNK; the
    code the build appends to server.c, compiled here beside a main that prints the chunk."""
    from iobench_tools.lib.valkey import valkeypr
    assert valkeypr.split_variant("series~64k") == ("series", 65536)
    assert valkeypr.split_variant("series~64k#2") == ("series", 65536)
    assert valkeypr.split_variant("series~env") == ("series", None)
    assert {valkeypr.runtime_binary(b) for b in ("series~16k", "series~64k", "series~16k#2")} == {
        "series~env"}
    assert valkeypr.runtime_binary("series@64k") is None and valkeypr.env_of("series@64k") is None
    assert valkeypr.env_of("series~32k") == {"IOBENCH_REPL_CHUNK": "32768"}
    for bad in ("series@16k#2", "series~16k#x", "series-asan~16k", "series~512"):
        assert not valkeypr.known_build(bad), bad
    src = tmp_path / "src"
    src.mkdir()
    (src / "server.h").write_text("#define A 1\n#define REPL_CHUNK_SIZE (16 * 1024)\n")
    (src / "server.c").write_text("#include <errno.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
                                  '#include "server.h"\n')
    valkeypr.set_runtime_chunk(str(tmp_path))
    assert "#define REPL_CHUNK_SIZE iobench_repl_chunk" in (src / "server.h").read_text()
    (src / "main.c").write_text('#include <stdio.h>\n#include "server.h"\n'
                                'int main(void) { printf("%zu\\n", (size_t)REPL_CHUNK_SIZE); }\n')
    exe = tmp_path / "chunk"
    subprocess.run(["cc", "-Wall", "-Werror", "-o", str(exe), str(src / "server.c"),
                    str(src / "main.c")], check=True, timeout=60)

    def run(value):
        env = dict(os.environ)
        env.pop("IOBENCH_REPL_CHUNK", None)
        if value is not None:
            env["IOBENCH_REPL_CHUNK"] = value
        return subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=10)
    assert run(None).stdout == "16384\n"  # unset: 05's 16 KiB
    assert run("65536").stdout == "65536\n" and run("32768").stdout == "32768\n"
    for bad in ("64k", "", "512", "16777217", "-1", "99999999999999999999999"):
        p = run(bad)
        assert p.returncode == 1 and p.stdout == "", bad
        assert p.stderr == f"invalid IOBENCH_REPL_CHUNK '{bad}': expected bytes 1024..16777216\n"


def test_bad_input_is_refused_in_one_line():
    for args, said in ((["--builds", "series"], "invalid --builds 'series'"),
                       (["--builds", "series,series"], "invalid --builds 'series,series'"),
                       (["--builds", "series,series@1m"], "invalid --against 'stock'"),
                       (["--builds", "stock,series@7"], "invalid --builds 'stock,series@7'"),
                       (["--builds", "stock,02-nope"], "invalid --builds 'stock,02-nope'"),
                       (["--load-rps", "5"], "invalid --load-rps 5"),
                       (["--modes", "dual,x"], "invalid --modes 'dual,x'"),
                       (["--rate", "100mbit,fast"], "invalid --rate '100mbit,fast'"),
                       (["--builds", "stock,series~16k#x"],
                        "invalid --builds 'stock,series~16k#x'"),
                       (["--event-loop", "--plain"], "invalid --event-loop with --plain")):
        p = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and said in p.stderr, p.stderr
        assert "Traceback" not in p.stderr


@pytest.mark.slow
@pytest.mark.real_server
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="iobench watch needs root (eBPF)")
@pytest.mark.skipif(not all((BUILDS / b / "valkey-benchmark").exists() for b in ("stock", "series")),
                    reason="Valkey 9.1.2's stock and series builds are not made here (scripts/"
                           "valkey-pr or scripts/valkey-tests --base 9.1.2 make them; setup does not)")
def test_a_tiny_study_measures_latency_and_memory_and_leaves_nothing(tmp_path):
    out = tmp_path / "out"
    p = subprocess.run([str(SCRIPT), "--builds", "stock,series", "--proto", "tcp", "--modes",
                        "dual", "--replicas", "1", "--rounds", "2", "--rdb", "4M",
                        "--load-seconds", "1", "--large-value", "3M", "--iobench", BIN,
                        "--out", str(out),
                        "--cache-dir", str(tmp_path / "cache")],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "results.json").read_text())
    cells = {c["id"]: c for c in doc["cells"]}
    sync = cells["tcp-dual-n1-series"]["runs"][0]
    assert sync["p99_ms"] > 0 and sync["p999_ms"] >= sync["p99_ms"] and sync["rps"] > 0
    assert sync["primary_rss_bytes"] > 0 and sync["samples"] > 0 and sync["writes"] > 0
    # the dual channel's writer is the save child: no event loop of its own
    assert sync["writer_epoll_waits"] == 0 and sync["writer_pipe_reads"] == 0
    assert cells["tcp-idle-stock"]["runs"][0]["p50_ms"] > 0
    assert doc["large_value_bytes"] == 3 << 20 and doc["rdb_bytes"] > 4 << 20
    assert "## series against stock" in (out / "report.md").read_text()
    assert not servers_in("iobench-evidence-"), "a server outlived the study"


def test_a_write_load_spreads_its_keys_and_a_silent_benchmark_is_a_failed_run():
    from types import SimpleNamespace
    node = SimpleNamespace(certs="c", proto="tls", place=SimpleNamespace(prefix=[]),
                           ip="127.0.0.1", port=7000)
    load = syncload.Load("/bin/true", node, 500, 1, command="set")
    assert load.cmd[load.cmd.index("-t") + 1] == "set" and "-r" in load.cmd
    assert "--tls" in load.cmd and load.cmd[load.cmd.index("--cacert") + 1] == "c/ca.crt"
    with pytest.raises(syncload.LoadFailed, match="no latency summary"):
        load.result()
    assert "-r" not in syncload.Load("/bin/true", node, 500, 1).cmd  # GET reads one key


def test_the_fork_child_is_placed_apart_and_where_it_ran_is_read_from_the_kernel():
    from types import SimpleNamespace
    assert realsync.primary_options(SimpleNamespace(child_cpu=1)) == [
        "--rdbcompression", "no", "--bgsave-cpulist", "1"]
    assert realsync.primary_options(SimpleNamespace()) == ["--rdbcompression", "no"]
    cpus = sorted(os.sched_getaffinity(0))
    spin = subprocess.Popen(["taskset", "-c", str(cpus[-1]), "/usr/bin/python3", "-c",
                             "import time\nend = time.monotonic() + 5\n"
                             "while time.monotonic() < end: pass"])  # taskset execs it
    try:
        time.sleep(0.3)
        assert syncload.last_cpu(spin.pid) == cpus[-1]
    finally:
        spin.kill()
        spin.wait()
    assert syncload.last_cpu(spin.pid) is None  # gone
    runs_with = [dict(r, child_cpus=[1]) for r in runs([1, 2])]
    doc = {"child_cpu": 1, "cells": [{"runs": runs_with}, {"runs": runs([3])}]}
    assert ve.child_text(doc) == "; the fork child on CPU 1 (bgsave-cpulist); the fork child seen on CPU 1"
    assert ve.child_text({"cells": [{"runs": runs([1])}]}) == ""
    p = subprocess.run([str(SCRIPT), "--child-cpu", "999"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and "invalid --child-cpu 999" in p.stderr, p.stderr


def test_the_event_loops_figures_are_read_from_the_watch():
    from iobench_tools.lib.valkey.replsynclib import loop_figures
    q = {"count": 3, "p50": 10.0, "p90": 12.0, "p99": 20.5, "p999": 30.0, "max": 31.0}
    doc = {c: dict(q, count=i) for i, c in enumerate(("iterations_with_large_write",
                                                       "iterations", "large_writes_in_loop",
                                                       "large_writes_elsewhere"))}
    fig = loop_figures(doc)
    assert fig["loop_write_count"] == 0 and fig["loop_other_count"] == 1
    assert fig["write_child_count"] == 3 and fig["write_in_loop_p99_us"] == 20.5
    assert fig["loop_write_max_us"] == 31.0 and fig["loop_other_p999_us"] == 30.0


@pytest.mark.slow
@pytest.mark.real_server
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="iobench watch needs root (eBPF)")
@pytest.mark.skipif(not (BUILDS / "series~env" / "valkey-benchmark").exists(),
                    reason="Valkey 9.1.2's one-binary series~env build is not made here "
                           "(scripts/valkey-evidence --builds series~16k,... makes it; setup "
                           "does not)")
def test_one_binary_at_two_chunks_writes_what_each_chunk_says(tmp_path):
    """series~16k and series~64k: the same valkey-server, its dual channel child's writes 4
    times fewer at 64K, and the primary's event loop timed."""
    out = tmp_path / "out"
    p = subprocess.run([str(SCRIPT), "--builds", "series~16k,series~64k", "--against",
                        "series~16k", "--proto", "tcp", "--modes", "dual,diskless",
                        "--replicas", "1", "--rounds", "1", "--rdb", "8M", "--load-seconds",
                        "1", "--event-loop", "--iobench", BIN, "--out", str(out),
                        "--cache-dir", str(tmp_path / "cache")],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "results.json").read_text())
    assert len(set(doc["build_trees"].values())) == 1, doc["build_trees"]
    runs = {c["id"]: c["runs"][0] for c in doc["cells"]}
    small, large = runs["tcp-dual-n1-series~16k"], runs["tcp-dual-n1-series~64k"]
    assert 3.5 < small["writes"] / large["writes"] < 4.5, (small["writes"], large["writes"])
    assert small["write_child_count"] > 0 and small["loop_write_count"] == 0
    diskless = runs["tcp-diskless-n1-series~64k"]
    assert diskless["loop_write_count"] > 0 and diskless["loop_write_p99_us"] > 0
    assert "replica_cpu_s_per_gib" not in diskless  # the replicas were not watched
    assert "chunk" in doc["sources"] and "loop passes" in doc["sources"]
    assert not servers_in("iobench-evidence-"), "a server outlived the study"


def test_a_plain_study_has_no_watch_and_shows_only_what_it_measured(tmp_path):
    # One binary at two chunks (series~env, without the GoogleTest suite a study never runs):
    # one -O0 build in CI, where stock and series with their suites cost 632 CPU-s.
    out = tmp_path / "out"
    p = subprocess.run([str(SCRIPT), "--builds", "series~16k,series~64k", "--against",
                        "series~16k", "--proto", "tcp", "--modes",
                        "diskless", "--replicas", "1", "--rounds", "2", "--rdb", "4M",
                        "--load-seconds", "1", "--plain", "--iobench", BIN, "--out", str(out),
                        "--cache-dir", str(tmp_path / "cache")],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "results.json").read_text())
    assert len(set(doc["build_trees"].values())) == 1, doc["build_trees"]
    sync = {c["id"]: c for c in doc["cells"]}["tcp-diskless-n1-series~64k"]["runs"][0]
    assert doc["plain"] and sync["p99_ms"] > 0 and sync["sync_s"] > 0
    assert "writes" not in sync and "writer_cpu_s_per_gib" not in sync
    report = (out / "report.md").read_text()
    assert "- plain (--plain): no iobench watch" in report
    assert "client p99 ms" in report and "writer CPU s/GiB" not in report
    assert not servers_in("iobench-evidence-"), "a server outlived the study"


def test_the_report_says_whether_the_load_outlasted_each_sync():
    doc = {"load": {"seconds": 10, "rps": 2000},
           "cells": [{"mode": "dual", "runs": [{"sync_s": 9.5}, {"sync_s": 11.2}]},
                     {"mode": "idle", "runs": [{"p99_ms": 1.0}]}]}
    (line,) = ve.load_coverage(doc)
    assert "10 s window outlasted the whole sync in 1 of 2 runs" in line and "11.200 s" in line
    assert ve.load_coverage(dict(doc, load=None)) == []
    assert ve.load_coverage({"load": doc["load"], "cells": []}) == []
