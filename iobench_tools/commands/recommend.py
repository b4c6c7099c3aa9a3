"""Reads a sweep and writes a Markdown report (results/<name>/recommendation.md): per protocol,
the table in Valkey PR #817's columns, the intervals and regimes, and the one statement the
project makes of one study: rule v2's fixed sequence on the sweep's paired rounds
(lib/judging/studyjudge.py, the design's rule read on one study), settled or open, and the
default for one connection and for many. An open statement is no default: the report says how
many rounds per cell would likely settle it.

  scripts/recommend results/<name> [--tolerance 0.05] [--cost processes|host] [--report FILE]
                    [--micro MICRO.json]

A fleet (results/<name>/fleet.json, scripts/fleet) gets each pair's statement, and per instance
type and across its pairs the size every pair names or the pairs that differ (hosts are never
pooled).

A fan-out scenario (results/<name>/fanout.json, scripts/fanout-scenario) gets the one-writer
answer instead: per shape and protocol, whether one chunk size is right for every N replicas,
whether the adaptive mode is within --tolerance of the best with no more memory, and the default."""
import json
import os
import sys

from iobench_tools.lib.kernel import hostid
from iobench_tools.lib.kernel import iobenchlib
from iobench_tools.lib.kernel import resultfolder
from iobench_tools.lib.judging import carryover
from iobench_tools.lib.judging import costmodel
from iobench_tools.lib.judging import studyjudge
from iobench_tools.lib.sweeps import fanoutlib
from iobench_tools.lib.sweeps import studyrule
from iobench_tools.lib.sweeps import noisefloor
from iobench_tools.lib.sweeps import sweeplib
from iobench_tools.lib.fleet import fleetlib

# The design's answer a per-study page is read against: results/design-answer/table (16K holds
# on every host and link measured; tests/scripts/test_docs_defaults.py holds the two equal).
DESIGN_ANSWER = 16384


def source_text(window):
    if window in (None, "payload"):
        return "the whole payload once, from its cold pages"
    return (f"a hot window of {window} repeated (--source-window), as a primary sends from the "
            "buffer its serializer has just filled")


def quiet_host_lines(manifest, cpus):
    """What the host spent outside the sweep's own processes during its runs (each run's
    outside_cpu_s, under the host's measurement lock); nothing for a sweep made before it was
    recorded."""
    runs = [r for c in manifest.get("cells", []) for r in
            ([*c.get("rounds", {}).values()] if c.get("rounds") else [c])
            if r.get("status") == "ok" and "outside_cpu_s" in r]
    if not runs:
        return []
    worst = max(runs, key=lambda r: r["outside_cpu_s"] / max(r.get("seconds") or 1e-9, 1e-9))
    share = worst["outside_cpu_s"] / max(worst.get("seconds") or 1e-9, 1e-9) / cpus
    return [f"- quiet host: outside the sweep's processes the host spent a median "
            f"{iobenchlib.median([r['outside_cpu_s'] for r in runs]):.3f} s of CPU a run, at most "
            f"{worst['outside_cpu_s']:.3f} s ({share:.0%} of its {cpus} CPUs over that run); "
            f"{len(runs)} runs, the host's measurement lock held throughout"]


def report(manifest, rows, tolerance, micro=None):
    ctx = rows[0]["context"]
    lines = [f"# Buffer-size recommendation: {manifest['name']}", ""]
    where = manifest["where"]
    if manifest.get("netns"):
        where += f" (two namespaces, veth MTU {manifest['netns']['mtu']}, tbf {manifest['netns']['rate']})"
    lines += [f"- sweep: `{manifest['command']}`",
              f"- iobench commit {manifest['iobench_commit']}, {manifest['bytes']} per run, "
              f"{rows[0]['runs']} measured runs per cell (medians below), where: {where}",
              f"- host: {ctx['cpu_model']}, {ctx['cpus_online']} CPUs, {ctx['kernel']}, "
              f"{ctx['libraries'].get('openssl', 'OpenSSL ?')}",
              *([f"- cpu: {cpu}"] if (cpu := hostid.cpu_line(hostid.host_of_context(ctx)))
                else []),
              f"- sender's source: {source_text(manifest.get('source_window'))}",
              f"- started {manifest['started']}, finished {manifest.get('finished') or 'not yet'}"]
    if manifest.get("stopped"):
        lines += [f"- --repeat auto ran {manifest.get('rounds_run')} rounds and stopped at "
                  f"{manifest['stopped']}"]
    lines += quiet_host_lines(manifest, ctx.get("cpus_online") or 1)
    lines += [""]
    pairs = manifest.get("control_pairs", [])
    measured_floors = [noisefloor.floor(o, t) for o, t in pairs]
    lines += noisefloor.text(pairs, tolerance, measured_floors)
    floors = {o["placement"]: f for (o, _), f in zip(pairs, measured_floors)}
    for pl in sorted({r["placement"] for r in rows}):
        measured = [r for r in rows if r["placement"] == pl and r["conns"] == 1
                    and r["group"] is None] + [t for o, t in pairs if o["placement"] == pl]
        f = floors.get(pl)
        lines += [(f"{pl}: " if len(floors) > 1 else "") + x if x else x
                  for x in carryover.text(measured, manifest, f["half_width"] if f else None)]
    lines += ["How sure: each protocol's statement is rule v2's sequence read on this sweep's "
              "rounds (each size against the one it would replace: a gain past 10% shown at "
              "one-sided 95% by Student's t on the paired log ratios, and its cost shown below "
              "x1.10 of the one it replaces). The tables' intervals describe the cells: the medians "
              "of the cells' per-run total CPU per GiB (sender + receiver of "
              "one run; with --cost host, the host's busy seconds per GiB over the sender's data "
              "phase, all CPUs). Cells measured in the same interleaved rounds are compared round "
              "by round — the ratio is the median of the per-round ratios, ± the half-width of "
              "that median's 95% bootstrap interval, distinguishable means Wilcoxon's signed-rank "
              "p < 0.05 and an interval that excludes 1 — since two runs of one round share the "
              "host's drift; other cells by the ratio of their medians, its bootstrap interval "
              "and Mann-Whitney U. "
              "An open statement is not recommended.", ""]
    failed = [c for c in manifest["cells"] if c.get("status") == "failed"]
    if failed:
        lines += ["Failed cells: " + ", ".join(f"{c['id']} ({c['error']})" for c in failed), ""]
    placements = sorted({r["placement"] for r in rows})
    if len(placements) > 1:
        lines += ["Cells measured under different CPU placements are never compared: each "
                  "placement has its own tables, statements and default.", ""]
    defaults = {}
    for pl in placements:
        prs = [r for r in rows if r["placement"] == pl]
        if len(placements) > 1:
            lines += [f"# Placement: {pl}", ""]
        elif pl == "unrecorded":
            lines += ["Placement: unrecorded (cells from an iobench that did not record it; "
                      "placement moves the statement: re-run with --cpus to know).", ""]
        else:
            lines += [f"Placement: {pl}.", ""]
        picks, body = proto_sections(prs, micro)
        lines += body
        unsure = noisefloor.excludes_one(floors.get(pl))
        if unsure:
            picks = {p: (k, unsure) for p, (k, _) in picks.items()}
            lines += [f"**No statement above is settled**: {unsure}.", ""]
        defaults[pl], default_lines = one_connection_default(picks, prs)
        lines += ["## This sweep's statements, per study" + (f" ({pl})" if len(placements) > 1 else ""),
                  ""]
        lines += default_lines
        lines += ["- These are one sweep's CPU statements, not a design default. The design's chunk "
                  "also sets memory and client p99: scripts/design-answer weighs all three over "
                  "one host's campaign of sweeps by rule v2 (docs/design-rule-v2.md), fixed "
                  "before the runs; the answer by host is results/design-answer/README.md."]
        lines += many_connections(prs)
        lines += studyrule.sweep_lines(prs, DESIGN_ANSWER)
    if len(placements) > 1:
        lines += ["# Across placements", ""]
        chosen = {pl: d for pl, d in defaults.items() if d is not None}
        if len(set(chosen.values())) > 1:
            lines.append("**The statement differs between placements**: "
                         + ", ".join(f"{sweeplib.size_label(d)} {pl}" for pl, d in chosen.items())
                         + ". No single default follows from this sweep: measure with the "
                           "placement the primary and its replicas will have.")
        elif chosen and len(chosen) == len(defaults):
            lines.append(f"The statement is the same under every placement: "
                         f"{sweeplib.size_label(next(iter(chosen.values())))}.")
        else:
            lines.append("Not every placement gave a default (see above): no default across them.")
    return "\n".join(lines) + "\n"


def proto_sections(rows, micro=None):
    """Per protocol: the PR #817 table and its statement. Returns ({proto: pick}, lines)."""
    picks, lines = {}, []
    for proto in sorted({r["proto"] for r in rows}):
        rs = [r for r in rows if r["proto"] == proto and r["conns"] == 1 and r["group"] is None]
        if not rs:
            continue
        lines += [f"## {proto.upper()}", "",
                  "| Chunk Size | write-time sec | writes total | write cpu-time (usr+sys) | "
                  "read-time sec | read total syscalls | read cpu-time (usr+sys) | "
                  + ("host busy s/GiB |" if rs[0].get("cost") == "host" else "total cpu s/GiB |"),
                  "|---|---|---|---|---|---|---|---|"]
        for r in rs:
            s, v = r["sender"], r["receiver"]
            lines.append(
                f"| {sweeplib.size_label(r['buf'])}{' - TLS' if proto == 'tls' else ''} "
                f"| {s['wall_s']['median']:.6f} | {s['io_calls']['median']:.0f} "
                f"| {s['cpu_s']['median']:.6f} | {v['wall_s']['median']:.6f} "
                f"| {v['syscalls']['median']:.0f} | {v['cpu_s']['median']:.6f} "
                f"| {sweeplib.total_cpu_per_gib(r):.3f} |")
        lines += ["", cost_intervals(rs, min(rs, key=sweeplib.total_cpu_per_gib))]
        lines += regime_lines(rs)
        rs = sweeplib.same_work_rows(rs)
        same = [r["mechanism"] for r in rs if r.get("mechanism")]
        if same:
            lines += ["", "Same work by mechanism: " + "; ".join(same) + ". Each such set is "
                      "one workload below (its cost per round the median of its sizes'), "
                      "named by its smallest size."]
        best = min(rs, key=sweeplib.total_cpu_per_gib)
        model, scope = sweeplib.model_for(rs, best, micro)
        if model:
            lines += ["", costmodel.text(model, sweeplib.size_label, scope)]
        v = studyjudge.judge({proto: studyjudge.of_rows(rs)})
        picks[proto] = pick(v, rs)
        lines += ["", f"Lowest total CPU per GiB: {sweeplib.total_cpu_per_gib(best):.3f} s at "
                      f"{sweeplib.size_label(best['buf'])}. {statement(v)}", ""]
    return picks, lines


def statement(v):
    """A protocol's one verdict on this sweep: rule v2's sequence on its rounds (studyjudge),
    what --repeat auto waits for and scripts/repeatability counts across sweeps."""
    if v.state == "unread":
        return f"**No statement**: {v.words()} (an older sweep's cells record no rounds)."
    state = {"ended": "settled", "all": "settled at the largest work tried",
             "open": "open"}[v.state]
    return (f"**Statement: {sweeplib.size_label(v.size)}** ({state}): {v.words()}. One sweep is "
            "one study, read on CPU alone.")


def pick(v, rs):
    """(the row rule v2 names, why it is no default or None)."""
    row = next((r for r in rs if r["buf"] == v.size), None)
    if v.state == "unread":
        return None, "no statement (cells without rounds)"
    if v.state == "open":
        more = f"; about {v.more} rounds per cell would likely settle it" if v.more else \
            "; more rounds would not settle it"
        return row, f"{sweeplib.size_label(v.size)} with a step still open{more}"
    if v.state == "all" and len((row or {}).get("members", ())) < 2:
        return row, (f"{sweeplib.size_label(v.size)} is the largest size tried and replaced "
                     "the one before: sweep larger sizes")
    return row, None  # settled, or the largest work tried stands for larger sizes (samework)


def regime_lines(rs):
    """Which regime each size's sender fell into: the share of its data phase its CPU was busy
    (the median over runs). A sender that ran throughout never waited: each write left at once,
    in its own context (its send queue found empty), so its CPU per GiB is about its wall time
    per GiB and sizes are told apart by the receiver and the time, not by the sender's work
    (docs/measurement.md)."""
    busy = {r["buf"]: r["sender"]["busy"]["median"] for r in rs if "busy" in r["sender"]}
    if not busy:
        return []
    ran = [r["buf"] for r in rs if sweeplib.ran_throughout(r)]
    shares = ", ".join(f"{sweeplib.size_label(b)} {100 * x:.0f}%" for b, x in sorted(busy.items()))
    if not ran:
        note = "every sender waited for its socket buffer at times"
    elif len(ran) == len(busy):
        note = ("every sender ran throughout: each write left at once, in the sender's own "
                "context, so its CPU per GiB is about its wall time per GiB")
    else:
        note = ("two regimes: " + ", ".join(sweeplib.size_label(b) for b in sorted(ran))
                + " ran throughout (each write left at once, in the sender's context), the others"
                " waited at times;"
                " the same calls cost more in the first")
    lines = ["", f"Regimes (each sender's busy share of its data phase, median): {shares}: {note} "
                 "(docs/measurement.md, \"Two regimes for one workload\")."]
    switches = [(r["buf"], r.get("switches_per_gib")) for r in rs]
    if all(x is not None for _, x in switches):
        lines[-1] += (" Voluntary context switches per GiB (both sides, median; each a sleep and "
                      "a wake-up): " + ", ".join(f"{sweeplib.size_label(b)} {x:,.0f}"
                                                 for b, x in sorted(switches)) + ".")
    mixed = [(r, sweeplib.regime_split(r)) for r in sorted(rs, key=lambda r: r["buf"])]
    mixed = [(r, split) for r, split in mixed if split]
    if mixed:
        lines += ["", "Sizes whose runs fell into both regimes, each regime its own distribution "
                      "(CPU per GiB, median [min–max] of its runs): " + "; ".join(
                          f"{sweeplib.size_label(r['buf'])}: " + ", ".join(
                              f"{len(c)} {name} {iobenchlib.fmt_stat(iobenchlib.stat(c), 3, '–')}"
                              for name, c in split.items()) for r, split in mixed)
                  + ". The statement below pools them; where the two differ, its interval "
                    "carries that spread."]
    return lines


def cost_intervals(rs, best):
    """Which cost measures these cells more tightly: per size, the half-width of the 95%
    interval of its ratio to the lowest cell over that ratio, judged on the two processes' CPU
    and on the host's busy time (the same runs)."""
    parts = []
    for cost in sweeplib.COSTS:
        key = "host_runs" if cost == "host" else "process_runs"
        if not all(r[key] for r in rs):
            parts.append(f"{cost}: not measured")
            continue
        widths = []
        for r in rs:
            if r is not best:
                ratio, hw, _, _, _ = sweeplib.compare(best, r, key)
                widths.append(hw / ratio if ratio else 0)
        parts.append(f"{cost} ±{100 * sweeplib.median(widths):.1f}%" if widths else
                     f"{cost}: one size")
    judged = rs[0].get("cost", "processes")
    return (f"Intervals (median over sizes of the 95% interval's half-width of each size's "
            f"ratio to the lowest, relative to the ratio): "
            + ", ".join(parts) + f"; the statement is judged on {judged} (--cost).")


def one_connection_default(picks, rows):
    """The one-connection default of this sweep (or None) and the lines that say it: the
    largest of the protocols' statements when every one is settled inside the range."""
    if not picks:
        return None, ["- One connection: no single-connection cells."]
    unsettled = {p: why for p, (_, why) in picks.items() if why}
    if unsettled:
        return None, ["- **One connection: no default from this sweep** — "
                      + "; ".join(f"{p.upper()}: {e}" for p, e in sorted(unsettled.items()))
                      + "."]
    one = max(k["buf"] for k, _ in picks.values())
    largest = max(r["buf"] for r in rows if r["conns"] == 1 and r["group"] is None)
    return one, [f"- **One connection: {sweeplib.size_label(one)}** — the largest statement "
                 "across " + ", ".join(f"{p.upper()} {sweeplib.size_label(k['buf'])}"
                                       for p, (k, _) in sorted(picks.items()))
                 + f": each size up to it replaced the one before by more than 10%, and the "
                   f"next, up to the largest size tried ({sweeplib.size_label(largest)}), did "
                   "not."]


def many_connections(rows):
    many = [r for r in rows if r["group"] is not None]
    if many:
        # One engine's cells (the verdict's cells are keyed by protocol, N and size).
        verdicts = fanoutlib.conns_verdicts(
            [r for r in rows if r["engine"] == many[0]["engine"]])
        return (["- Many connections: " + fanoutlib.recommendation(v) for v in verdicts]
                + ["", "## Many connections", "", sweeplib.conns_table(rows)]
                + [f"- {fanoutlib.answer_text(v)}" for v in verdicts] + [""])
    return ["- Many connections: this sweep has no multi-connection or adaptive cells, so "
            "it cannot say; run scripts/conns-scenario.", ""]


def fanout_report(doc):
    verdicts = [fanoutlib.verdict(doc["cells"], doc["replicas"], doc["bufs"], s, p,
                                  control=doc.get("control"))
                for s in doc["shapes"] for p in doc["protos"]]
    ctx = doc["context"]
    lines = [f"# Chunk-size recommendation for one writer and N replicas", "",
             f"- scenario: `{doc['command']}` ({doc['rounds']} interleaved rounds, "
             f"{doc['bytes_per_replica']} per replica, where: {doc.get('where', 'loopback')})",
             f"- host: {ctx['cpu_model']}, {ctx['cpus_online']} CPUs, {ctx['kernel']}",
             f"- criterion: {doc['criterion']}; each N read by rule v2's sequence (studyjudge)",
             "- what this is: one study's statements by the design's rule, not a design "
             "default; the design's chunk is the host's campaign by rule v2 "
             "(docs/design-rule-v2.md): results/design-answer/README.md", "",
             "## Recommendation", ""]
    lines += [f"- {fanoutlib.recommendation(v)}" for v in verdicts]
    lines += [""] + studyrule.lines(doc, DESIGN_ANSWER)
    lines += ["## Why", ""] + [f"- {fanoutlib.answer_text(v)}" for v in verdicts]
    for v in verdicts:
        lines += [fanoutlib.table(doc["cells"], doc["replicas"], doc["bufs"], v["shape"],
                                  v["proto"])]
    return "\n".join(lines) + "\n"


def manifest_micro(folder):
    """The iobench-micro JSON (repository-relative) a sweep's stop was judged with, or None."""
    try:
        with open(os.path.join(folder, "manifest.json")) as f:
            return json.load(f).get("micro")
    except (OSError, ValueError, AttributeError):
        return None


def main(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    ap.check_before_run(lambda a: sweeplib.missing_folder(a.sweep_dir, "recommend"))
    ap.add_argument("sweep_dir",
                    help="a sweep's folder (results/NAME), a fan-out scenario's or a fleet's")
    ap.add_argument("--tolerance", type=float, default=0.05,
                    help="the resolution the A/A noise floor plans rounds for and the many-"
                         "connection and fan-out verdicts read (0.05: 5%%); one connection's "
                         "statement is rule v2's, at its fixed 10%%")
    ap.add_argument("--report", metavar="FILE",
                    help="write the recommendation here (default: recommendation.md in the "
                         "sweep's folder)")
    iobenchlib.add_renamed_option(ap, "--out", "--report", "--out names a folder in every "
                                  "script; this is one file")
    ap.add_argument("--micro", metavar="MICRO.json",
                    help="iobench-micro's JSON from this host (scripts/micro): the TCP cost "
                         "model's cost per syscall is checked against its measured one, and "
                         "stands aside where the two intervals do not overlap")
    ap.add_argument("--cost", default="processes", choices=sweeplib.COSTS,
                    help="what the statement is judged on: the two processes' CPU per GiB (default) "
                         "or the host's busy time per GiB over the data phase (all CPUs, "
                         "softirqs wherever they land)")
    a = ap.parse_args(argv)
    iobenchlib.refuse_renamed(ap, a)
    if not 0 <= a.tolerance < 1:
        sys.exit(f"recommend: invalid --tolerance {a.tolerance}: expected 0..1")
    micro = None
    stopped_by = None if a.micro else manifest_micro(a.sweep_dir)
    if stopped_by:
        # The judge the sweep's --repeat auto stopped by: the report judges as the stop did.
        a.micro = os.path.join(iobenchlib.ROOT, stopped_by)
    if a.micro:
        try:
            micro = costmodel.micro_per_call(a.micro)
        except ValueError as e:
            sys.exit(f"recommend: {e}")
        if micro is None:
            sys.exit(f"recommend: --micro '{a.micro}' has fewer than 3 sizes of "
                     "BM_TcpLoopbackWriteRead (scripts/micro --benchmark_filter=TcpLoopback)")
    try:
        kind = resultfolder.kind_of(a.sweep_dir)
    except resultfolder.NotAResult:
        kind = "sweep"  # sweeplib.load says what a sweep lacks, in the words a user knows
    if kind not in ("fleet", "fanout-scenario", "sweep"):
        sys.exit(f"recommend: error: '{a.sweep_dir}' holds a {kind} study, not a sweep: its "
                 f"report is {os.path.join(a.sweep_dir, 'report.md')} (scripts/{kind} writes it)")
    if kind == "fleet":
        text, pairs = fleetlib.report(a.sweep_dir, a.cost)
        for p in pairs:  # each swept pair's own tables and statements, beside its results
            own = (fanout_report(p["fanout"]) if p["fanout"] else
                   report(p["manifest"], p["rows"], a.tolerance) if p["rows"] else None)
            if own:
                with open(os.path.join(p["dir"], "recommendation.md"), "w") as f:
                    f.write(own)
        out = a.report or os.path.join(a.sweep_dir, "recommendation.md")
        with open(out, "w") as f:
            f.write(text)
        print(f"wrote {out}")
        return
    fanout = os.path.join(a.sweep_dir, "fanout.json")
    if kind == "fanout-scenario":
        out = a.report or os.path.join(a.sweep_dir, "recommendation.md")
        with open(out, "w") as f:
            f.write(fanout_report(json.load(open(fanout))))
        print(f"wrote {out}")
        return
    manifest, rows = sweeplib.load(a.sweep_dir, "recommend", a.cost)
    if not rows:
        sys.exit(f"recommend: no finished cells in {a.sweep_dir}")
    text = report(manifest, rows, a.tolerance, micro)
    out = a.report or os.path.join(a.sweep_dir, "recommendation.md")
    with open(out, "w") as f:
        f.write(text)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
