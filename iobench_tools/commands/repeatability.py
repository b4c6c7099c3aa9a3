"""Reads several sweeps of one command and writes how repeatable their answer is (issue #48):
each sweep's statement per protocol (rule v2 on that sweep: settled or open), how often each
came out, whether the A/A control's stated 95% intervals cover 1 at that rate across the sweeps
(and the between-sweep term by which a sweep's intervals must be widened where they do not),
and each size's ratio to the largest size pooled across the sweeps with how many independent
sweeps a verdict on it needs.

  scripts/repeatability SWEEP... [--tolerance 0.05] [--report FILE]

A SWEEP is a sweep's folder or a .tar.xz of one (how results/reference-repeat keeps ten sweeps'
cells within a results folder's 5 MB)."""
import collections
import datetime
import math
import os
import sys
import tempfile

from iobench_tools.lib.kernel import iobenchlib
from iobench_tools.lib.judging import studyjudge
from iobench_tools.lib.sweeps import repeatability as rep
from iobench_tools.lib.sweeps import sweeplib


def parse_args(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    ap.add_argument("sweeps", nargs="+", metavar="SWEEP",
                    help="sweep result folders (scripts/sweep NAME writes results/NAME) or "
                         ".tar.xz archives of them")
    ap.add_argument("--tolerance", type=float, default=0.05,
                    help="the resolution the pooled ratios are read against (0.05); each sweep's "
                         "statement is rule v2's, at its fixed 10%%")
    ap.add_argument("--report", metavar="FILE", help="write the report here (default: stdout)")
    iobenchlib.add_renamed_option(ap, "--out", "--report", "--out names a folder in every "
                                  "script; this is one file")
    a = ap.parse_args(argv)
    iobenchlib.refuse_renamed(ap, a)
    if not 0 < a.tolerance < 1:
        ap.error(f"invalid --tolerance '{a.tolerance}': expected a fraction in (0, 1)")
    if len(a.sweeps) < 2:
        ap.error("give two sweeps or more: one sweep says nothing about repeatability")
    return a


def seconds(manifest):
    try:
        t0, t1 = (datetime.datetime.fromisoformat(manifest[k]) for k in ("started", "finished"))
    except (KeyError, TypeError, ValueError):
        return None
    return (t1 - t0).total_seconds()


def statement(v):
    """One sweep's statement as the table counts it (studyjudge: rule v2 on that sweep)."""
    if v.state == "unread":
        return "not read (no rounds recorded)"
    return f"{sweeplib.size_label(v.size)} ({'open' if v.state == 'open' else 'settled'})"


def sweep_table(sweeps, protos):
    """The table of sweeps and {proto: Counter of statements}."""
    # The bytes per run come from the manifest: a default that depends on the link (--where
    # netns) makes two equal command lines move different payloads.
    lines = ["| sweep | time | per run | rounds (stopped) | seed | A/A (stated 95%) | "
             + " | ".join(p.upper() for p in protos) + " |",
             "|---|---|---|---|---|---|" + "---|" * len(protos)]
    counts = {p: collections.Counter() for p in protos}
    for name, manifest, rows in sweeps:
        groups = sweeplib.one_connection_groups(rows)
        cells = []
        for p in protos:
            rs = [v for (_, proto), v in groups.items() if proto == p]
            s = statement(studyjudge.judge({p: studyjudge.of_rows(rs[0])})) if rs else "not run"
            counts[p][s] += 1
            cells.append(s)
        f = manifest.get("noise_floor")
        aa = f"x{f['ratio']:.3f} [{f['low']:.3f}..{f['high']:.3f}]" if f else "no control"
        t = seconds(manifest)
        lines.append(f"| {name} | {f'{t:.0f} s' if t is not None else '?'} | "
                     f"{manifest.get('bytes', '?')} | {manifest.get('rounds_run', '?')} ({manifest.get('stopped', '?')}) | "
                     f"{manifest.get('seed')} | {aa} | " + " | ".join(cells) + " |")
    return lines, counts


def aa_lines(cal):
    if cal is None:
        return ["A/A across sweeps: fewer than two sweeps ran a control."]
    low, high = cal["rate"]
    p = cal["pooled"]
    words = [f"A/A across sweeps: the stated 95% interval covered 1 in **{cal['covered']} of "
             f"{cal['n']}** sweeps (the rate's 95% Wilson interval {100 * low:.0f}–"
             f"{100 * high:.0f}%). Pooled x{p['mean']:.3f} [{p['low']:.3f}..{p['high']:.3f}]; "
             f"between-sweep sd of the log ratio {p['tau']:.3f} (Cochran's Q {p['q']:.1f} on "
             f"{cal['n'] - 1} degrees of freedom)."]
    if p["tau"] > 0:
        words.append(f"A sweep's stated half-width (median ±{100 * cal['stated_half']:.1f}%) "
                     f"misses that term: widened by it, ±{100 * cal['widened_half']:.1f}%.")
    else:
        words.append(f"The sweeps' A/A ratios spread no more than their own intervals allow "
                     f"(median ±{100 * cal['stated_half']:.1f}%): no sweep-level term is seen.")
    if high < 0.95:
        words.append("**The stated intervals cover 1 less often than they say.**")
    return [" ".join(words)]


def side_of(pooled, tolerance):
    """Where the pooled interval lies against 1 + tolerance: what these sweeps decide together."""
    if pooled["low"] > 1 + tolerance:
        return f"above x{1 + tolerance:.2f}"
    if pooled["high"] <= 1 + tolerance:
        return f"within x{1 + tolerance:.2f}"
    return f"undecided (straddles x{1 + tolerance:.2f})"


def pair_lines(pairs, tolerance):
    lines = ["| protocol | size / largest | sweeps | pooled ratio [95%] | pooled, at the "
             "tolerance | between-sweep sd | within-sweep sd (median) | sweeps a verdict needs |",
             "|---|---|---|---|---|---|---|---|"]
    for (placement, proto, buf, top), points in sorted(pairs.items()):
        if len(points) < 2:
            continue
        p = rep.random_effects(points)
        within = iobenchlib.median([se for _, se in points])
        need = rep.sweeps_needed(math.log(p["mean"]), within, p["tau"], tolerance)
        lines.append(f"| {proto.upper()} ({placement}) | {sweeplib.size_label(buf)} / "
                     f"{sweeplib.size_label(top)} | {len(points)} | x{p['mean']:.3f} "
                     f"[{p['low']:.3f}..{p['high']:.3f}] | {side_of(p, tolerance)} | "
                     f"{p['tau']:.3f} | {within:.3f} | "
                     f"{need if need is not None else 'none decides: on the line'} |")
    return lines


def report(sweeps, tolerance):
    # The same command but for each sweep's name.
    commands = sorted({m.get("command", "?").replace(f" {m.get('name')} ", " NAME ")
                       for _, m, _ in sweeps})
    protos = sorted({r["proto"] for _, _, rows in sweeps for r in rows})
    table, counts = sweep_table(sweeps, protos)
    lines = [f"# Repeatability of {len(sweeps)} sweeps", "",
             "Command" + ("s (they differ: read with care)" if len(commands) > 1 else "") + ": "
             + "; ".join(f"`{c}`" for c in commands) + f". Tolerance {tolerance:.0%}.", ""]
    lines += table + ["", "How often each statement came out:", ""]
    for p in protos:
        lines.append(f"- {p.upper()}: " + ", ".join(f"{s} in {n} of {len(sweeps)}"
                                                   for s, n in counts[p].most_common()))
    lines += ["", *aa_lines(rep.aa_calibration(rep.aa_floors(sweeps))), "",
              "Each size against the protocol's largest, pooled across the sweeps (a "
              "random-effects model: each sweep's paired ratio and interval, plus the spread "
              "between sweeps; the sweeps a verdict needs: independent sweeps whose pooled "
              f"interval would end clear of x{1 + tolerance:.2f}):", ""]
    lines += pair_lines(rep.pair_ratios(sweeps), tolerance)
    return "\n".join(lines) + "\n"


def main(argv=None):
    a = parse_args(argv)
    sweeps = []
    with tempfile.TemporaryDirectory(prefix="iobench-repeatability.") as tmp:
        for i, d in enumerate(a.sweeps):
            if d.endswith(".tar.xz"):
                d = rep.unpack(d, os.path.join(tmp, str(i)), "repeatability")
            manifest, rows = sweeplib.load(d, "repeatability")
            sweeps.append((manifest.get("name") or os.path.basename(os.path.normpath(d)),
                           manifest, rows))
    text = report(sweeps, a.tolerance)
    if a.report:
        with open(a.report, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0
