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


def missing_folder(sweep_dir, prog):
    """The line a command reading a results folder stops with when there is none, or None
    (a parser's check_before_run, and load's own)."""
    if os.path.isdir(sweep_dir):
        return None
    return (f"{prog}: error: '{sweep_dir}' is not a sweep (no such directory; scripts/sweep NAME "
            "writes results/NAME)")


def load(sweep_dir, prog="sweeplib", cost="processes"):
    """Returns (manifest, rows): one row per finished cell with medians and min/max per side.
    A directory that is not a sweep stops the script with one line. `cost` is what the statement is
    judged on: the two processes' CPU (sender + receiver) or the host's busy time over the data
    phase (all CPUs: softirqs and ksoftirqd wherever they land, other processes too)."""
    path = os.path.join(sweep_dir, "manifest.json")
    try:
        manifest = json.load(open(path))
    except FileNotFoundError:
        sys.exit(missing_folder(sweep_dir, prog) or
                 f"{prog}: error: '{sweep_dir}' is not a sweep (no manifest.json in it; "
                 "scripts/sweep NAME writes results/NAME)")
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
    """The cost a statement is judged on, per GiB: the statistic of the runs' costs (each run's
    sender + receiver CPU, or with --cost host the host's busy time) — the runs the intervals
    resample, so the statement and its intervals read the same numbers; a row without runs (an
    old summary) the sum of the two sides' medians."""
    if row.get("total_cpu_runs"):
        return iobenchlib.stat(row["total_cpu_runs"])[stat]
    return row["sender"]["cpu_s_per_gib"][stat] + row["receiver"]["cpu_s_per_gib"][stat]


def runs_for(n, half_width, target):
    """Runs at which an interval of this half-width at n runs shrinks to `target` (half-widths
    fall as 1/sqrt(runs))."""
    return math.ceil(n * (half_width / target) ** 2)


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
    """The cost model a page describes, and its scope: fitted over the workloads whose
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


def same_work_rows(rows):
    """One protocol's one-connection rows with the sizes that are the same work as one row
    (samework): what a statement is read among."""
    return samework.collapse(rows, size_label)


def one_connection_groups(rows):
    """{(placement, proto): that protocol's one-connection rows, same work collapsed
    (same_work_rows)}: what each statement is read among (the A/A twins left out)."""
    groups = {}
    for r in rows:
        if r["conns"] == 1 and r["group"] is None and not r.get("control_of"):
            groups.setdefault((r["placement"], r["proto"]), []).append(r)
    return {k: same_work_rows(v) for k, v in groups.items()}
