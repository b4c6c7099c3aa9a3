"""The report of rule v2 (docs/design-rule-v2.md): the host and link first, each step of the
sequence with its gains and its harms condition by condition, the agreement that could fail (the
targeted nulls, rounds and sweeps resampled, each sweep left out), as text and as data.
scripts/design-answer --rule 2 writes it."""
import math
import statistics

from iobench_tools.lib.judging import pooling
from iobench_tools.lib.judging import designrule2 as rule
from iobench_tools.lib.kernel.iobenchlib import size_label

WORDS = {"cpu": "CPU per GiB", "memory": "child memory", "p99": "client p99"}


def label(size):
    return size_label(size)


def ratio(p, alpha=rule.ALPHA):
    if p is None:
        return "—"
    lo, hi = rule.bounds(p, alpha)
    return f"x{math.exp(p['log']):.3f} [{math.exp(lo):.3f}..{math.exp(hi):.3f}]"


def cell_name(real_cells, proto, index):
    if index is None:
        return "pooled over the sweeps"
    return real_cells.get(proto, [None] * (index + 1))[index] or f"cell {index}"


def step_lines(steps, real_cells):
    lines = ["| step | gains shown (level) | harms not shown below x1.10 | verdict |",
             "|---|---|---|---|"]
    for s in steps:
        gains = "; ".join(f"{p.upper()} {WORDS[c]} {ratio(pooled, s['alpha'])}"
                          for p, c, pooled, _ in s["gains"]) or "none"
        harms = [f"{p.upper()} {WORDS[c]} ({cell_name(real_cells, p, cell)}) {ratio(pooled)}"
                 for p, c, cell, pooled, _ in s["failed"]]
        harms += [f"{p.upper()} {WORDS[c]}: not measured on this host" for p, c in s["unmeasured"]]
        verdict = f"**{label(s['large'])} replaces {label(s['small'])}**" if s["ok"] else \
            f"{label(s['large'])} does not replace {label(s['small'])}: the sequence stops"
        lines.append(f"| {label(s['small'])} -> {label(s['large'])} | {gains} (each at "
                     f"{s['alpha']:.4f}, {s['tests']} test(s)) | {'; '.join(harms) or 'none'} | "
                     f"{verdict} |")
    return lines


def counts(c):
    total = sum(c.values())
    return ", ".join(f"{label(s)} {n}/{total}" for s, n in sorted(c.items())) or "—"


def agreement_lines(results, sizes):
    lines = ["| answer for | the runs | sweeps resampled | rounds resampled | each sweep left "
             "out | null: with its next smaller | null: with its next larger | its step |",
             "|---|---|---|---|---|---|---|---|"]
    for name, (answer, _, agree) in results.items():
        real = rule.step_is_real(agree, sizes)
        lines.append(
            f"| {name} | **{label(answer)}** | {counts(agree['sweeps'])} | "
            f"{counts(agree['rounds'])} | {', '.join(label(s) for s in agree['left_out'])} | "
            f"{counts(agree['null_below'])} | {counts(agree['null_above'])} | "
            + ("real (fails under its null)" if real else
               "the smallest size: no step" if sizes.index(answer) == 0 else
               "**not shown**: its null still names it") + " |")
    return lines


def idle_control(idle):
    """The idle cells (the client load with no sync: the chunk does no work there) read as a
    sync cell's harm is, by rule v2's own per-cell conditions (designrule2.conditions):
    [(proto, crit, small, large, pooled, upper bound at ALPHA)] for each
    pair of real-server sizes both measured. A sync cell's harm reads as the chunk's only where
    it exceeds what these show."""
    out = []
    for small, large in zip(rule.REAL_SIZES, rule.REAL_SIZES[1:]):
        _, harms = rule.conditions({}, idle, small, large, sorted(idle))
        out += [(proto, crit, small, large, p, rule.bounds(p, rule.ALPHA)[1])
                for proto, crit, _, p in harms]
    return sorted(out, key=lambda row: row[:3])


def spread(real):
    """Each sync cell's per-round sd of the paired log ratio, by protocol, criterion and step
    of the real server's sizes: [(proto, crit, small, large, [sd per cell])], what a power plan
    for those harms needs."""
    out = []
    for proto, crits in sorted(real.items()):
        for crit, cells in sorted(crits.items()):
            for small, large in zip(rule.REAL_SIZES, rule.REAL_SIZES[1:]):
                logs = [pooling.paired_logs(cell, small, large) for cell in cells]
                sds = [statistics.stdev(x) for x in logs if len(x) > 1]
                if sds:
                    out.append((proto, crit, small, large, sds))
    return out


def control_lines(control, spreads=()):
    """The idle control's table and the sync cells' spread: what a harm is read against."""
    if not control and not spreads:
        return []
    lines = ["## The idle control and the spread", ""]
    if control:
        lines += ["The same client load with no sync, where the chunk does no work, read by the "
                  "estimator each sync cell's harm is read by (one-sided bound at "
                  f"{rule.ALPHA}). A sync cell's harm is the chunk's only where it exceeds what "
                  "this shows.", "",
                  "| protocol | criterion | step | ratio [bounds] | below x1.10 |",
                  "|---|---|---|---|---|"]
        lines += [f"| {proto.upper()} | {WORDS[crit]} | {label(small)} -> {label(large)} | "
                  f"{ratio(p)} | {'yes' if upper < rule.LINE else '**no**'} |"
                  for proto, crit, small, large, p, upper in control] + [""]
    if spreads:
        lines += ["The sync cells' spread, the per-round sd of each cell's paired log ratio "
                  "(smallest, median, largest over its cells): "
                  + "; ".join(f"{p.upper()} {WORDS[c]} {label(a)} -> {label(b)} "
                              f"{min(sds):.3f}, {statistics.median(sds):.3f}, {max(sds):.3f}"
                              for p, c, a, b, sds in spreads) + ".", ""]
    return lines


def render(head, results, sizes, real_cells, control=(), spreads=()):
    """head: the report's opening lines (rule, host, link, runs); results: {name: (answer,
    steps, agreement)}; control: idle_control's rows; spreads: spread's."""
    design = results["the design (TCP and TLS)"][0]
    lines = ["# The design's answer by rule v2 (issue #66)", ""] + head + [
        "", f"**The design's chunk on this host: {label(design)}** — "
        + ", ".join(f"{n} {label(a)}" for n, (a, _, _) in results.items()
                    if not n.startswith("the design")) + ". "
        "A larger size replaces the default only when shown cheaper by more than 10% "
        "(gains split by Bonferroni) with every harm shown below x1.10 in every condition; the "
        "sizes are tried smallest first and the sequence stops at the first that fails.", ""]
    for name, (_, steps, _) in results.items():
        lines += [f"## The sequence: {name}", "",
                  "Ratios are the larger size's cost over the smaller's (below 1: cheaper), with "
                  "their one-sided bounds at the level each test was read at.", ""]
        lines += step_lines(steps, real_cells) + [""]
    lines += control_lines(control, spreads)
    lines += ["## Agreement that could fail", "",
              f"{rule.DRAWS} draws each: whole sweeps resampled, rounds resampled within each "
              "sweep, and the answer's costs exchanged in every round with its next smaller "
              "size's (the step is real when that null names a smaller size in at least "
              f"{1 - rule.ALPHA:.0%} of its draws) and with its next larger size's.", ""]
    lines += agreement_lines(results, sizes)
    return "\n".join(lines) + "\n"


def record(results, sizes):
    """The report's verdicts as data (results.json's "v2")."""
    def step(s):
        return {"small": s["small"], "large": s["large"], "ok": s["ok"], "alpha": s["alpha"],
                "gains": [[p, c] for p, c, _, _ in s["gains"]],
                "failed": [[p, c, cell, round(math.exp(u), 4)] for p, c, cell, _, u in s["failed"]],
                "unmeasured": [list(u) for u in s["unmeasured"]]}
    return {name: {"answer": a, "steps": [step(s) for s in steps],
                   "step_is_real": rule.step_is_real(agree, sizes),
                   "agreement": {k: ({str(s): n for s, n in v.items()} if isinstance(v, dict)
                                     else v) for k, v in agree.items()}}
            for name, (a, steps, agree) in results.items()}
