"""The upstream Valkey patches' evidence, PR #817's way: each patch of the 8.1.1 series
(patches/valkey-8.1.1-series/) beside the build before it, in real full syncs, at the chunk it
concerns.

  whole   0002 (whole chunks) beside stock, at 16K: dual-channel and diskless
  unsent  0003 (keep the unsent bytes) beside 0002, at 64K and 256K: disk-based
  chunk   0004 (the series, 64K) beside stock (16K): disk-based, diskless and dual-channel

Every build comes from scripts/build-valkey-source --upstream (built when missing). Per cell (a
build, TCP or TLS, a mode, N replicas) the same RDB (--rdb bytes of iobench's replication stream)
is synced to N empty replicas at once, every cell once per round in a balanced order, --rounds
rounds, each sync watched by `iobench watch` (the experiment kernel: a stopped study resumes
with the same command); then one more sync per build and mode over TLS to
one replica is traced by strace from outside, to cross-check the watched counts. Per comparison
and figure (the writer's writes, bytes per write, file or pipe bytes read per byte written, the
writer's and the whole primary's CPU per GiB delivered, the sync time): both medians, the ratio
patched/base with its 95% interval and a verdict: better, parity within noise, or worse.

  scripts/upstream-evidence [--patches whole,unsent,chunk] [--replicas 1,4] [--proto tcp,tls]
      [--rounds 5] [--rdb 100M] [--where loopback|fleet]

Writes OUT/results.json and OUT/report.md. Every server it starts is stopped, also on Ctrl-C.
"""
import os
import shutil
import signal
import sys
import tempfile

from iobench_tools.lib.kernel import axes
from iobench_tools.lib.kernel import experiment, iobenchlib
from iobench_tools.lib.kernel.iobenchlib import ROOT
from iobench_tools.lib.valkey import realsync, replsynclib, upstreamlib

PROG = replsynclib.PROG = "upstream-evidence"


def fail(msg):
    sys.exit(f"{PROG}: error: {msg}")


def parse_args(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    ap.add_argument("--patches", default=",".join(upstreamlib.PATCHES),
                    help="the comparisons: " + ", ".join(upstreamlib.PATCHES))
    ap.add_argument("--modes", default="dual,diskless,disk",
                    help="keep only these modes of each comparison")
    axes.add_proto(ap)
    ap.add_argument("--no-strace", dest="strace", action="store_false",
                    help="skip the strace cross-check (it runs by default)")
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "upstream", "loopback"),
                    help="the folder results.json and report.md go to")
    replsynclib.add_sync_options(ap)
    iobenchlib.add_binary_option(ap)
    a = ap.parse_args(argv)
    replsynclib.check_sync_args(ap, a, {"patches": tuple(upstreamlib.PATCHES),
                                        "proto": ("tcp", "tls"),
                                        "modes": ("dual", "diskless", "disk")})
    return a


def sync(c, a, servers, dataset, certs, tmp, name, trace=False):
    """One real sync of cell c; raises the kernel's RunFailed when it does not complete."""
    work = os.path.join(tmp, name)
    try:
        return realsync.real_sync(servers[c["build"]], None, c, a, dataset, certs, work,
                                  upstreamlib.cell_id(c), trace=trace)
    except realsync.SyncFailed as e:
        raise experiment.RunFailed(str(e)) from None


def run(a, todo, servers, dataset, certs, tmp):
    """Every cell once per round in the experiment kernel's balanced order (seeded by --seed):
    a sync that fails is tried again, and a study stopped and started again with the same
    command runs only the syncs it lacks (progress.json in --out)."""
    cells = [dict(c, id=upstreamlib.cell_id(c)) for c in todo]
    done = experiment.Experiment(
        PROG, a.out, cells, a.rounds,
        lambda c, k, attempt: sync(c, a, servers, dataset, certs, tmp,
                                   f"{c['id']}-{k}-{attempt}"),
        seed=a.seed, identity={"servers": servers, "rdb": a.rdb, "where": a.where,
                               "cpus": a.cpus}).run()
    failed = experiment.failures(done)
    if failed:
        fail(f"{len(failed)} sync(s) failed every attempt (the same command retries them): "
             f"{failed[0]}")
    runs = {cid: [{k: v for k, v in f.items() if k != "round"} for f in figs]
            for cid, figs in experiment.figures_by_cell(done).items()}
    traced = {}
    if a.strace and shutil.which("strace"):
        for c in upstreamlib.traced_cells(todo):
            cid = upstreamlib.cell_id(c)
            try:
                traced[cid] = sync(c, a, servers, dataset, certs, tmp, f"{cid}-strace",
                                   trace=True)["strace"]
            except experiment.RunFailed as e:
                fail(f"the strace cross-check's sync failed: {e}")
    return runs, traced


def main(argv=None):
    a = parse_args(argv)
    replsynclib.IOBENCH = a.iobench
    iobenchlib.require_binary(PROG, a.iobench)
    if not shutil.which("redis-cli"):
        fail("redis-cli not found (scripts/setup --studies installs redis-tools)")
    todo = upstreamlib.cells(a)
    try:
        servers = {b: upstreamlib.server_of(b) for b in sorted({c["build"] for c in todo})}
    except upstreamlib.BuildMissing as e:
        fail(str(e))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    tmp = tempfile.mkdtemp(prefix="iobench-upstream-")
    try:
        with realsync.sync_place(a, tmp) as certs:
            dataset, rdb, payload = realsync.make_dataset(servers["stock"] if "stock" in servers
                                                          else next(iter(servers.values())),
                                                          a, certs, tmp)
            print(f"{PROG}: RDB {rdb} bytes; {len(todo)} cells x {a.rounds} rounds",
                  file=sys.stderr, flush=True)
            runs, traced = run(a, todo, servers, dataset, certs, tmp)
    except KeyboardInterrupt:
        fail("interrupted (every server stopped)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    command = iobenchlib.recorded_command("upstream-evidence")
    doc = upstreamlib.document(a, command, rdb, todo, runs, traced)
    report = iobenchlib.write_result_folder(a.out, doc, upstreamlib.report_md(doc))
    print(f"{PROG}: {len(todo)} cells in {report}")


if __name__ == "__main__":
    main()
