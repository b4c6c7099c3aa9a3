"""The replication chunk's knee on the real server, beside iobench's prediction.

Valkey 8.1.1 built from Debian's source with iobench's chunk patch (`scripts/install-valkey
--source`; docs/valkey-patch.md) streams real full syncs: per cell one primary (pinned to the
first CPU of --cpus, its chunk from the environment at start) loads the same RDB (iobench's own
replication stream, --rdb bytes) and syncs N empty replicas (pinned to the second CPU) at once —
one BGSAVE for all of them — over TCP or TLS, disk-based, diskless or dual-channel, every sync
watched by `iobench watch`. Beside each round's real syncs, the model: `iobench --fanout` with the
same chunk, N, protocol and placement (the dual-channel child is the connset shape, a main thread
forwarding to N non-blocking sockets the event-loop shape). Every cell once per round, in a
balanced order (a Williams square relabelled by --seed), --rounds rounds.

The knee (the smallest chunk within --tolerance of the lowest writer CPU per GiB delivered) and
how sure it is are judged as scripts/recommend judges a sweep's, on the real writer and on the
model's, and set side by side: same, within noise, or differs.

  scripts/replication-knee [--bufs 4k,16k,64k,256k] [--replicas 1,4] [--proto tcp,tls]
      [--modes dual,diskless,disk] [--chunking stock,whole,adaptive] [--rounds 5] [--rdb 100M]

Writes OUT/results.json (every sync's figures), OUT/report.md and OUT/plots/*.png (with
matplotlib). Root is not needed on loopback. Every server it starts is stopped, also on Ctrl-C.
"""
import json
from dataclasses import replace
import os
import shutil
import signal
import subprocess
import sys
import tempfile

from iobench_tools.lib.kernel import axes
from iobench_tools.lib.kernel import experiment
from iobench_tools.lib.kernel import hostid
from iobench_tools.lib.kernel import iobenchjson
from iobench_tools.lib.kernel import iobenchlib
from iobench_tools.lib.kernel import needs
from iobench_tools.lib.kernel import runs as iobench_runs
from iobench_tools.lib.kernel.iobenchlib import ROOT, parse_size_list
from iobench_tools.lib.valkey import realsync
from iobench_tools.lib.valkey import replknee_report
from iobench_tools.lib.valkey import replsynclib

PROG = replsynclib.PROG = "replication-knee"
VALKEY = os.environ.get("IOBENCH_VALKEY_SRC",
                        os.path.join(ROOT, "build", "valkey", "valkey-server-src"))
MODES = ("dual", "diskless", "disk")
SHAPE = {"dual": "connset", "diskless": "event-loop", "disk": "event-loop"}
CHUNKING = ("stock", "whole", "adaptive")
# adaptive's one-replica chunk and its largest (docs/connections.md: the writer's rule).
ADAPTIVE = {"tcp": (65536, 65536), "tls": (16384, 65536)}


def fail(msg):
    sys.exit(f"{PROG}: error: {msg}")


def cells(a):
    out = []
    for proto in a.proto:
        for mode in a.modes:
            for n in a.replicas:
                for chunking in a.chunking:
                    if chunking == "whole" and mode == "disk":
                        continue  # the disk-based send has no buffer to carry a tail in
                    sizes = [0] if chunking == "adaptive" else a.bufs
                    out += [{"proto": proto, "mode": mode, "replicas": n, "chunking": chunking,
                             "chunk": c} for c in sizes]
    return out


def cell_id(c):
    size = "adaptive" if c["chunking"] == "adaptive" else iobenchlib.format_size(c["chunk"])
    tag = "" if c["chunking"] in ("stock", "adaptive") else f"-{c['chunking']}"
    return f"{c['proto']}-{c['mode']}-n{c['replicas']}-{size}{tag}"


def server_env(c):
    if c["chunking"] == "adaptive":
        low, high = ADAPTIVE[c["proto"]]
        return {"IOBENCH_REPL_CHUNKING": "adaptive", "IOBENCH_REPL_CHUNK": str(high),
                "IOBENCH_REPL_CHUNK_MIN": str(low)}
    return {"IOBENCH_REPL_CHUNKING": c["chunking"], "IOBENCH_REPL_CHUNK": str(c["chunk"])}


def model_run(c, a, nbytes, work):
    """iobench's one writer to N replicas at the cell's chunk: the writer's CPU per GiB."""
    buf = "adaptive" if c["chunking"] == "adaptive" else str(c["chunk"])
    shape = SHAPE[c["mode"]]
    out = os.path.join(work, "model.json")
    model = iobench_runs.ClientRun(
        fanout=shape, engine="blocking" if shape == "connset" else None,
        send_engine=None if shape == "connset" else "epoll", proto=c["proto"],
        conns=c["replicas"], buf=buf, bytes=str(nbytes), syscalls="off",
        cpus=a.cpus if a.cpus != "none" else None, json=out, cache_dir=a.cache_dir)
    argv = model.argv(replsynclib.IOBENCH)
    if a.fleet:  # the same emulated fleet: scripts/netns-link's, N replicas on their own links
        argv = iobenchlib.through_netns_link(argv, ["--replicas", str(c["replicas"]), "--rate",
                                                    a.rate, "--mtu", str(a.mtu), "--name", "iobkm"])
    env = dict(os.environ, IOBENCH_BIN=replsynclib.IOBENCH, IOBENCH_CACHE_DIR=a.cache_dir)
    p = experiment.run_child(argv, env=env, timeout=600)
    if p.returncode != 0:
        fail(f"the model run failed: {p.stderr.strip()}")
    f = iobenchjson.load(out).first_run.group.fanout
    shown = replace(model, json=None, cache_dir=None).shown()
    return {"writer_cpu_s_per_gib": f.writer_cpu_s_per_gib_delivered,
            "command": shown.replace("./iobench ", "scripts/netns-link ... -- ", 1)
            if a.fleet else shown}


def run_rounds(a, todo, dataset, nbytes, certs, tmp, identity):
    """Every cell once per round in a balanced order, through the experiment kernel: a sync
    that fails is tried again (--retries), one that keeps failing is recorded and the study goes
    on, and a study stopped (Ctrl-C, a lost machine) and started again with the same command
    runs only the syncs it lacks (progress.json in --out)."""

    def run_one(c, k, attempt):
        cid = cell_id(c)
        work = os.path.join(tmp, f"{cid}-{k}-{attempt}")
        try:
            real = realsync.real_sync(VALKEY, server_env(c), c, a, dataset, certs, work, cid)
        except realsync.SyncFailed as e:
            raise experiment.RunFailed(str(e)) from None
        model = None
        if a.model:
            os.makedirs(work, exist_ok=True)
            model = model_run(c, a, nbytes, work)
        shutil.rmtree(work, ignore_errors=True)
        return {"real": real, "model": model}

    cells_with_id = [dict(c, id=cell_id(c)) for c in todo]
    done = experiment.Experiment(PROG, a.out, cells_with_id, a.rounds, run_one, order="balanced",
                                 seed=a.seed, retries=a.retries, identity=identity).run()
    runs = {}
    for cid, figs in experiment.figures_by_cell(done).items():
        runs[cid] = {"real": [f["real"] for f in figs],
                     "model": [f["model"] for f in figs if f["model"] is not None]}
    return runs, experiment.failures(done)


def parse_args(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    axes.add_bufs(ap, "4k,16k,64k,256k", "the primary's fixed chunk sizes (1k..1m)")
    iobenchlib.add_renamed_option(ap, "--chunks", "--bufs", "the size axis has one name in "
                                  "every script")
    axes.add_proto(ap)
    ap.add_argument("--modes", default="dual,diskless,disk", help=", ".join(MODES))
    ap.add_argument("--chunking", default="stock", help="stock, whole, adaptive (the patch's "
                    "variants: stock writes a chunk and its tail, whole carries the tail over, "
                    "adaptive sizes the chunk by the live replicas)")
    ap.add_argument("--no-model", dest="model", action="store_false",
                    help="real syncs only, no iobench prediction")
    ap.add_argument("--tolerance", type=float, default=0.05, help="the knee's tolerance (0.05)")
    ap.add_argument("--retries", type=int, default=1,
                    help="a failed sync is tried again this many times, then recorded as failed")
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "real-knee"),
                    help="the folder the study's runs, tables and plots go to")
    replsynclib.add_sync_options(ap, "primary's CPU,replicas' CPU (the model's --cpus too), "
                                     "or none")
    iobenchlib.add_binary_option(ap)
    a = ap.parse_args(argv)
    iobenchlib.refuse_renamed(ap, a)
    try:
        a.bufs = parse_size_list(a.bufs)
    except ValueError as e:
        ap.error(f"invalid --bufs '{a.bufs}': {e}")
    bad = [c for c in a.bufs if not 1024 <= c <= 1 << 20]
    if bad:
        ap.error(f"invalid --bufs: {bad[0]} outside 1024..1048576 (the patch's range)")
    if not 0 <= a.retries <= 5:
        ap.error(f"invalid --retries {a.retries}: expected 0..5")
    if not 0 < a.tolerance < 1:
        ap.error(f"invalid --tolerance {a.tolerance}: expected between 0 and 1")
    replsynclib.check_sync_args(ap, a, {"proto": ("tcp", "tls"), "modes": MODES,
                                        "chunking": CHUNKING})
    return a


def main(argv=None):
    a = parse_args(argv)
    plt = needs.module("matplotlib.pyplot", PROG, "python3-matplotlib")
    replsynclib.IOBENCH = a.iobench
    iobenchlib.require_binary(PROG, a.iobench)
    if not os.access(VALKEY, os.X_OK):
        fail(f"{VALKEY} not found: scripts/install-valkey --source builds it")
    if not shutil.which("redis-cli"):
        fail("redis-cli not found (scripts/setup --studies installs redis-tools)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    todo = cells(a)
    version = subprocess.run([VALKEY, "--version"], capture_output=True, text=True).stdout
    tmp = tempfile.mkdtemp(prefix="iobench-knee-")
    try:
        with realsync.sync_place(a, tmp) as certs:
            dataset, rdb, payload = realsync.make_dataset(VALKEY, a, certs, tmp)
            print(f"{PROG}: RDB {rdb} bytes from {payload} payload bytes; {len(todo)} cells x "
                  f"{a.rounds} rounds", file=sys.stderr, flush=True)
            identity = {"server": version.strip(), "rdb_bytes": rdb, "cpus": a.cpus,
                        "where": a.where, "link": [a.rate, a.mtu] if a.fleet else None,
                        "model": a.model}
            runs, failed = run_rounds(a, todo, dataset, rdb, certs, tmp, identity)
    except KeyboardInterrupt:
        fail("interrupted (every server stopped)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    command = iobenchlib.recorded_command("replication-knee")
    doc = {"tool": "iobench", "kind": "replication-knee", "command": command,
           "host": hostid.local_host(), "server": version.strip(), "rdb_bytes": rdb, "cpus": a.cpus, "where": a.where,
           "link": {"rate": a.rate, "mtu": a.mtu} if a.fleet else None,
           "tolerance": a.tolerance, "rounds": a.rounds, "order": "balanced",
           "cells": [dict(c, id=cell_id(c), **runs[cell_id(c)]) for c in todo],
           "failures": failed}
    doc["knees"] = replknee_report.knees(doc)
    report = iobenchlib.write_result_folder(a.out, doc, replknee_report.report_md(doc), indent=2)
    replknee_report.plots(doc, a.out, plt)
    print(f"{PROG}: {len(todo)} cells in {report}")
    if failed:
        fail(f"{len(failed)} sync(s) failed every attempt (in results.json): {failed[0]}")


if __name__ == "__main__":
    main()
