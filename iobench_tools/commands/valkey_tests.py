"""Valkey's own replication tests, the stock build beside each patch of the 8.1.1 series
(patches/valkey-8.1.1-series/) or each pull request of patches/upstream/ on 9.1.2.

Runs units of Valkey 8.1.1's Tcl test suite (the replication ones by default) over TCP and TLS,
once per build (scripts/build-valkey-source --upstream LEVEL builds any that is missing: stock,
0001..0004), and sets the results side by side: per unit, build and protocol the tests passed,
failed and skipped, and for each patched build whether it passes every test the stock build
passes. A test a patched build fails that stock passed is run again (its unit, on both builds) to
tell a flaky test from a broken one.

  scripts/valkey-tests [--builds stock,0001,0002,0003,0004] [--proto tcp,tls] [--units ...]
  scripts/valkey-tests --base 9.1.2 [--builds stock,01-fail-fast,...,series]

With --base 9.1.2 the builds are Valkey 9.1.2 stock, each pull request of patches/upstream/NAME/
(with the PRs it needs) and the whole series (scripts/valkey-pr; built on first use), and the
suite is the series' own (the PRs' new tests included, so stock shows which of them it fails).

Each unit runs in its own copy of the suite (its own ports, its own servers, `--clients 1`),
--jobs at a time, bounded by --unit-timeout; every server a unit started is killed when it ends,
also on a timeout or Ctrl-C, and nothing is left in the temporary directory. Writes
OUT/results.json and OUT/report.md. Needs tclsh (Debian's tcl) and, for TLS, tcl-tls.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from iobench_tools.lib.kernel import axes
from iobench_tools.lib.kernel.iobenchlib import ROOT, command_parser, recorded_command
from iobench_tools.lib.valkey import upstreamlib, valkeypr, valkeytests

PROG = "valkey-tests"
REPLICATION_UNITS = ("integration/replication", "integration/replication-2",
                     "integration/replication-3", "integration/replication-4",
                     "integration/replication-psync", "integration/replication-buffer",
                     "integration/dual-channel-replication", "integration/psync2",
                     "integration/psync2-reg", "integration/psync2-pingoff",
                     "integration/psync2-master-restart", "integration/block-repl",
                     "integration/skip-rdb-checksum", "integration/failover")


def fail(msg, code=1):
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    sys.exit(code)


def parse_args(argv=None):
    ap = command_parser(__doc__)
    ap.add_argument("--base", default="8.1.1", choices=("8.1.1", "9.1.2"),
                    help="the Valkey release: 8.1.1 and the 0001..0004 series, or 9.1.2 and the "
                         "pull requests of patches/upstream/NAME/ (8.1.1; its series is in "
                         "patches/valkey-8.1.1-series/)")
    ap.add_argument("--builds", default=None,
                    help="stock and the builds to test (8.1.1: stock,0001,0002,0003,0004; "
                         "9.1.2: stock,series)")
    axes.add_proto(ap, note="the units over TCP, and over --tls")
    ap.add_argument("--units", default=",".join(REPLICATION_UNITS),
                    help="the suite's units, as runtest's --single names them (the replication "
                         "units: " + ", ".join(u.split("/")[1] for u in REPLICATION_UNITS) + ")")
    ap.add_argument("--jobs", type=int, default=2, help="units run at once (2)")
    ap.add_argument("--unit-timeout", type=int, default=1200,
                    help="seconds a unit may take before it is killed and counted failed (1200)")
    ap.add_argument("--out", default=None,
                    help="the folder results.json and report.md go to "
                         "(results/upstream/valkey-tests; 9.1.2: results/upstream-9.1/valkey-tests)")
    a = ap.parse_args(argv)
    if a.base == "9.1.2":
        known = valkeypr.build_names()
        a.builds = (a.builds or "stock,series").split(",")
        a.out = a.out or os.path.join(ROOT, "results", "upstream-9.1", "valkey-tests")
    else:
        known = ["stock", *sorted(p[:4] for p in os.listdir(os.path.join(ROOT, "patches", "valkey-8.1.1-series"))
                                 if re.match(r"\d{4}-", p))]
        a.builds = (a.builds or "stock,0001,0002,0003,0004").split(",")
        a.out = a.out or os.path.join(ROOT, "results", "upstream", "valkey-tests")
    if "stock" not in a.builds:
        ap.error(f"invalid --builds '{','.join(a.builds)}': stock is the reference, include it")
    bad = [b for b in a.builds if b not in known]
    if bad:
        ap.error(f"invalid --builds: '{bad[0]}' (expected one of {', '.join(known)})")
    a.proto = a.proto.split(",")
    if not a.proto or any(p not in ("tcp", "tls") for p in a.proto):
        ap.error(f"invalid --proto '{','.join(a.proto)}': expected tcp, tls or tcp,tls")
    a.units = [u if "/" in u else f"integration/{u}" for u in a.units.split(",") if u]
    if not a.units:
        ap.error("invalid --units '': name at least one unit")
    if not 1 <= a.jobs <= 8:
        ap.error(f"invalid --jobs {a.jobs}: expected 1..8")
    if not 10 <= a.unit_timeout <= 7200:
        ap.error(f"invalid --unit-timeout {a.unit_timeout}: expected 10..7200 seconds")
    return a


def run_gtests(a, servers):
    """On 9.1.2, each build's GoogleTest suite (src/unit), one build at a time: {build: its
    figures}; nothing on 8.1.1, whose release has none."""
    if a.base != "9.1.2":
        return {}
    out = {}
    for b, server in servers.items():
        print(f"{PROG}: {b}: Valkey's GoogleTest suite", flush=True)
        out[b] = valkeypr.run_gtests(os.path.dirname(server), timeout=a.unit_timeout)
    return out


def builds_and_suite(a):
    """Each build's valkey-server, and the suite the units run from; fails with one line when a
    build cannot be had."""
    a.patches = {}
    if a.base == "9.1.2":
        try:
            servers = {}
            for b in a.builds:
                print(f"{PROG}: Valkey 9.1.2 {b}: building (once; cached)", flush=True)
                servers[b] = os.path.join(valkeypr.build(b), "valkey-server")
                a.patches[b] = {os.path.relpath(p, ROOT): valkeypr.sha256(p)
                                for p in valkeypr.patches_of(b)}
            return servers, valkeypr.build(valkeypr.SERIES)
        except valkeypr.PrError as e:
            fail(str(e))
    try:
        servers = {b: upstreamlib.server_of(b) for b in a.builds}
    except upstreamlib.BuildMissing as e:
        fail(str(e))
    return servers, os.path.join(upstreamlib.UPSTREAM, "tests")


def check_tools(a):
    if not shutil.which("tclsh"):
        fail("tclsh not found (Debian's tcl package; scripts/setup --studies installs it)")
    if "tls" in a.proto:
        probe = subprocess.run(["tclsh"], input="puts [package require tls]", text=True,
                               capture_output=True)
        if probe.returncode != 0:
            fail("Tcl's tls package is missing for --proto tls (Debian's tcl-tls; "
                 "scripts/setup --studies installs it)")
    if not shutil.which("openssl") and "tls" in a.proto:
        fail("openssl not found: the TLS units need its certificates")


def main(argv=None):
    a = parse_args(argv)
    check_tools(a)
    servers, suite = builds_and_suite(a)
    known = valkeytests.units_of(suite)
    bad = [u for u in a.units if u not in known]
    if bad:
        fail(f"invalid --units: '{bad[0]}' is not a unit of Valkey's suite "
             f"(e.g. {', '.join(sorted(known)[:4])})", 2)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    gtests = run_gtests(a, servers)
    tmp = tempfile.mkdtemp(prefix="iobench-valkey-tests-")
    try:
        runner = valkeytests.Runner(suite, servers["stock"], tmp, a.unit_timeout, a.jobs)
    except valkeytests.SlotsBusy as e:
        shutil.rmtree(tmp, ignore_errors=True)
        fail(str(e))
    todo = [(b, p, u) for b in a.builds for p in a.proto for u in a.units]
    t0 = time.monotonic()
    try:
        with ThreadPoolExecutor(max_workers=a.jobs) as pool:
            futures = {key: pool.submit(runner.run, servers[key[0]], key[1], key[2])
                       for key in todo}
            runs = {key: f.result() for key, f in futures.items()}
        retried = valkeytests.retry_regressions(runs, runner, servers, a.builds)
    except KeyboardInterrupt:
        runner.kill_all()
        fail("interrupted (every server stopped)", 130)
    finally:
        runner.kill_all()
        shutil.rmtree(tmp, ignore_errors=True)
    command = recorded_command("valkey-tests")
    doc = valkeytests.document(a, runs, retried, time.monotonic() - t0, servers, command)
    if gtests:
        doc["gtest"] = gtests
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(doc, f, indent=1)
    with open(os.path.join(a.out, "report.md"), "w") as f:
        f.write(valkeytests.report_md(doc))
    for line in valkeytests.verdict_lines(doc):
        print(f"{PROG}: {line}")
    for build, g in gtests.items():
        print(f"{PROG}: {build}'s GoogleTest suite: {g['status']}, {g['passed']} passed, "
              f"failed: {', '.join(g['failed']) or 'none'} ({g['seconds']} s)")
    print(f"{PROG}: {os.path.relpath(os.path.join(a.out, 'report.md'), ROOT)}")
    gtests_hold = all(set(g["failed"]) <= set(gtests["stock"]["failed"]) and g["status"] != "timeout"
                      for g in gtests.values()) if gtests else True
    return 0 if all(v["passes_stock"] for v in doc["verdicts"].values()) and gtests_hold else 1


if __name__ == "__main__":
    sys.exit(main())
