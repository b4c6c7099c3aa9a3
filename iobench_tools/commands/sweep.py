"""Runs a matrix of iobench runs (proto x buffer size x engine x connections, each with repeats)
and stores every run's JSON under results/<name>/ with a manifest. Resumable: cells already
finished are skipped; a cell whose run breaks is run again (--retries, --backoff), a cell that
still fails is recorded with its error and its partial figures, the sweep goes on, and the summary
lists what failed and why; running the same command again re-runs only failed or missing cells.

  scripts/sweep NAME [--proto tcp,tls] [--bufs 1k,4k,8k,16k,64k] [--repeat 5|auto]
                     [--max-repeat 20] [--warmup 1] [--bytes 100M (netns: by rate)]
                     [--where loopback|netns] [--server-host USER@HOST]
                     [--conns 1,4,16] [--budget 256k]   (--bufs may include 'adaptive')
                     [--cpus 0,1] [--cpus 0] [--cpus none]  (placements: one more axis;
                     default 0,1: sender on CPU 0, receiver on CPU 1)
                     [--source-window 256k|payload]  (the sender's source: a hot window, as a
                     primary sends from the buffer its serializer just filled; or the whole
                     payload once, from cold pages)
                     [--retries 2] [--backoff 5] [--order balanced|round-robin|shuffle|cell] [--seed N]
                     [--control 16k|auto|none]  (the A/A control: one cell twice per round, the
                     sweep's noise floor, printed first by scripts/recommend)
"""
import contextlib
import datetime
import json
from dataclasses import replace
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile

from iobench_tools.lib.kernel import hostid
from iobench_tools.lib.judging import costmodel
from iobench_tools.lib.kernel import axes
from iobench_tools.lib.kernel import experiment
from iobench_tools.lib.kernel import iobenchlib
from iobench_tools.lib.kernel import runs as iobench_runs
from iobench_tools.lib.kernel.iobenchlib import ROOT, parse_size
from iobench_tools.lib.sweeps import noisefloor
from iobench_tools.lib.sweeps import sweeplib
from iobench_tools.lib.sweeps import sweeprun
from iobench_tools.lib.fleet.remoteserver import RemoteServer, RunningServer


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def git_commit(iobench):
    """The checkout's commit; where the scripts are the package's (no checkout, maybe no git),
    the commit the binary says it was built from."""
    # .git is a folder in a clone and a file in a worktree (`git worktree add`): both checkouts.
    if os.path.exists(os.path.join(ROOT, ".git")):
        p = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"],
                           capture_output=True, text=True)
        if p.stdout.strip():
            return p.stdout.strip()
    try:
        v = subprocess.run([iobench, "--version"], capture_output=True, text=True).stdout
    except OSError:
        return "unknown"
    return v.split("(commit ")[1].split()[0].rstrip(",)") if "(commit " in v else "unknown"


def cell_run(a, cell, out):
    """The cell's iobench run (lib/kernel/runs.py spells it)."""
    grouped = cell.conns > 1 or cell.buf == "adaptive"
    return iobench_runs.ClientRun(
        proto=cell.proto, buf=cell.buf, engine=cell.engine, bytes=a.bytes,
        repeat=a.repeat, warmup=a.warmup, syscalls=a.syscalls, json=out,
        source_window=a.source_window if a.source_window != "payload" else None,
        conns=cell.conns if grouped else None,
        bytes_spread=a.bytes_spread if grouped else None,
        stagger=a.stagger if cell.conns > 1 else None,
        budget=a.budget if cell.buf == "adaptive" else None, cpus=cell.cpus or None)


def cell_command(a, cell, out, tls_dir, remote):
    run = cell_run(a, cell, out)
    if a.where == "netns":
        return (iobenchlib.through_netns_link(
                    run.argv(), ["--rate", a.netns_rate, "--mtu", str(a.netns_mtu)]),
                dict(os.environ, IOBENCH_BIN=a.iobench))
    if remote:
        run = replace(run, connect=f"{remote.host}:{remote.ports[cell.proto]}",
                      tls_ca=remote.ca(tls_dir) if cell.proto == "tls" else None)
        return run.argv(a.iobench), remote.env
    return run.argv(a.iobench), None


def parse_args(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    ap.add_argument("name", type=iobenchlib.result_name,
                    help="the sweep's name: its runs and manifest go to RESULTS/NAME/ (run again "
                         "to resume)")
    axes.add_proto(ap)
    axes.add_bufs(ap, "1k,4k,8k,16k,64k",
                  "1k..; 'adaptive' sizes by live connections within --budget")
    ap.add_argument("--engine", default="blocking",
                    help="iobench engines, a list: blocking, epoll, uring")
    ap.add_argument("--conns", default="1", help="connections at once, a list (each moves --bytes)")
    ap.add_argument("--budget", default="256k", help="buffer memory per side for 'adaptive' cells")
    ap.add_argument("--stagger", default="0", help="iobench --stagger for multi-connection cells")
    ap.add_argument("--bytes-spread", default="0", help="iobench --bytes-spread for those cells")
    ap.add_argument("--repeat", default="5",
                    help="measured runs per cell, or auto: rounds until every statement "
                         "the recommender makes (rule v2 on this sweep) is settled (at least 5, "
                         "at most --max-repeat)")
    ap.add_argument("--max-repeat", type=int, default=20,
                    help="--repeat auto: the most rounds")
    ap.add_argument("--tolerance", type=float, default=0.05,
                    help="--repeat auto: the resolution the A/A noise floor plans rounds for "
                         "(the statements are rule v2's, at its fixed 10%%)")
    ap.add_argument("--warmup", type=int, default=1,
                    help="unmeasured runs per cell before its measured ones")
    axes.add_bytes(ap, None, per=f"run (default 100M; --where netns: what fills {NETNS_PHASE_S} "
                                "s of the link, from 100M to 200M: 200M at 5 Gbit/s and up, "
                                "100M at 1 Gbit/s)")
    axes.add_cpus(ap, None, placements=True, note=(
        "iobench --cpus for every cell; repeat it for several placements, one more matrix "
        "axis. Default 0,1: sender on CPU 0, receiver on CPU 1; one CPU: 0. 'none' leaves a "
        "cell unpinned: its runs are draws from the scheduler's placements, reported as the "
        "distribution they are"))
    ap.add_argument("--syscalls", default="auto",
                    choices=["auto", "bpf", "tracepoints", "taskio", "off"],
                    help="iobench --syscalls for every cell; taskio keeps the CPU figures free of "
                         "counting cost (the kernel's read/write counts only)")
    ap.add_argument("--retries", type=int, default=2,
                    help="run a failed cell again up to this many times")
    ap.add_argument("--backoff", type=float, default=5,
                    help="seconds before the first retry, doubled for each next")
    ap.add_argument("--order", default="balanced",
                    choices=["balanced", "round-robin", "shuffle", "cell"],
                    help="balanced, round-robin or shuffle: --repeat rounds of one run per cell, "
                         "interleaved (balanced: every cell in every place of a round and after "
                         "every other cell equally often, a Williams square); cell: each cell's "
                         "repeats back to back")
    ap.add_argument("--seed", type=int, default=None,
                    help="--order balanced's relabelling and shuffle's orders (default: a fresh "
                         "seed per sweep, recorded in the manifest and kept on resume, so "
                         "sweeps in a row are independent schedules; give it to repeat one)")
    ap.add_argument("--where", default="loopback", choices=["loopback", "netns"],
                    help="loopback, or netns: two network namespaces joined by a veth link capped"
                         " by tbf (--netns-rate, --netns-mtu), as an EC2 link (root)")
    ap.add_argument("--server-host", help="USER@HOST: run `iobench server` there over ssh")
    ap.add_argument("--server-iobench", default="iobench", help="iobench path on the server host")
    ap.add_argument("--ssh-config", help="ssh -F FILE for --server-host (port, key, host keys)")
    ap.add_argument("--server-bind", metavar="ADDR",
                    help="--server-host: the address its server listens on (default: the "
                         "HOST the clients connect to; 0.0.0.0 only if you ask, e.g. behind NAT)")
    ap.add_argument("--connect", metavar="HOST[:PORT]",
                    help="an iobench server already running there (the package's systemd "
                         "unit): TCP on PORT, TLS on PORT + 1")
    ap.add_argument("--tls-ca", help="--connect: the CA that signed that server's certificate "
                                     "(TLS cells)")
    ap.add_argument("--auth-token-file", metavar="FILE",
                    help="--connect: the token that server requires, as its first line (the "
                         "package's /etc/iobench/auth-token, copied here)")
    ap.add_argument("--port", type=int, default=5210,
                    help="the sweep's own iobench server: its TCP port (TLS on PORT + 1)")
    ap.add_argument("--netns-rate", default="5gbit",
                    help="--where netns: the link's rate, each direction (tc tbf rate)")
    ap.add_argument("--netns-mtu", type=int, default=9001,
                    help="--where netns: the veth link's MTU (9001, as EC2 within a placement "
                         "group)")
    ap.add_argument("--results", default=os.path.join(ROOT, "results"),
                    help="the folder the sweep's own folder NAME goes under")
    ap.add_argument("--source-window", default="256k", metavar="SIZE|payload",
                    help="the sender's source: iobench --source-window SIZE, a hot window "
                         "repeated (default 256k: a primary sends from the buffer its serializer "
                         "has just filled, so a cold copy would flatten the knee), or 'payload': "
                         "the whole payload once, from cold pages")
    ap.add_argument("--control", default="auto", metavar="SIZE|auto|none",
                    help="the A/A control: the first protocol's one-connection cell of SIZE runs "
                         "twice per round under two names, the sweep's noise floor (auto: 16k "
                         "if swept, else the largest fixed size; none: no control)")
    ap.add_argument("--micro", metavar="MICRO.json",
                    help="--repeat auto: judge when to stop as scripts/recommend --micro judges "
                         "its report (the cost model checked against iobench-micro's cost per "
                         "call); the manifest records it and recommend reads it from there")
    iobenchlib.add_binary_option(ap)
    return ap.parse_args(argv)


# --where netns: the payload per run fills this long a data phase at the link's rate, between
# 100M (the mission's 100 MiB, and the shortest that keeps a 256K cell's writes many) and 200M.
# At 1 Gbit/s 200M took 1.7 s a run and eight rounds 400 s; 100M decided in 212 s
# (results/link-rates).
NETNS_PHASE_S = 0.34
TBF_RATE = re.compile(r"^(\d+(?:\.\d+)?)(k|m|g|t)?(bit|bps)$", re.IGNORECASE)
UNIT = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}


def link_bits_per_s(rate):
    """tc's rate ('5gbit', '800mbit', '125mbps') in bits per second; None if not one of those."""
    m = TBF_RATE.match(rate.strip())
    if not m:
        return None
    per_s = float(m.group(1)) * UNIT[(m.group(2) or "").lower()]
    return per_s * 8 if m.group(3).lower() == "bps" else per_s


def default_bytes(where, netns_rate):
    """The payload per run a sweep uses when --bytes is not given."""
    if where != "netns":
        return "100M"
    bits = link_bits_per_s(netns_rate)
    if bits is None:
        return "200M"  # tc names the bad rate when the link is made
    mib = bits * NETNS_PHASE_S / 8 / (1 << 20)
    return f"{int(min(200, max(100, mib)))}M"


def check_args(a):
    """Exits with one line naming the first bad value; fills the defaults that depend on others.
    Returns the placements (one per --cpus; "" is unpinned)."""
    if a.source_window != "payload":
        try:
            parse_size(a.source_window)
        except ValueError:
            sys.exit(f"sweep: invalid --source-window '{a.source_window}': expected a size like "
                     "256k or 'payload'")
    if a.bytes is None:
        a.bytes = default_bytes(a.where, a.netns_rate)
    # A window as long as the run would only be the payload once (iobench refuses it): decided
    # here, once, so the manifest records the source every cell ran.
    if a.source_window != "payload":
        try:
            if parse_size(a.source_window) >= parse_size(a.bytes):
                a.source_window = "payload"
        except ValueError:
            pass  # a bad --bytes: iobench names it in each cell's error, as before
    if a.repeat != "auto":
        if not a.repeat.isdigit() or not 1 <= int(a.repeat) <= 1000:
            sys.exit(f"sweep: invalid --repeat '{a.repeat}': expected 1..1000 or auto")
        a.repeat = int(a.repeat)
    elif a.order == "cell":
        sys.exit("sweep: --repeat auto decides between rounds: not with --order cell")
    if not sweeprun.MIN_AUTO_ROUNDS <= a.max_repeat <= 1000:
        sys.exit(f"sweep: invalid --max-repeat '{a.max_repeat}': expected "
                 f"{sweeprun.MIN_AUTO_ROUNDS}..1000")
    if not 0 <= a.tolerance < 1:
        sys.exit(f"sweep: invalid --tolerance '{a.tolerance}': expected 0..1")
    if any(not c.isdigit() or int(c) < 1 for c in a.conns.split(",")):
        sys.exit(f"sweep: invalid --conns '{a.conns}': expected a list of counts like 1,4,16")
    if any(p not in ("tcp", "tls") for p in a.proto.split(",")):
        sys.exit(f"sweep: invalid --proto '{a.proto}': expected tcp, tls or tcp,tls")
    if not 0 <= a.retries <= 100:
        sys.exit(f"sweep: invalid --retries '{a.retries}': expected 0..100")
    if not 0 <= a.backoff <= 3600:
        sys.exit(f"sweep: invalid --backoff '{a.backoff}': expected seconds in 0..3600")
    if a.server_host and a.where != "loopback":
        sys.exit("sweep: --server-host and --where netns exclude each other")
    if a.server_bind and not a.server_host:
        sys.exit(f"sweep: --server-bind '{a.server_bind}' is for --server-host")
    if a.auth_token_file and not a.connect:
        sys.exit("sweep: --auth-token-file is for --connect (a --server-host sweep makes its own)")
    if a.auth_token_file and not os.access(a.auth_token_file, os.R_OK):
        sys.exit(f"sweep: invalid --auth-token-file '{a.auth_token_file}': not a readable file")
    a.micro_per_call = None
    if a.micro:
        try:
            a.micro_per_call = costmodel.micro_per_call(a.micro)
        except ValueError as e:
            sys.exit(f"sweep: {e}")
        if a.micro_per_call is None:
            sys.exit(f"sweep: invalid --micro '{a.micro}': fewer than 3 sizes of "
                     "BM_TcpLoopbackWriteRead (scripts/micro --benchmark_filter=TcpLoopback)")
    if a.connect and (a.server_host or a.where != "loopback"):
        sys.exit("sweep: --connect excludes --server-host and --where netns")
    if a.connect and "tls" in a.proto.split(",") and not (a.tls_ca and os.path.isfile(a.tls_ca)):
        sys.exit(f"sweep: TLS cells against --connect need --tls-ca FILE (got "
                 f"'{a.tls_ca or ''}')")
    default_cpus = "0,1" if (os.cpu_count() or 1) >= 2 else "0"
    placements = ["" if c == "none" else c for c in (a.cpus or [default_cpus])]
    for c in placements:
        if c and (not all(part.isdigit() for part in c.split(",")) or c.count(",") > 1):
            sys.exit(f"sweep: invalid --cpus '{c}': expected SENDER[,RECEIVER] CPU numbers or none")
    if len(set(placements)) != len(placements):
        sys.exit("sweep: a --cpus placement is given twice")
    fixed = [b for b in a.bufs.split(",") if b != "adaptive"]
    if a.control == "auto":
        a.control = "16k" if "16k" in fixed else (max(fixed, key=parse_size) if fixed else "none")
    elif a.control != "none" and a.control not in fixed:
        sys.exit(f"sweep: invalid --control '{a.control}': expected one of --bufs "
                 f"({', '.join(fixed)}), auto or none")
    if a.control != "none" and "1" not in a.conns.split(","):
        a.control = "none"  # the control is a one-connection cell: none in this sweep

    return placements


def plan_cells(a, placements):
    """One cell per placement x proto x engine x conns x buffer, in that order, then the A/A
    control's twins (--control)."""
    cells = []
    for cpus in placements:
        # Unpinned cells keep the ids sweeps have always had, so older sweeps resume.
        pin = f"-cpus{cpus.replace(',', '-')}" if cpus else ""
        for proto in a.proto.split(","):
            for engine in a.engine.split(","):
                for conns in a.conns.split(","):
                    for buf in a.bufs.split(","):
                        cid = f"{proto}-{engine}-c{conns}-{buf}{pin}"
                        cells.append(sweeplib.SweepCell(cid, proto, engine, int(conns), buf,
                                                        cpus, f"cells/{cid}.json"))
    return cells + (noisefloor.control_cells(cells, a.control) if a.control != "none" else [])


def describe_sweep(a, placements, manifest):
    """The manifest's record of how this sweep runs (what resuming it must repeat)."""
    manifest.update({
        "name": a.name,
        # Repository-relative, so the results folder reads the same on any checkout.
        "command": shlex.join(sys.argv).replace(ROOT + os.sep, ""),
        "iobench_commit": git_commit(a.iobench),
        "where": a.server_host or a.connect or a.where,
        "netns": {"rate": a.netns_rate, "mtu": a.netns_mtu} if a.where == "netns" else None,
        # This host (both ends' on loopback and netns; the client's on two hosts, whose
        # server's is in each cell's JSON): a result is never pooled with another host's.
        "host": manifest.get("host") or hostid.local_host(),
        "bytes": a.bytes, "repeat": a.repeat, "warmup": a.warmup, "budget": a.budget,
        "max_repeat": a.max_repeat if a.repeat == "auto" else None,
        "syscalls": a.syscalls, "retries": a.retries, "backoff_s": a.backoff,
        "source_window": a.source_window,
        "kind": "sweep",
        "order": a.order, "seed": a.seed if a.order in ("shuffle", "balanced") else None,
        "control": a.control,
        # The stop's judge, which recommend then uses too (one judge for both).
        "micro": os.path.relpath(os.path.abspath(a.micro), ROOT) if a.micro else None,
        "placements": [c or "unpinned" for c in placements],
        "started": manifest.get("started", now()),
        "finished": None,
        "cells": [],
    })


def sweep_seed(given, manifest):
    """The schedule's seed: the one given, else the resumed sweep's (its schedule must not
    change), else a fresh one — each new sweep its own balanced relabelling, so a run of sweeps
    samples schedules instead of repeating one (issue #48: five sweeps in a row under seed 1
    were independent in time only)."""
    kept = manifest.get("seed") if manifest.get("cells") else None
    if given is not None and kept is not None and given != kept:
        sys.exit(f"sweep: --seed {given} differs from the seed {kept} this sweep started with; "
                 "resume without --seed, or start a new sweep under another name")
    if given is not None:
        return given
    return kept if kept is not None else random.SystemRandom().randrange(1, 1 << 31)


def start_server(a, out_dir):
    """The server the cells run against, and the TLS directory its certificates are in: a
    running one (--connect), one started over ssh (--server-host), or none (each cell's own)."""
    keys = certs = None
    if "tls" in a.proto.split(",") and a.server_host:
        keys, certs = server_certificate(a.server_host.split("@")[-1], out_dir)
    remote = RunningServer(a.connect, a.tls_ca, a.auth_token_file) if a.connect else None
    if a.server_host:
        try:
            remote = RemoteServer(a.server_host, a.server_iobench, a.port, keys,
                                  "auto" if a.syscalls == "off" else a.syscalls, a.ssh_config,
                                  a.server_bind, keys_sent=lambda: forget_keys(keys))
        finally:
            forget_keys(keys)
    return remote, certs


def server_certificate(host, out_dir):
    """A certificate for the --server-host sweep's server, made by tls/make-certs in a private
    (0700) folder outside the results: its CA certificate is copied into results/NAME/certs/ (the
    clients check the server against it; a reader can too), the private keys never are. Returns
    (the keys' folder, the results' certs folder); the CA's key is removed at once, the keys'
    folder once its files are on their way to the server (forget_keys)."""
    keys = tempfile.mkdtemp(prefix="iobench-sweep-keys.")
    kind = "--ip" if host.replace(".", "").isdigit() else "--dns"
    subprocess.run([os.path.join(ROOT, "tls", "make-certs"), keys, kind, host], check=True,
                   capture_output=True)
    os.remove(os.path.join(keys, "ca.key"))  # it signed the one certificate: nothing else needs it
    certs = os.path.join(out_dir, "certs")
    os.makedirs(certs, exist_ok=True)
    for stale in ("ca.key", "server.key"):  # left by a sweep of an earlier version
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(certs, stale))
    shutil.copy(os.path.join(keys, "ca.crt"), os.path.join(certs, "ca.crt"))
    return keys, certs


def forget_keys(keys_dir):
    """The private keys' folder, gone once the remote server holds its copy (or failed to)."""
    if keys_dir:
        shutil.rmtree(keys_dir, ignore_errors=True)


def print_outcome(a, cells, recs, skipped, out_dir, manifest):
    """The sweep's last lines: cells, failures (with partial figures kept), retried cells.
    Returns how many failed."""
    failed = sum(r["status"] == "failed" for r in recs.values())
    print(f"sweep {a.name}: {len(cells)} cells, {skipped} already done, {failed} failed -> "
          f"{out_dir}")
    for c in manifest["cells"]:
        if c.get("status") == "failed":
            tries = len(sweeprun.attempts_of(c)) or 1
            kept = [x["partial_file"] for x in sweeprun.attempts_of(c) if x.get("partial_file")]
            print(f"  failed {c['id']} ({tries} attempt{'s' if tries > 1 else ''}): {c['error']}"
                  + (f"; partial figures in {', '.join(kept)}" if kept else ""))
        elif sweeprun.attempts_of(c):
            print(f"  {c['id']}: ok after {len(sweeprun.attempts_of(c))} failed attempt(s): "
                  f"{sweeprun.attempts_of(c)[-1]['error']}")
    return failed


def main(argv=None):
    a = parse_args(argv)
    placements = check_args(a)
    out_dir = os.path.join(a.results, a.name)
    os.makedirs(os.path.join(out_dir, "cells"), exist_ok=True)
    manifest_path = os.path.join(out_dir, "manifest.json")
    manifest = json.load(open(manifest_path)) if os.path.exists(manifest_path) else {}
    previous = {c["id"]: c for c in manifest.get("cells", [])}
    cells = plan_cells(a, placements)
    a.seed = sweep_seed(a.seed, manifest)
    describe_sweep(a, placements, manifest)

    def save():
        with open(manifest_path + ".tmp", "w") as f:
            json.dump(manifest, f, indent=2)
        os.replace(manifest_path + ".tmp", manifest_path)

    remote, tls_dir = start_server(a, out_dir)
    interrupted = False
    signal.signal(signal.SIGTERM, experiment.raise_interrupt)
    rounds = sweeprun.schedule(len(cells), a)
    recs, skipped = sweeprun.resume_records(cells, previous, out_dir, a.order != "cell")
    manifest["cells"] = [recs[c.id] for c in cells]
    manifest["schedule"] = [[cells[i].id for i in order] for order in rounds]
    try:
        sweeprun.run_schedule(a, cells, recs, rounds, out_dir, manifest, save,
                              lambda ra, c, out: cell_command(ra, c, out, tls_dir, remote))
    except KeyboardInterrupt:
        interrupted = True
        sys.stderr.write("\nsweep: interrupted; run the same command again to resume\n")
    finally:
        if remote:
            remote.stop()
        if not interrupted:
            manifest["finished"] = now()
        save()
    failed = print_outcome(a, cells, recs, skipped, out_dir, manifest)
    sys.exit(130 if interrupted else (1 if failed else 0))


if __name__ == "__main__":
    main()
