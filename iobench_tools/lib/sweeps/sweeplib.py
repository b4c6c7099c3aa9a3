"""Reading a sweep directory (results/<name>/) written by scripts/sweep: shared by plot and
recommend, which know nothing of iobench's internals beyond its JSON."""
import json
import math
import os
import sys
from dataclasses import asdict, dataclass, fields

from iobench_tools.lib.kernel import hostid
from iobench_tools.lib.kernel import iobenchjson
from iobench_tools.lib.kernel import iobenchlib
from iobench_tools.lib.judging import costmodel
from iobench_tools.lib.judging import samework
from iobench_tools.lib.kernel.iobenchlib import GiB, median, size_label  # noqa: F401 (re-exported to plot, recommend and the scenarios)
# Re-exported: recommend, fanoutlib and the reports call them through sweeplib.
from iobench_tools.lib.judging.statslib import (MIN_PAIRED_ROUNDS, SEED, compare, mann_whitney_p,  # noqa: F401
                      median_ci, paired_ratios, ratio_ci, versus, wilcoxon_p)


COSTS = ("processes", "host")


@dataclass(frozen=True)
class SweepCell:
    """One cell of a sweep: what it runs (protocol, engine, connections, buffer size, and the
    placement: iobench's --cpus, "" unpinned) and the file its JSON is kept in; an A/A twin
    names the cell it repeats (`control_of`). The manifest keeps it as a record beside the
    cell's status and rounds: record() writes one, of() reads one back (an older sweep's, which
    named no placement, too)."""
    id: str
    proto: str
    engine: str
    conns: int
    buf: str
    cpus: str = ""
    file: str = ""
    control_of: str = None

    @classmethod
    def of(cls, record):
        return cls(**{f.name: record[f.name] for f in fields(cls) if f.name in record})

    def record(self):
        return {k: v for k, v in asdict(self).items() if k != "control_of" or v is not None}


def load(sweep_dir, prog="sweeplib", cost="processes"):
    """Returns (manifest, rows): one row per finished cell with medians and min/max per side.
    A directory that is not a sweep stops the script with one line. `cost` is what the knee is
    judged on: the two processes' CPU (sender + receiver) or the host's busy time over the data
    phase (all CPUs: softirqs and ksoftirqd wherever they land, other processes too)."""
    path = os.path.join(sweep_dir, "manifest.json")
    try:
        manifest = json.load(open(path))
    except FileNotFoundError:
        what = "no such directory" if not os.path.isdir(sweep_dir) else "no manifest.json in it"
        sys.exit(f"{prog}: error: '{sweep_dir}' is not a sweep ({what}; scripts/sweep NAME "
                 "writes results/NAME)")
    except (OSError, ValueError) as e:
        sys.exit(f"{prog}: error: cannot read {path}: {e}")
    two_hosts = manifest.get("where") not in ("loopback", "netns", None)
    rows = []
    hosts = set()
    for record in manifest["cells"]:
        if record.get("status") != "ok":
            continue
        cell = SweepCell.of(record)
        doc = json.load(open(os.path.join(sweep_dir, cell.file)))
        hosts.add(hostid.host_key(hostid.host_of_context(doc.get("context") or {})))
        rows += rows_of(cell, doc, two_hosts)
    # The hosts its cells state they ran on (older sweeps' manifests do not name theirs).
    manifest["hosts_seen"] = sorted(hosts)
    # The A/A control's twins (scripts/sweep --control) are no size of their own: set beside
    # the cell they repeat, they are the sweep's noise floor (noisefloor.py), and leave the rows.
    manifest["control_pairs"] = control_pairs(rows)
    for row in rows:
        if cost == "host" and not row["host_runs"]:
            sys.exit(f"{prog}: error: cell {row['proto']} {row['label']} cannot be judged on the "
                     f"host's busy time: {row['host_missing']}; use --cost processes")
        row["cost"] = cost
        row["total_cpu_runs"] = row["host_runs" if cost == "host" else "process_runs"]
    rows = [r for r in rows if not r.get("control_of")]
    rows.sort(key=lambda r: (r["proto"], r["engine"], r["conns"], r["label"] == "adaptive",
                             r["buf"]))
    return manifest, rows


def control_pairs(rows):
    """(cell, twin) for each A/A control's twin among the rows (scripts/sweep --control)."""
    by_id = {(r["cell_id"], r["label"]): r for r in rows}
    return [(by_id[(r["control_of"], r["label"])], r) for r in rows
            if r.get("control_of") and (r["control_of"], r["label"]) in by_id]


def rows_of(cell, doc, two_hosts=False):
    """A cell's (a SweepCell's) rows (one per result of its JSON): medians and min/max per side, and each
    measured run's cost per GiB two ways: the two processes' CPU (sender + receiver of that run)
    and the host's busy time (the sender's window, which holds the receiver's; both hosts' sum
    when the sides ran on two) — what a comparison of two cells resamples."""
    rows = []
    report = iobenchjson.read(doc)
    for result in report.results:
        row = {"proto": cell.proto, "engine": cell.engine, "conns": cell.conns,
               "buf": result.send_buf_bytes, "label": result.label,
               "context": report.context, "runs": len(result.runs),
               "placement": placement(report), "cell_id": cell.id,
               "control_of": cell.control_of}
        for side in iobenchjson.SIDES:
            row[side] = result.summary(side)
            # The share of its data phase the side's CPU was busy (iobench's regime line).
            busy = [r.side(side).busy for r in result.runs if r.side(side) and
                    r.side(side).duration_ns]
            if busy:
                row[side]["busy"] = stat(busy)
        row["group"] = group_summary(result)
        runs = [r for r in result.runs if r.both]
        row["process_runs"] = [r.sender.cpu_s_per_gib + r.receiver.cpu_s_per_gib for r in runs]
        # Each of those runs' sender busy share (None without the figures): its regime.
        row["busy_runs"] = [r.sender.busy for r in runs]
        # Both sides' voluntary context switches per GiB moved (each a sleep and a wake-up):
        # what a sender or receiver that waits pays per wait, beside the calls it makes.
        switches = [(r.sender.voluntary_ctxsw + r.receiver.voluntary_ctxsw)
                    / (r.sender.bytes / GiB) for r in runs
                    if r.sender.bytes and r.sender.voluntary_ctxsw is not None
                    and r.receiver.voluntary_ctxsw is not None]
        row["switches_per_gib"] = median(switches) if switches else None
        host = [host_per_gib(r, two_hosts) for r in runs]
        missing = [x for x in host if isinstance(x, str)]
        row["host_runs"] = [] if missing or not host else host
        row["host_missing"] = (f"{len(missing)} of {len(host)} runs {missing[0]}" if missing
                               else "" if host else "no measured runs")
        row["total_cpu_runs"] = row["process_runs"]
        # The round each run was measured in (interleaved sweeps): two cells' runs of one round
        # ran back to back and share the host's drift, so they are compared round by round.
        rounds = [r.round for r in runs]
        row["rounds"] = rounds if rounds and None not in rounds and \
            len(set(rounds)) == len(rounds) else None
        rows.append(row)
    return rows


# /proc/stat counts idle time in 10 ms ticks: a data phase of 100 ticks is judged to ±2%.
PROC_STAT_MIN_WALL_S = 1.0


def host_per_gib(run, two_hosts):
    """A run's host busy seconds per GiB moved, or the reason it has none (a string): a side
    without the figure, a window too short for the clock that measured it, or a busy time of
    zero (idle periods begun before the window outweighed it)."""
    sides = [run.sender, run.receiver] if two_hosts else [run.sender]
    if any(s.host_busy.source == "none" for s in sides):
        return "have no host_busy figures (an iobench from before they were measured)"
    short = [s.wall_s for s in sides if s.host_busy.source == "proc_stat"
             and s.wall_s < PROC_STAT_MIN_WALL_S]
    if short:
        return (f"measured it from /proc/stat's 10 ms ticks over a data phase of "
                f"{short[0]:.3f} s (under {PROC_STAT_MIN_WALL_S:.0f} s: run more --bytes)")
    if any(s.host_busy.busy_ns <= 0 for s in sides) or not run.sender.bytes:
        return "measured a busy time of 0 (a data phase too short: run more --bytes)"
    return sum(s.host_busy.busy_ns for s in sides) / 1e9 / (run.sender.bytes / GiB)


stat = iobenchjson.stat_or_zeros  # median/min/max; zeros for a figure with no runs


def placement(report):
    """How a cell's two sides were placed on CPUs: 'unpinned', '--cpus 0', '--cpus 0,1', or
    'unrecorded' for a run from before iobench recorded it."""
    if not report.placement_recorded:
        return "unrecorded"
    s, r = report.sender_cpu, report.receiver_cpu  # null (or -1): unpinned
    if (s is None or s < 0) and (r is None or r < 0):
        return "unpinned"
    return f"--cpus {s}" if s == r else f"--cpus {s},{r}"


def group_summary(result):
    """Medians over runs of a multi-connection result's memory and fairness, or None."""
    groups = [r.group for r in result.runs if r.group is not None]
    if not groups:
        return None
    peak = {side: median([getattr(g, side).peak_buffer_bytes for g in groups
                          if getattr(g, side).available]) for side in iobenchjson.SIDES}
    return {"peak_buffer_bytes": peak,
            "slowest_conn_gbps": median([g.fairness["conn_gbps_min"] for g in groups]),
            "median_conn_gbps": median([g.fairness["conn_gbps_median"] for g in groups]),
            "aggregate_gbps": median([g.fairness["aggregate_gbps"] for g in groups]),
            "policy": groups[0].sender.policy or ""}


def syscalls_per_gib(row, side):
    s = row[side]
    return s["syscalls_per_mib"]["median"] * 1024


def conns_table(rows):
    """Markdown table of the multi-connection cells: per proto/engine, conns x buffer policy."""
    lines = ["| proto | conns | buffer | CPU s/GiB send+recv | syscalls/GiB send / recv | "
             "peak buffer memory send / recv | slowest conn Gbit/s | aggregate Gbit/s |",
             "|---|---:|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        g = r["group"]
        if g is None and r["conns"] > 1:
            continue
        peak = g["peak_buffer_bytes"] if g else {"sender": r["buf"], "receiver": r["buf"]}
        slow = g["slowest_conn_gbps"] if g else r["receiver"]["throughput_gbps"]["median"]
        agg = g["aggregate_gbps"] if g else r["receiver"]["throughput_gbps"]["median"]
        label = g["policy"] if g and r["label"] == "adaptive" else r["label"]
        lines.append(
            f"| {r['proto']} | {r['conns']} | {label} | {total_cpu_per_gib(r):.3f} | "
            f"{syscalls_per_gib(r, 'sender'):.0f} / {syscalls_per_gib(r, 'receiver'):.0f} | "
            f"{size_label(int(peak['sender']))} / {size_label(int(peak['receiver']))} | "
            f"{slow:.2f} | {agg:.2f} |")
    return "\n".join(lines) + "\n"


def total_cpu_per_gib(row, stat="median"):
    """The cost a knee is judged on, per GiB: the statistic of the runs' costs (each run's
    sender + receiver CPU, or with --cost host the host's busy time) — the runs the intervals
    resample, so the knee and its confidence read the same numbers; a row without runs (an
    old summary) the sum of the two sides' medians."""
    if row.get("total_cpu_runs"):
        return iobenchlib.stat(row["total_cpu_runs"])[stat]
    return row["sender"]["cpu_s_per_gib"][stat] + row["receiver"]["cpu_s_per_gib"][stat]


def knee(rows, tolerance):
    """The smallest buffer whose total CPU per GiB is within `tolerance` of the lowest."""
    best = min(total_cpu_per_gib(r) for r in rows)
    for r in sorted(rows, key=lambda r: r["buf"]):
        if total_cpu_per_gib(r) <= best * (1 + tolerance):
            return r
    return None


# --- the knee and how sure it is: what recommend states and sweep --repeat auto waits for ---

def edge_of_range(rs, k, tolerance):
    """Why a knee cannot be a default, and the knee: one size only; or the knee at the largest
    size tried while the next size down is clearly worse (its 95% interval against the largest
    lies above 1 + tolerance): then larger sizes may be better still. A next size the runs cannot
    tell from the largest (TLS above 16K writes the same 16K records) is no edge: the knee is
    inside the range, and decide_knee judges it. Returns (why or None, knee)."""
    rows = sorted(rs, key=lambda r: r["buf"])
    if len(rows) < 2:
        return (f"only {size_label(rows[0]['buf'])} was measured: there is nothing to "
                "compare"), k
    if k["buf"] != rows[-1]["buf"]:
        return None, k
    top, below = rows[-1], rows[-2]
    if len(top.get("members", ())) > 1:
        return None, k  # larger sizes were measured: the same work as this one (samework)
    _, _, (low, high), _, _ = compare(top, below)
    if low > 1 + tolerance or not below["total_cpu_runs"]:
        return (f"the lowest CPU per GiB is at the largest size tried "
                f"({size_label(top['buf'])}), and {size_label(below['buf'])} "
                f"is clearly above it ({low:.3f}..{high:.3f}x); sweep larger sizes"), k
    return None, below


def runs_for(n, half_width, target):
    """Runs at which an interval of this half-width at n runs shrinks to `target` (half-widths
    fall as 1/sqrt(runs))."""
    return math.ceil(n * (half_width / target) ** 2)


def more_runs(n, half_width, distance):
    """How many runs per cell beyond n an interval of this half-width needs to shrink to
    `distance` (runs_for)."""
    if distance <= 0:
        return None
    return max(1, runs_for(n, half_width, distance) - n)


def decide_knee(rs, tolerance):
    """The knee of one protocol's rows (same_work_rows), with both sides of the claim bounded:
    the smallest size shown within the tolerance of every other size (its ratio's 95% interval
    against each ends at or below 1 + tolerance: so within it of the true lowest, whichever
    size that is, not of the lowest median), and every smaller size shown above it by more than
    the tolerance. The one verdict recommend states and --repeat auto waits for (all_decided).

    Returns {"knee": the row picked, "best": the lowest median, "edge": why there is no knee
    (edge_of_range) or None, "sure": both sides shown, "picked": the knee is shown within (sure,
    or smaller sizes the runs cannot tell from it: it is picked over them, the same way every
    run), "words", "more": runs per cell that would likely decide (None: sure, or more runs will
    not move it), "apart": those smaller sizes, "not_parted": when no size is shown within, the
    sizes the runs cannot tell from the lowest (none of them is named: issue #56's tie-break by
    the fewest calls favoured the largest whatever the runs said)}."""
    best = min(rs, key=total_cpu_per_gib)
    edge, k = edge_of_range(rs, knee(rs, tolerance), tolerance)
    verdict = {"knee": k, "best": best, "edge": edge, "sure": False, "picked": False,
               "words": edge or "", "more": None, "apart": [], "not_parted": []}
    if edge:
        return verdict
    n = min(len(r["total_cpu_runs"]) for r in rs)
    if n < 3:
        return dict(verdict, words=f"{n} run(s) per cell cannot say how sure a knee is; run "
                    "the sweep with --repeat 5 or more", more=5 - n)
    bound = 1 + tolerance
    rows = sorted(rs, key=lambda r: r["buf"])
    # Each comparison is a bootstrap: made once, when first asked (the scan below stops at a
    # size's first interval past the bound, and the smallest size shown within ends it).
    made = {}

    def vs(o, r):
        if (o["buf"], r["buf"]) not in made:
            made[(o["buf"], r["buf"])] = compare(o, r)
        return made[(o["buf"], r["buf"])]

    def against(r):
        """r against every other size: (other, ratio r/other, half-width, (low, high), how)."""
        return [(o, *_pick(vs(o, r))) for o in rows if o is not r]

    within = next((r for r in rows if all(vs(o, r)[2][1] <= bound for o in rows if o is not r)),
                  None)
    words, needed, hows = [], [], set()
    if within is not None:
        k = within
        worst = max(against(k), key=lambda c: c[3][1])
        words.append(f"{size_label(k['buf'])} within {tolerance:.0%} of every size (its 95% "
                     f"intervals end by {100 * (worst[3][1] - 1):+.1f}%, against "
                     f"{size_label(worst[0]['buf'])})")
    else:
        # No size is shown within: the knee of the medians, and how far it is from being shown.
        worst = max(against(k), key=lambda c: c[3][1])
        _, ratio, hw, (low, high), how = worst
        hows.add(how)
        words.append(f"{size_label(k['buf'])} is {100 * (ratio - 1):+.1f}% ± {100 * hw:.1f}% "
                     f"against {size_label(worst[0]['buf'])} [{100 * (low - 1):+.1f}%.."
                     f"{100 * (high - 1):+.1f}%]: within {tolerance:.0%} of every size is not shown")
        needed.append(more_runs(n, hw, abs(ratio - bound)))
    apart = []
    for s in [r for r in rows if r["buf"] < k["buf"]][::-1]:
        ratio, hw, (low, high), _, how = vs(k, s)
        hows.add(how)
        if low > bound:
            if not apart and s is rows[rows.index(k) - 1]:
                # The bootstrap interval of a ratio is not symmetric: its ends, beside the ±.
                words.append(f"{size_label(s['buf'])} is {100 * (ratio - 1):.1f}% ± {100 * hw:.1f}% "
                             f"above {size_label(k['buf'])} [{100 * (low - 1):+.1f}%.."
                             f"{100 * (high - 1):+.1f}%]")
            continue
        apart.append(s)
        words.append(f"{size_label(s['buf'])} is not shown above {size_label(k['buf'])} by more "
                     f"than {tolerance:.0%} ({100 * (ratio - 1):+.1f}% ± {100 * hw:.1f}% "
                     f"[{100 * (low - 1):+.1f}%..{100 * (high - 1):+.1f}%])")
        needed.append(more_runs(n, hw, abs(ratio - bound)))
    sure = within is not None and not apart
    not_parted = []
    if within is None:
        # The sizes not shown above the lowest by more than the tolerance cannot be told apart
        # by these runs, and none of them is named: one sweep's statement stops there.
        not_parted = [r for r in rows if r is best or vs(best, r)[2][0] <= bound]
        if len(not_parted) > 1:
            words.append(f"{_and(size_label(r['buf']) for r in not_parted)} cannot be told apart "
                         f"at {tolerance:.0%}: these runs name none of them")
    if within is not None and apart:
        words.append(f"{' and '.join(size_label(s['buf']) for s in apart[::-1])} and "
                     f"{size_label(k['buf'])} cannot be told apart at {tolerance:.0%}: "
                     f"{size_label(k['buf'])} is picked, the smallest size shown within")
    more = [x for x in needed if x is not None]
    if not sure:
        if not more:
            tail = ": it sits on the tolerance, more runs will not move it off"
        elif max(more) > 100:
            tail = (f"; more than 100 more runs per cell would be needed ({max(more)}): the "
                    f"cells are too noisy, pin the sides (--cpus) or run longer (--bytes)")
        else:
            tail = (f"; about {max(more)} more run{'s' if max(more) > 1 else ''} per cell "
                    f"would tell")
        words.append(f"the {tolerance:.0%} tolerance lies inside that noise{tail}")
    if hows:
        words.append(", ".join(sorted(hows)))
    return dict(verdict, knee=k, sure=sure, picked=within is not None, words="; ".join(words),
                more=max(more) if more and not sure else None, apart=apart,
                not_parted=not_parted)


def _and(names):
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _pick(c):
    """compare()'s (ratio, half-width, (low, high), p, how) without the p."""
    ratio, hw, interval, _, how = c
    return ratio, hw, interval, how


# A sender busy this share of its data phase or more never waited (iobench's regime line).
RAN_THROUGHOUT = 0.9


def ran_throughout(row):
    busy = row["sender"].get("busy")
    return busy is not None and busy["median"] >= RAN_THROUGHOUT


def regime_split(row):
    """A size whose runs fell into both regimes, as two distributions: {"ran throughout":
    [costs], "waited": [costs]} of its runs' cost per GiB; None when every run fell into one
    (or the runs carry no busy share)."""
    busy, costs = row.get("busy_runs") or [], row.get("total_cpu_runs") or []
    if len(busy) != len(costs) or None in busy:
        return None
    split = {"ran throughout": [c for b, c in zip(busy, costs) if b >= RAN_THROUGHOUT],
             "waited": [c for b, c in zip(busy, costs) if b < RAN_THROUGHOUT]}
    return split if all(split.values()) else None


def model_for(rs, best, micro=None):
    """The cost model the knee is judged with, and its scope: fitted over the workloads whose
    senders share the lowest cell's regime (ran throughout, or waited at times) when there are
    3 or more of them — the same calls cost differently in the two — else over all; checked
    against iobench-micro's cost per syscall when `micro` is given (costmodel.micro_per_call)."""
    same = [r for r in rs if ran_throughout(r) == ran_throughout(best)]
    runs = lambda r: r.get("total_cpu_runs")  # noqa: E731
    if len(same) >= 3 and len(same) < len(rs):
        regime = "ran throughout" if ran_throughout(best) else "waited at times"
        return (costmodel.fit(same, total_cpu_per_gib, micro, runs),
                f"the sizes whose sender {regime}")
    return costmodel.fit(rs, total_cpu_per_gib, micro, runs), "every size"


def model_decides(model, rs, k, best, tolerance):
    """Does the cost model (model_for's, fitted over these workloads) decide knee K where the
    runs could not: it describes K, the lowest and the size below K to within half the tolerance,
    and predicts the size below more than the tolerance above the lowest and K within it?
    Returns (decided, words: the model's prediction, or why it cannot decide)."""
    if model is None:
        return False, "no cost model (fewer than 3 workloads, or their calls were not counted)"
    if model.get("stands_aside"):
        return False, f"the cost model stands aside ({model['stands_aside']}), so the measurement decides"
    smaller = [r for r in rs if r["buf"] < k["buf"]]
    judged = [k, best] + ([max(smaller, key=lambda r: r["buf"])] if smaller else [])
    worst = max(abs(model["residuals"].get(r["buf"], 1.0)) for r in judged)
    if not costmodel.holds_for(model, judged, tolerance):
        return False, (f"the cost model does not describe these sizes to within "
                       f"{100 * tolerance / 2:.1f}% (residuals up to {100 * worst:.1f}%), so the "
                       "measurement decides")
    low = costmodel.predict(model, best)
    k_ratio = costmodel.predict(model, k) / low
    words = f"the model puts {size_label(k['buf'])} at {100 * (k_ratio - 1):+.1f}%"
    if smaller:
        s_ratio = costmodel.predict(model, judged[2]) / low
        words += f" and {size_label(judged[2]['buf'])} at {100 * (s_ratio - 1):+.1f}%"
        if s_ratio <= 1 + tolerance:
            return False, words + " of the lowest: no step the model can see"
    words += f" of the lowest (residuals within ±{100 * worst:.1f}%)"
    if k_ratio > 1 + tolerance:
        return False, words
    # As firm as the model is at both ends of its cost per call (costmodel.bounded).
    for end in costmodel.bounded(model):
        lo = costmodel.predict(end, best)
        k_end = costmodel.predict(end, k) / lo
        s_end = costmodel.predict(end, judged[2]) / lo if smaller else None
        if k_end > 1 + tolerance or (s_end is not None and s_end <= 1 + tolerance):
            return False, (words + f"; at {1e6 * end['per_call_s']:.2f} µs per {model['call']} "
                           f"(an end of what is known of it) {size_label(k['buf'])} would be "
                           f"{100 * (k_end - 1):+.1f}%"
                           + (f" and {size_label(judged[2]['buf'])} {100 * (s_end - 1):+.1f}%"
                              if s_end is not None else "")
                           + ": the model cannot decide it")
    return True, words


def same_work_rows(rows):
    """One protocol's one-connection rows with the sizes that are the same work as one row
    (samework): what the knee is chosen among."""
    return samework.collapse(rows, size_label)


def one_connection_groups(rows):
    """{(placement, proto): that protocol's one-connection rows, same work collapsed
    (same_work_rows)}: what each knee is chosen among (the A/A twins left out)."""
    groups = {}
    for r in rows:
        if r["conns"] == 1 and r["group"] is None and not r.get("control_of"):
            groups.setdefault((r["placement"], r["proto"]), []).append(r)
    return {k: same_work_rows(v) for k, v in groups.items()}


# What each statement of answer() means, as recommend prints it; the first three are decided.
ANSWER_KINDS = {
    "sure": "decided: the knee within the tolerance of the best and the size below it above, "
            "both shown",
    "model": "decided by the cost model, at both ends of its cost per call",
    "edge": "decided: the lowest at the largest size tried, the next below clearly above",
    "picked": "open: the smallest size shown within, over smaller ones the runs cannot part "
              "from it",
    "not parted": "open: no size shown within; the sizes the runs cannot tell from the "
                  "lowest, none named",
    "noise": "open: nothing shown either way",
}
DECIDED = ("sure", "model", "edge")


def undecided(rows, tolerance, micro=None):
    """The one-connection knees of these rows (per placement and protocol) not yet decided:
    whose statement (answer, the one verdict recommend prints) is not one of DECIDED, and where
    more runs could still move them. [(placement, proto, verdict)]: the verdict's "more" is the
    runs per cell that would likely decide it."""
    open_knees = []
    for (placement, proto), rs in one_connection_groups(rows).items():
        v = decide_knee(rs, tolerance)
        # A pick over smaller sizes it cannot tell apart is no decision yet: more rounds may show
        # a smaller size within (the pick would move down), so they run while they can tell.
        if v["more"] is None or answer(rs, tolerance, v, micro)["kind"] in DECIDED:
            continue
        open_knees.append((placement, proto, v))
    return open_knees


def all_decided(rows, tolerance):
    """Is every one-connection knee of these rows decided (undecided is empty)? What --repeat
    auto stops on."""
    return not undecided(rows, tolerance)


def answer(rs, tolerance, v=None, micro=None, model=None):
    """What one protocol's knee statement comes to (rs: same_work_rows), for reading many sweeps
    side by side: {"size": the size named (None: nothing to compare), "kind"}. Kinds: "sure"
    (both sides shown), "model" (the cost model decides), "picked" (the smallest size shown
    within, over smaller ones the runs cannot part from it), "not parted" (no size shown within,
    several the runs cannot tell from the lowest: size None, none named), "edge" (the lowest at
    the largest size tried, the next below clearly above), "noise" (none of these). `v`: the
    rows' decide_knee and `model` their model_for when the caller has them (a bootstrap each);
    `micro`: model_for's."""
    v = v or decide_knee(rs, tolerance)
    if v["edge"]:
        top = max(rs, key=lambda r: r["buf"])
        return {"size": top["buf"] if len(rs) > 1 else None, "kind": "edge"}
    if v["sure"]:
        return {"size": v["knee"]["buf"], "kind": "sure"}
    model = model or model_for(rs, v["best"], micro)[0]
    if model_decides(model, rs, v["knee"], v["best"], tolerance)[0]:
        return {"size": v["knee"]["buf"], "kind": "model"}
    if v["picked"]:
        return {"size": v["knee"]["buf"], "kind": "picked"}
    if len(v["not_parted"]) > 1:
        return {"size": None, "kind": "not parted"}
    return {"size": v["knee"]["buf"], "kind": "noise"}
