"""The primary's shape: one writer thread streaming a full sync to N replicas (iobench --fanout),
for N x chunk size x shape x protocol, in interleaved rounds; then the answer a replication
design needs: is one chunk size right for every N, or does the best size move with N, and does
the adaptive mode come within 5% of the best fixed size at every N with no more memory?

  scripts/fanout-scenario NAME [--replicas 1,2,4,8,16] [--bufs 4k,16k,64k,adaptive]
      [--shapes connset,event-loop] [--proto tcp,tls] [--bytes 100M] [--rounds 3]
      [--budget 256k] [--timeout 30] [--where loopback|fleet] [--rate 5gbit]
      [--connect HOST:PORT,... [--tls-ca FILE]] [--iobench PATH]
      [--results results] [-- EXTRA IOBENCH ARGS]
  scripts/fanout-scenario NAME --report   # rewrite fanout.md from fanout.json, no runs

--connect runs every cell against `iobench server`s already running on the replica hosts (the
package's iobench.service; a fleet pair of one primary and several replicas, docs/fleet.md):
replica i of N goes to server i mod k, TLS on each server's PORT + 1, checked against --tls-ca
(one file may hold several CAs).

--where fleet runs every cell on the emulated fleet of scripts/netns-link --replicas N (a primary
namespace and N replica namespaces, each replica on its own veth capped at --rate, MTU 9001;
root): the primary's writes then meet N links, not one loopback.

Writes results/NAME/: raw/ (every run's JSON, not committed), fanout.json (each run's figures, the cells'
medians and ranges, the verdicts) and fanout.md (the tables and the answer). The criterion is the
writer thread's CPU per GiB delivered (N x bytes): what the primary's one thread pays; the time
until the last replica is done and the peak buffer memory (the replicas' chunk sizes summed) are
shown beside it. A ratio whose 95% bootstrap interval reaches past 5% is not called "within 5%".
"""
import json
import os
import subprocess
import sys
import time

from iobench_tools.lib.kernel import axes
from iobench_tools.lib.kernel import experiment
from iobench_tools.lib.kernel import iobenchjson
from iobench_tools.lib.kernel import iobenchlib
from iobench_tools.lib.kernel import runs as iobench_runs
from iobench_tools.lib.kernel.iobenchlib import ROOT, require_binary
from iobench_tools.lib.sweeps import fanoutlib
from iobench_tools.lib.sweeps.fanoutlib import cell_id


def parse_args(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    ap.add_argument("name", type=iobenchlib.result_name,
                    help="the scenario's name: fanout.json, fanout.md and the runs go to "
                         "RESULTS/NAME/")
    ap.add_argument("--replicas", default="1,2,4,8,16",
                    help="replica counts, a list: one writer streams to this many at once")
    axes.add_bufs(ap, "4k,16k,64k,adaptive",
                  "the writer's chunk sizes; 'adaptive' sizes chunks by live replicas")
    ap.add_argument("--shapes", default="connset,event-loop",
                    help="how the writer serves the replicas, a list: connset (one blocking write"
                         " each, in turn) and event-loop (epoll)")
    axes.add_proto(ap)
    iobenchlib.add_renamed_option(ap, "--protos", "--proto", "the protocol axis has one name in "
                                  "every script")
    axes.add_bytes(ap, "100M", per="replica")
    ap.add_argument("--control", default="auto", metavar="SIZE|auto|none",
                    help="the A/A control: at every shape, protocol and N, the cell of SIZE runs "
                         "twice per round under two names, the scenario's noise floor (auto: 16k "
                         "if in --bufs, else the largest fixed size; none: no control)")
    axes.add_rounds(ap, 3)
    ap.add_argument("--retries", type=int, default=1,
                    help="runs again a cell's round that failed, this many times")
    ap.add_argument("--budget", default="256k",
                    help="buffer memory the adaptive writer shares among its replicas")
    ap.add_argument("--timeout", default="30",
                    help="iobench --timeout, seconds: a replica silent this long is dropped")
    ap.add_argument("--where", default="loopback", choices=["loopback", "fleet"],
                    help="loopback, or fleet: each replica in a network namespace of its own "
                         "behind a link capped at --rate (root)")
    ap.add_argument("--rate", default="5gbit", help="fleet: each replica link's cap")
    ap.add_argument("--connect", help="HOST:PORT,...: servers already running (TLS on PORT + 1)")
    ap.add_argument("--tls-ca", help="--connect: the CA file(s) the servers' certificates chain to")
    ap.add_argument("--auth-token-file", metavar="FILE",
                    help="--connect: the servers' token, read by iobench from this file (never in "
                         "argv or the results: they record only that a token was used)")
    iobenchlib.add_binary_option(ap)
    ap.add_argument("--results", default=os.path.join(ROOT, "results"),
                    help="the folder the scenario's folder NAME goes under")
    ap.add_argument("--report", action="store_true",
                    help="rewrite fanout.md (and the verdicts) from fanout.json without running")
    a, extra = ap.parse_known_args(argv)
    extra = [x for x in extra if x != "--"]
    if any(x == "--auth-token" or x.startswith("--auth-token=") for x in extra):
        ap.error("--auth-token would put the token in argv and in fanout.json: give "
                 "--auth-token-file FILE")
    a.env = None
    if a.auth_token_file:
        if not a.connect:
            ap.error("--auth-token-file is for --connect (the scenario's own servers need none)")
        if not os.access(a.auth_token_file, os.R_OK) or not os.path.isfile(a.auth_token_file):
            ap.error(f"invalid --auth-token-file '{a.auth_token_file}': not a readable file")
        # iobench reads "@FILE" itself: the token never passes through this process's argv.
        a.env = dict(os.environ, IOBENCH_AUTH_TOKEN=f"@{os.path.abspath(a.auth_token_file)}")
    if a.rounds < 1 or a.rounds > 50:
        ap.error(f"invalid --rounds '{a.rounds}': expected 1..50")
    a.replicas = [int(n) for n in a.replicas.split(",")]
    if any(n < 1 or n > 64 for n in a.replicas):
        ap.error(f"invalid --replicas '{a.replicas}': expected numbers 1..64")
    iobenchlib.refuse_renamed(ap, a)
    # a.protos: the scenario record's field name (fanout.json "protos"), kept for its readers.
    a.bufs, a.shapes, a.protos = a.bufs.split(","), a.shapes.split(","), a.proto.split(",")
    a.control = control_size(ap, a.control, a.bufs)
    for s in a.shapes:
        if s not in ("connset", "event-loop"):
            ap.error(f"invalid --shapes '{s}': expected connset or event-loop")
    if a.connect:
        if a.where != "loopback":
            ap.error("--connect runs against servers already up: not with --where fleet")
        servers = []
        for item in a.connect.split(","):
            host, _, port = item.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65535:
                ap.error(f"invalid --connect '{item}': expected HOST:PORT")
            servers.append((host, int(port)))
        a.servers = servers
        if "tls" in a.protos and not (a.tls_ca and os.path.isfile(a.tls_ca)):
            ap.error(f"TLS cells against --connect need --tls-ca FILE (got '{a.tls_ca or ''}')")
    return a, extra


def control_size(ap, control, bufs):
    """--control's size (None: no control), or exits naming the bad value."""
    fixed = [b for b in bufs if b != "adaptive"]
    if control == "none" or not fixed:
        return None
    if control == "auto":
        return "16k" if "16k" in fixed else max(fixed, key=iobenchlib.parse_size)
    if control not in fixed:
        ap.error(f"invalid --control '{control}': expected one of --bufs' fixed sizes "
                 f"({','.join(fixed)}), auto or none")
    return control


def cells(a):
    """Every cell of the matrix, and the A/A control's twin of --control's size beside it at each
    shape, protocol and N (the schedule moves the twin like any other cell)."""
    out = []
    for s in a.shapes:
        for p in a.protos:
            for n in a.replicas:
                out += [{"shape": s, "proto": p, "replicas": n, "buf": b} for b in a.bufs]
                if a.control:
                    out.append({"shape": s, "proto": p, "replicas": n, "buf": a.control,
                                "twin": True})
    return out


def cell_run(a, c, out, extra):
    """The cell's iobench run (lib/kernel/runs.py spells it): one writer, N replicas."""
    connset = c["shape"] == "connset"
    connect = tls_ca = None
    if a.connect:  # the servers' TCP ports, or the TLS ones beside them
        shift = 1 if c["proto"] == "tls" else 0
        connect = ",".join(f"{h}:{p + shift}" for h, p in a.servers)
        tls_ca = a.tls_ca if c["proto"] == "tls" else None
    return iobench_runs.ClientRun(
        connect=connect, tls_ca=tls_ca, fanout=c["shape"],
        engine="blocking" if connset else None, send_engine=None if connset else "epoll",
        proto=c["proto"], conns=c["replicas"], buf=c["buf"],
        budget=a.budget if c["buf"] == "adaptive" else None, bytes=a.bytes, timeout=a.timeout,
        syscalls="off", json=out, extra=tuple(extra))


def command(a, c, out, extra):
    argv = cell_run(a, c, out, extra).argv(a.iobench)
    if a.where == "loopback":
        return argv
    return iobenchlib.through_netns_link(argv, ["--replicas", str(c["replicas"]), "--rate", a.rate])


def example(a, extra):
    """One cell's command, repository-relative."""
    cmd = command(a, cells(a)[0], "OUT.json", extra)
    head = ["./iobench"] if a.where == "loopback" and not a.connect else \
        ["iobench"] if a.connect else ["scripts/netns-link"]
    return " ".join(head + cmd[1:])


def figures(doc):
    """One run's figures from its JSON (None when it failed)."""
    run = doc.first_run
    g = run.group
    f = g.fanout if g else None
    if not f or run.partial or g.error:
        return None
    gib = f.writer_cpu_s / f.writer_cpu_s_per_gib_delivered \
        if f.writer_cpu_s_per_gib_delivered else 0
    sleeps = g.receiver.vol_ctxsw
    return {"writer_cpu_s_per_gib": f.writer_cpu_s_per_gib_delivered,
            # The replicas' voluntary context switches per GiB (each a sleep and a wake-up the
            # writer's write pays for on loopback): what a size's bimodal runs follow.
            "replica_sleeps_per_gib": sleeps / gib if sleeps is not None and gib else None,
            "writer_cpu_us_per_chunk": f.writer_cpu_us_per_chunk,
            "last_done_s": f.last_done_s, "slowest_s": f.slowest_s,
            "peak_buffer_bytes": g.sender.peak_buffer_bytes,
            "peak_chunk_bytes": f.peak_chunk_bytes, "chunks": f.chunks,
            "writes": f.writes, "waits": f.waits, "stalls": f.stalls, "policy": g.sender.policy}


def run_rounds(a, extra, out_dir):
    """Every cell once per round, the rounds one after another (interleaved: a slow minute of the
    machine lands on every cell, not on one), through the experiment kernel: a scenario stopped
    and started again with the same command runs only the rounds it lacks."""
    os.makedirs(os.path.join(out_dir, "raw"), exist_ok=True)

    def run_one(c, k, attempt):
        out = os.path.join(out_dir, "raw", f"{cell_id(c)}.round{k}.json")
        try:
            p = experiment.run_child(command(a, c, out, extra), env=a.env, timeout=600)
        except subprocess.TimeoutExpired:
            raise experiment.RunFailed("ran past 600 s") from None
        fig = None
        if p.returncode == 0 and os.path.exists(out):
            fig = figures(iobenchjson.load(out))
        if fig is None:
            raise experiment.RunFailed(p.stderr.strip()[-300:] or f"exit status {p.returncode}",
                                       refused=p.returncode == 2)
        return fig

    todo = [dict(c, id=cell_id(c)) for c in cells(a)]
    identity = {"bytes": a.bytes, "budget": a.budget, "timeout": a.timeout, "where": a.where,
                "rate": a.rate, "connect": a.connect, "extra": extra, "control": a.control}
    if a.auth_token_file:
        identity["auth_token"] = True  # that one was used; never the token
    done = experiment.Experiment("fanout-scenario", out_dir, todo, a.rounds, run_one,
                                 retries=a.retries, identity=identity).run()
    return experiment.figures_by_cell(done), experiment.failures(done)


def doc_base(a, extra, runs, failures, started):
    """The scenario's record: what ran, how, and every run's figures."""
    out_dir = os.path.join(a.results, a.name)
    first = sorted(os.listdir(os.path.join(out_dir, "raw")))[0]
    return {"kind": "fanout-scenario", "command": " ".join(["scripts/fanout-scenario",
                                                            *sys.argv[1:]]),
            "iobench_command_example": example(a, extra),
            "where": f"servers {a.connect}" if a.connect else a.where,
            "auth_token": "used (from a file)" if a.auth_token_file else "none",
            "rate": a.rate if a.where == "fleet" else None,
            "criterion": "writer thread CPU per GiB delivered (N x bytes), median of the rounds",
            "rounds": a.rounds, "bytes_per_replica": a.bytes,
            "budget": a.budget, "control": a.control, "replicas": a.replicas, "bufs": a.bufs,
            "shapes": a.shapes,
            "protos": a.protos, "duration_s": round(time.time() - started, 1),
            "context": iobenchjson.load(os.path.join(out_dir, "raw", first)).context,
            "cells": runs, "failures": failures}


def adaptive_rule(doc):
    """What `--buf adaptive` ran, as the runs' own JSON named it."""
    for cell, runs in doc["cells"].items():
        for r in runs:
            if cell.endswith("-adaptive") and r.get("policy"):
                return f"`--buf adaptive --budget {doc['budget']}`, the writer's rule ({r['policy']})"
    return f"`--buf adaptive --budget {doc['budget']}` (budget / live replicas, 4K..64K)"


def write_report(out_dir, doc):
    """fanout.json (with the verdicts) and fanout.md, from the record alone."""
    pairs = [(s, p) for s in doc["shapes"] for p in doc["protos"]]
    verdicts = [fanoutlib.verdict(doc["cells"], doc["replicas"], doc["bufs"], s, p,
                                  control=doc.get("control")) for s, p in pairs]
    doc["verdicts"] = verdicts
    with open(os.path.join(out_dir, "fanout.json"), "w") as f:
        json.dump(doc, f, indent=1)
    where = ("loopback" if doc["where"] == "loopback" else doc["where"]
             if doc["where"].startswith("servers ") else
             f"the emulated fleet (each replica its own veth, {doc['rate']}, MTU 9001)")
    text = [f"# One writer, N replicas on {where}: {doc['bytes_per_replica']} per replica, "
            f"{doc['rounds']} interleaved rounds\n",
            f"Command: `{doc['command']}` (one run: `{doc['iobench_command_example']}`).\n",
            "Criterion: the writer thread's CPU per GiB delivered (its CLOCK_THREAD_CPUTIME_ID "
            "over N x bytes), the median of the rounds. Peak buffer memory: the replicas' chunk "
            f"sizes summed (a fixed size's is N x size). Adaptive: {adaptive_rule(doc)}. "
            "At each N the fixed sizes are read by rule v2's sequence on the N's paired rounds "
            "(a larger size taken only when shown cheaper than the one it replaces by more than "
            "10%), and adaptive by rule v2's step over each N's answer (a gain past 10% in CPU "
            "or memory, both below x1.10 at every N).\n",
            "## The answer\n"]
    text += [f"- {fanoutlib.answer_text(v)}" for v in verdicts]
    text += ["\nRecommendation (`scripts/recommend` writes it too, from the same record):\n"]
    text += [f"- {fanoutlib.recommendation(v)}" for v in verdicts]
    text += ["\n## The runs"]
    text += [fanoutlib.table(doc["cells"], doc["replicas"], doc["bufs"], s, p) for s, p in pairs]
    if doc["failures"]:
        text += ["\n## Failed runs\n"] + [f"- {x}" for x in doc["failures"]]
    with open(os.path.join(out_dir, "fanout.md"), "w") as f:
        f.write("\n".join(text) + "\n")
    print("\n".join(text))


def main(argv=None):
    a, extra = parse_args(argv)
    out_dir = os.path.join(a.results, a.name)
    if a.report:
        try:
            doc = json.load(open(os.path.join(out_dir, "fanout.json")))
        except (OSError, ValueError) as e:
            sys.exit(f"fanout-scenario: error: cannot read {out_dir}/fanout.json: {e}")
        write_report(out_dir, doc)
        return
    require_binary("fanout-scenario", a.iobench)
    started = time.time()
    runs, failures = run_rounds(a, extra, out_dir)
    write_report(out_dir, doc_base(a, extra, runs, failures, started))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
