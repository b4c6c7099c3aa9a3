"""Compares engine set-ups on loopback the way the README's engine tables are made: every
set-up runs once per round, set-ups alternating inside each round, so a noisy neighbour hits
them alike. Prints a markdown table per size: CPU s/GiB and syscalls/GiB (sender + receiver),
receiver Gbit/s and the receiver's sleeps per GiB, medians with min-max over the rounds; then
each set-up's CPU against the first's, paired round by round (the median ratio and its 95%
interval: "parity within noise" when it holds 1), beside whether the two did the same work (the
same syscalls per GiB).

  scripts/engines-compare [--rounds 5] [--bufs 4k,16k,64k] [--bytes 100M] [--out DIR]
                          [--binary LABEL=PATH ...] [LABEL=ARGS ...]
  e.g. scripts/engines-compare blocking="--engine blocking" \\
           multishot="--engine uring" batch="--engine uring --uring-recv batch"
  A build against another (the data path before and after a change, same options):
       scripts/engines-compare --binary before=OLD/iobench before="--cpus 0,1" \\
           after="--cpus 0,1"
Default set-ups: blocking, epoll, uring (TCP).
"""
import json
import math
import os
import shlex
import statistics
import sys
from typing import NamedTuple

from iobench_tools.lib.kernel import axes
from iobench_tools.lib.kernel import iobenchjson
from iobench_tools.lib.kernel.iobenchlib import (GiB, ROOT, fmt_stat, median, require_binary,
                                          run_json, stat)
from iobench_tools.lib.kernel import experiment, iobenchlib
from iobench_tools.lib.kernel import runs as iobench_runs
from iobench_tools.lib.judging import samework, statslib
DEFAULT = ["blocking=--engine blocking", "epoll=--engine epoll", "uring=--engine uring"]


class SizeRound(NamedTuple):
    """One set-up's figures at one size in one round."""
    cpu: float       # CPU s/GiB, sender + receiver
    syscalls: float  # per GiB, both sides
    gbps: float      # the receiver's
    round: int
    counts: dict     # samework's wire counts per GiB; None in a progress record kept before them


def size_figures(res):
    """One size's CPU s/GiB (sender + receiver), syscalls per GiB (both sides), receiver
    Gbit/s, and its wire counts per GiB (samework's: writes, reads, TLS records each way; and
    the receiver's sleeps)."""
    s, v = res.runs[0].sender, res.runs[0].receiver
    # --syscalls auto: the kernel's counts are in the size's counting run.
    ks, kv = res.counted("sender"), res.counted("receiver")
    gib = kv.bytes / GiB
    sys_total = (ks.syscalls.total + kv.syscalls.total) / gib
    return [s.cpu_s_per_gib + v.cpu_s_per_gib, sys_total, v.throughput_gbps,
            {"bytes": GiB, "writes": ks.syscalls.data_direction / gib,
             "reads": kv.syscalls.data_direction / gib, "records_out": ks.records / gib,
             "records_in": kv.records / gib,
             # how often the receiver blocked waiting for bytes (its voluntary context switches)
             "receiver_sleeps": (None if v.voluntary_ctxsw is None
                                 else v.voluntary_ctxsw / (v.bytes / GiB))}]


def binaries_of(given, labels):
    """--binary LABEL=PATH: {label: path}; exits with one line naming a bad one."""
    out = {}
    for item in given:
        label, sep, path = item.partition("=")
        if not sep or label not in labels:
            sys.exit(f"engines-compare: invalid --binary '{item}': expected LABEL=PATH with a "
                     f"set-up's LABEL ({', '.join(labels)})")
        path = require_binary("engines-compare", os.path.abspath(path))
        # Kept in the progress record: a build inside the checkout is named from its root.
        out[label] = os.path.relpath(path, ROOT) if path.startswith(ROOT + os.sep) else path
    return out


def median_counts(rows):
    """The median wire counts per GiB of a set-up's rounds, or None when none were kept."""
    counts = [r.counts for r in rows if r.counts]
    return {k: median(c[k] for c in counts) for k in counts[0]} if counts else None


def receiver_sleeps_text(rows):
    """The receiver's sleeps per GiB, median with min-max over the rounds ("n/a" when not kept)."""
    sleeps = [r.counts["receiver_sleeps"] for r in rows
              if r.counts and r.counts.get("receiver_sleeps") is not None]
    return fmt_stat(stat(sleeps), 0) if sleeps else "n/a"


def same_work_text(base, rows):
    a, b = median_counts(base), median_counts(rows)
    same = samework.same_counts(a, b) if a and b else None
    if same is None:
        return "n/a (not counted)"
    return "yes" if same else (f"no ({b['writes'] / 1000:.1f} k vs {a['writes'] / 1000:.1f} k "
                               f"writes/GiB, {b['reads'] / 1000:.1f} k vs "
                               f"{a['reads'] / 1000:.1f} k reads/GiB)")


def rounds_for(ratios, resolution=0.05):
    """How many paired rounds put the 95% interval of the mean log ratio within ±`resolution`
    at the spread these rounds show (normal approximation: (1.96 sd / ln(1 + resolution))^2),
    with that spread: "31 (sd 0.135)"; "n/a" under three rounds."""
    if not ratios or len(ratios) < 3:
        return "n/a"
    sd = statistics.stdev(math.log(r) for r in ratios)
    return f"{math.ceil((1.96 * sd / math.log1p(resolution)) ** 2)} (sd {sd:.3f})"


def print_against_first(figures, labels):
    """Each set-up's CPU against the first set-up's, size by size, paired round by round, and
    whether the two did the same work (samework: the same writes and TLS records per byte, reads
    within 15%: how the bytes arrive moves the reads, not the work)."""
    if len(labels) < 2:
        return
    print(f"\n| size | set-up | CPU vs {labels[0]} (paired, 95% interval) | same work "
          "| rounds for ±5% |")
    print("|---|---|---|---|---|")
    for buf, by_label in figures.items():
        base = by_label.get(labels[0], [])
        for label in labels[1:]:
            rows = by_label.get(label, [])
            if not base or not rows:
                continue
            row_a = {"rounds": [r.round for r in base], "cpu": [r.cpu for r in base]}
            row_b = {"rounds": [r.round for r in rows], "cpu": [r.cpu for r in rows]}
            ratio, _, (low, high), _, how = statslib.compare(row_a, row_b, key="cpu")
            verdict = "parity within noise" if low <= 1 <= high else \
                "cheaper" if high < 1 else "dearer"
            same = same_work_text(base, rows)
            print(f"| {buf} | {label} | x{ratio:.3f} [{low:.3f}-{high:.3f}] {how}: {verdict} "
                  f"| {same} | {rounds_for(statslib.paired_ratios(row_a, row_b, 'cpu'))} |")


def main(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    ap.add_argument("setups", nargs="*", help="LABEL=ARGS (iobench options)")
    ap.add_argument("--binary", action="append", default=[], metavar="LABEL=PATH",
                    help="the iobench the set-up LABEL runs (default: --iobench); two builds "
                         "with the same options compare their data paths")
    axes.add_rounds(ap, 5, "each set-up runs every size once per round")
    axes.add_bufs(ap, "4k,16k,64k")
    axes.add_bytes(ap, "100M")
    axes.add_progress_out(ap, "every run's JSON")
    iobenchlib.add_confine_option(ap, "run both sides under taskset -c CPUS (e.g. 0)")
    iobenchlib.add_binary_option(ap)
    a = ap.parse_args(argv)
    iobenchlib.refuse_renamed(ap, a)
    require_binary("engines-compare", a.iobench)
    if a.rounds < 1:
        sys.exit(f"engines-compare: invalid --rounds '{a.rounds}': expected 1 or more")
    setups = []
    for s in a.setups or DEFAULT:
        label, sep, args = s.partition("=")
        if not sep or not label:
            sys.exit(f"engines-compare: invalid set-up '{s}': expected LABEL=ARGS")
        setups.append((label, shlex.split(args)))
    binaries = binaries_of(a.binary, [label for label, _ in setups])
    if a.out:
        os.makedirs(a.out, exist_ok=True)

    def run_one(cell, rnd, attempt):
        """One run of a set-up over every size: per size (cpu, syscalls, gbps) per GiB."""
        label, args = cell["id"], cell["args"]
        binary = os.path.join(ROOT, binaries[label]) if label in binaries else a.iobench
        doc = run_json(iobench_runs.ClientRun(buf=a.bufs, bytes=a.bytes, extra=tuple(args)),
                       f"engines-compare: {label}", iobench=binary, cpus=a.confine,
                       fail=experiment.failed_run)
        if a.out:
            with open(os.path.join(a.out, f"{label}-round{rnd}.json"), "w") as f:
                json.dump(doc, f, indent=1)
        return {res.label: size_figures(res) for res in iobenchjson.read(doc).results}

    cells = [{"id": label, "args": args} for label, args in setups]
    runs, failed = experiment.run_scenario(
        "engines-compare", cells, a.rounds, run_one, out_dir=a.out,
        identity={"bufs": a.bufs, "bytes": a.bytes, "confine": a.confine,
                  **({"binaries": binaries} if binaries else {})})
    # figures[buf][label] = the set-up's SizeRound of each round
    figures = {}
    for label, rs in runs.items():
        for r in rs:
            for buf, fig in r.items():
                if buf != "round":
                    figures.setdefault(buf, {}).setdefault(label, []).append(
                        SizeRound(*fig[:3], r["round"], fig[3] if len(fig) > 3 else None))
    print("| size | set-up | CPU s/GiB | syscalls/GiB | Gbit/s | receiver sleeps/GiB |")
    print("|---|---|---|---|---|---|")
    for buf, by_label in figures.items():
        for label, _ in setups:
            rows = by_label.get(label, [])
            if not rows:
                continue
            print(f"| {buf} | {label} | {fmt_stat(stat(r.cpu for r in rows), 2)} | "
                  f"{median(r.syscalls for r in rows) / 1000:.1f} k "
                  f"| {median(r.gbps for r in rows):.1f} | {receiver_sleeps_text(rows)} |")
    print_against_first(figures, [label for label, _ in setups])
    for x in failed:
        print(f"engines-compare: failed: {x}", file=sys.stderr)
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
