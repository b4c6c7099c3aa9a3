"""Reads a sweep and writes a Markdown report (results/<name>/recommendation.md): per protocol,
the table in Valkey PR #817's columns, the knee (the smallest buffer within --tolerance of the
lowest total CPU per GiB) with how sure it is (the runs' 95% bootstrap intervals and the
Mann-Whitney U test), and the recommended default for one connection and for many. A knee inside
the noise is not recommended: the report says how many more runs per cell would tell.

  scripts/recommend results/<name> [--tolerance 0.05] [--cost processes|host] [--report FILE]
                    [--micro MICRO.json]

A fleet (results/<name>/fleet.json, scripts/fleet) gets the knee per pair, per instance type and
across its pairs, saying which pairs disagree.

A fan-out scenario (results/<name>/fanout.json, scripts/fanout-scenario) gets the one-writer
answer instead: per shape and protocol, whether one chunk size is right for every N replicas,
whether the adaptive mode is within --tolerance of the best with no more memory, and the default."""
import json
import os
import sys

from iobench_tools.lib.kernel import iobenchlib
from iobench_tools.lib.kernel import resultfolder
from iobench_tools.lib.judging import carryover
from iobench_tools.lib.judging import costmodel
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
              f"- sender's source: {source_text(manifest.get('source_window'))}",
              f"- started {manifest['started']}, finished {manifest.get('finished') or 'not yet'}"]
    if manifest.get("stopped"):
        lines += [f"- --repeat auto ran {manifest.get('rounds_run')} rounds and stopped at "
                  f"{manifest['stopped']}"]
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
    lines += ["How sure: each knee is set against the lowest cell and the size below it, "
              "with the medians of the cells' per-run total CPU per GiB (sender + receiver of "
              "one run; with --cost host, the host's busy seconds per GiB over the sender's data "
              "phase, all CPUs). Cells measured in the same interleaved rounds are compared round "
              "by round — the ratio is the median of the per-round ratios, ± the half-width of "
              "that median's 95% bootstrap interval, distinguishable means Wilcoxon's signed-rank "
              "p < 0.05 and an interval that excludes 1 — since two runs of one round share the "
              "host's drift; other cells by the ratio of their medians, its bootstrap interval "
              "and Mann-Whitney U. "
              "A knee whose place the noise could move is not recommended.", ""]
    failed = [c for c in manifest["cells"] if c.get("status") == "failed"]
    if failed:
        lines += ["Failed cells: " + ", ".join(f"{c['id']} ({c['error']})" for c in failed), ""]
    placements = sorted({r["placement"] for r in rows})
    if len(placements) > 1:
        lines += ["Cells measured under different CPU placements are never compared: each "
                  "placement has its own tables, knees and default.", ""]
    defaults = {}
    for pl in placements:
        prs = [r for r in rows if r["placement"] == pl]
        if len(placements) > 1:
            lines += [f"# Placement: {pl}", ""]
        elif pl == "unrecorded":
            lines += ["Placement: unrecorded (cells from an iobench that did not record it; "
                      "placement moves the knee: re-run with --cpus to know).", ""]
        else:
            lines += [f"Placement: {pl}.", ""]
        picks, answers, body = proto_sections(prs, tolerance, micro)
        lines += body
        unsure = noisefloor.excludes_one(floors.get(pl))
        if unsure:
            picks = {p: (k, unsure) for p, (k, _) in picks.items()}
            lines += [f"**No knee above is decided**: {unsure}.", ""]
        defaults[pl], default_lines = one_connection_default(picks, prs, answers)
        lines += ["## This sweep's knees, per study" + (f" ({pl})" if len(placements) > 1 else ""),
                  ""]
        lines += default_lines
        lines += ["- These are one sweep's CPU knees, not a design default. The design's chunk "
                  "also sets memory and client p99: scripts/design-answer weighs all three over "
                  "one host's campaign of sweeps by rule v2 (docs/design-rule-v2.md), fixed "
                  "before the runs; the answer by host is results/design-answer/README.md."]
        lines += many_connections(prs, tolerance)
        lines += studyrule.sweep_lines(prs, DESIGN_ANSWER)
    if len(placements) > 1:
        lines += ["# Across placements", ""]
        chosen = {pl: d for pl, d in defaults.items() if d is not None}
        if len(set(chosen.values())) > 1:
            lines.append("**The knee differs between placements**: "
                         + ", ".join(f"{sweeplib.size_label(d)} {pl}" for pl, d in chosen.items())
                         + ". No single default follows from this sweep: measure with the "
                           "placement the primary and its replicas will have.")
        elif chosen and len(chosen) == len(defaults):
            lines.append(f"The knee is the same under every placement: "
                         f"{sweeplib.size_label(next(iter(chosen.values())))}.")
        else:
            lines.append("Not every placement gave a default (see above): no default across them.")
    return "\n".join(lines) + "\n"


def proto_sections(rows, tolerance, micro=None):
    """Per protocol: the PR #817 table and its knee. Returns ({proto: (knee, edge)}, {proto:
    sweeplib.answer}, lines)."""
    picks, answers, lines = {}, {}, []
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
        v = sweeplib.decide_knee(rs, tolerance)
        answers[proto] = a = sweeplib.answer(rs, tolerance, v, micro, model)
        if a["size"] is not None:
            lines += ["", f"Statement: {sweeplib.size_label(a['size'])} ({a['kind']}; "
                          f"{sweeplib.ANSWER_KINDS[a['kind']]}). The one verdict per protocol: "
                          "--repeat auto stops once each is decided, and scripts/repeatability "
                          "counts them across sweeps."]
        k, edge = v["knee"], v["edge"]
        lowest = (f"Lowest total CPU per GiB: {sweeplib.total_cpu_per_gib(best):.3f} s at "
                  f"{sweeplib.size_label(best['buf'])}.")
        if edge:
            picks[proto] = (k, edge)
            lines += ["", f"{lowest} **No knee: {edge}.**", ""]
            continue
        sure, why = v["picked"], v["words"]
        k["reason"] = reason_of(k, best)
        if v["picked"] and not v["sure"]:
            k["reason"] = f"the smallest size shown within {tolerance:.0%}"
        by_model, model_words = sweeplib.model_decides(model, rs, k, best, tolerance)
        if not sure and by_model:
            sure, k["reason"] = True, "by the model"
            why = f"{model_words}; the runs alone: {why}"
        elif k["reason"] == "by measurement":
            why += f"; {model_words}"
        picks[proto] = (k, None if sure else f"the knee is inside the noise ({why})")
        label = sweeplib.size_label(k["buf"])
        if sweeplib.total_cpu_per_gib(k) > sweeplib.total_cpu_per_gib(best) * (1 + tolerance):
            # From edge_of_range: the largest size's lead over this one is inside the noise.
            lines += ["", f"{lowest} It cannot be told from {label} "
                          f"({sweeplib.total_cpu_per_gib(k):.3f} s/GiB), so the knee is inside "
                          f"the range{', ' + k['reason'] + ':' if sure else ', but **no knee with confidence**:'} "
                          f"{why}.", ""]
            continue
        if sure:
            lines += ["", f"{lowest} **Knee: {label}, {k['reason']}** ({why}) — the "
                          f"smallest buffer within {tolerance:.0%} of it "
                          f"({sweeplib.total_cpu_per_gib(k):.3f} s/GiB).", ""]
        else:
            lines += ["", f"{lowest} The smallest buffer within {tolerance:.0%} of it is {label} "
                          f"({sweeplib.total_cpu_per_gib(k):.3f} s/GiB), but **no knee with "
                          f"confidence**: {why}.", ""]
    return picks, answers, lines


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
                  + ". The knee below pools them; where the two differ by more than the "
                    "tolerance, its interval carries that spread."]
    return lines


def reason_of(k, best):
    """What decided a knee: the mechanism (it is the smallest of sizes that are the same work,
    and they hold the lowest cost) or the measurement (its runs against the others')."""
    if k.get("members") and k is best:
        return "by mechanism"
    return "by measurement"


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
            + ", ".join(parts) + f"; the knee is judged on {judged} (--cost).")


def one_connection_default(picks, rows, answers=None):
    """The one-connection default (or None) and the lines that say it, bounded by what was
    measured; with no default, what this sweep's statements were (pick_until_decided)."""
    if not picks:
        return None, ["- One connection: no single-connection cells."]
    at_edge = {p: e for p, (_, e) in picks.items() if e}
    if at_edge:
        return None, ["- **One connection: no default from this sweep** — "
                      + "; ".join(f"{p.upper()}: {e}" for p, e in sorted(at_edge.items())) + "."
                      + pick_until_decided(answers or {})]
    one = max(k["buf"] for k, _ in picks.values())
    largest = max(r["buf"] for r in rows if r["conns"] == 1 and r["group"] is None)
    return one, [f"- **One connection: {sweeplib.size_label(one)}** — the largest knee across "
                 + ", ".join(f"{p.upper()} ({sweeplib.size_label(k['buf'])}, {k.get('reason', 'at the edge')})"
                             for p, (k, _) in sorted(picks.items()))
                 + f": below it CPU per GiB climbs; above it, up to the largest size tried "
                   f"({sweeplib.size_label(largest)}), nothing is gained."]


def pick_until_decided(answers):
    """With no default, what one sweep can say: per protocol the size its statement names
    (sweeplib.answer), and that none of them is a design default. The sizes the runs cannot part
    are not parted here by a tie-break (the fewest calls favours the largest size, whatever the
    runs say: issue #56); the design rule (docs/design-rule-v2.md, scripts/design-answer) weighs
    them with memory and client p99 over several sweeps, the burden on the larger size."""
    named = {p: a for p, a in answers.items() if a["size"] is not None}
    if not named or len(named) < len(answers):
        return ""
    return (" This sweep's statements: "
            + ", ".join(f"{p.upper()} {sweeplib.size_label(a['size'])} ({a['kind']})"
                        for p, a in sorted(named.items()))
            + "; none is a design default: scripts/design-answer weighs the sizes one sweep "
              "cannot part with memory and p99, over several sweeps (docs/design-rule-v2.md).")


def many_connections(rows, tolerance):
    many = [r for r in rows if r["group"] is not None]
    if many:
        # One engine's cells (the verdict's cells are keyed by protocol, N and size).
        verdicts = fanoutlib.conns_verdicts(
            [r for r in rows if r["engine"] == many[0]["engine"]], tolerance)
        return (["- Many connections: " + fanoutlib.recommendation(v) for v in verdicts]
                + ["", "## Many connections", "", sweeplib.conns_table(rows)]
                + [f"- {fanoutlib.answer_text(v)}" for v in verdicts] + [""])
    return ["- Many connections: this sweep has no multi-connection or adaptive cells, so "
            "it cannot say; run scripts/conns-scenario.", ""]


def fanout_report(doc, tolerance):
    verdicts = [fanoutlib.verdict(doc["cells"], doc["replicas"], doc["bufs"], s, p, tolerance,
                                  control=doc.get("control"))
                for s in doc["shapes"] for p in doc["protos"]]
    ctx = doc["context"]
    lines = [f"# Chunk-size recommendation for one writer and N replicas", "",
             f"- scenario: `{doc['command']}` ({doc['rounds']} interleaved rounds, "
             f"{doc['bytes_per_replica']} per replica, where: {doc.get('where', 'loopback')})",
             f"- host: {ctx['cpu_model']}, {ctx['cpus_online']} CPUs, {ctx['kernel']}",
             f"- criterion: {doc['criterion']}; tolerance {tolerance * 100:g}%",
             "- what this is: one study's knees by its own tolerance, per study, not a design "
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
    ap.add_argument("sweep_dir",
                    help="a sweep's folder (results/NAME), a fan-out scenario's or a fleet's")
    ap.add_argument("--tolerance", type=float, default=0.05,
                    help="how far above the cheapest a size may cost and still be the knee (0.05:"
                         " 5%%)")
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
                    help="what the knee is judged on: the two processes' CPU per GiB (default) "
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
        text, pairs = fleetlib.report(a.sweep_dir, a.tolerance, a.cost)
        for p in pairs:  # each swept pair's own tables and knees, beside its results
            own = (fanout_report(p["fanout"], a.tolerance) if p["fanout"] else
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
            f.write(fanout_report(json.load(open(fanout)), a.tolerance))
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
