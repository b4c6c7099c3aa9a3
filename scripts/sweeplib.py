"""Reading a sweep directory (results/<name>/) written by scripts/sweep: shared by plot and
recommend, which know nothing of iobench's internals beyond its JSON."""
import itertools
import json
import math
import os
import random
import sys

import iobenchlib
from iobenchlib import GiB, median  # noqa: F401 (re-exported to plot and recommend)


def load(sweep_dir, prog="sweeplib"):
    """Returns (manifest, rows): one row per finished cell with medians and min/max per side.
    A directory that is not a sweep stops the script with one line."""
    path = os.path.join(sweep_dir, "manifest.json")
    try:
        manifest = json.load(open(path))
    except FileNotFoundError:
        what = "no such directory" if not os.path.isdir(sweep_dir) else "no manifest.json in it"
        sys.exit(f"{prog}: error: '{sweep_dir}' is not a sweep ({what}; scripts/sweep NAME "
                 "writes results/NAME)")
    except (OSError, ValueError) as e:
        sys.exit(f"{prog}: error: cannot read {path}: {e}")
    rows = []
    for cell in manifest["cells"]:
        if cell.get("status") != "ok":
            continue
        doc = json.load(open(os.path.join(sweep_dir, cell["file"])))
        for result in doc["results"]:
            row = {"proto": cell["proto"], "engine": cell["engine"], "conns": cell["conns"],
                   "buf": result["send_buf_bytes"], "label": result["label"],
                   "context": doc["context"], "runs": len(result["runs"]),
                   "placement": placement(cell, doc)}
            for side in ("sender", "receiver"):
                summary = result["summary"][side]
                row[side] = {k: summary[k] for k in summary}
            row["group"] = group_summary(result)
            # Each measured run's total CPU per GiB (sender + receiver of that run): what a
            # comparison of two cells resamples.
            row["total_cpu_runs"] = [
                r["sender"]["cpu_s_per_gib"] + r["receiver"]["cpu_s_per_gib"]
                for r in result["runs"] if r.get("sender") and r.get("receiver")
                and not r.get("partial")]
            rows.append(row)
    rows.sort(key=lambda r: (r["proto"], r["engine"], r["conns"], r["label"] == "adaptive",
                             r["buf"]))
    return manifest, rows


# A side's summary figures (iobench's SideSummary) read from one run's side in the JSON.
RUN_FIGURES = {
    "bytes": lambda s: s["bytes"],
    "wall_s": lambda s: s["duration_ns"] / 1e9,
    **{k: (lambda s, k=k: s[k]) for k in (
        "throughput_gbps", "throughput_mib_s", "cpu_user_s", "cpu_sys_s", "cpu_s",
        "cpu_s_per_gib", "io_calls", "bytes_per_call")},
    "syscalls": lambda s: s["syscalls"]["data_direction"],
    "syscalls_total": lambda s: s["syscalls"]["total"],
    "syscalls_per_mib": lambda s: s["syscalls"]["per_mib"],
    "bytes_per_syscall": lambda s: s["syscalls"]["bytes_per_syscall"],
    "records": lambda s: (s.get("tls") or {}).get(
        "records_out" if s["role"] == "sender" else "records_in", 0),
}
# Taken from the counting run when there is one (--syscalls auto), as iobench does.
COUNTED = ("syscalls", "syscalls_total", "syscalls_per_mib", "bytes_per_syscall")


def stat(values):
    """median/min/max; zeros where a figure has no runs (a partial cell)."""
    return iobenchlib.stat(values) or {"median": 0.0, "min": 0.0, "max": 0.0}


def summarize(result, side):
    """A side's summary over a result's measured runs: median, min and max of each figure."""
    sides = [r[side] for r in result["runs"] if r.get(side)]
    out = {k: stat([f(s) for s in sides]) for k, f in RUN_FIGURES.items()}
    counting = (result.get("counting_run") or {}).get(side)
    if counting:
        out.update({k: stat([RUN_FIGURES[k](counting)]) for k in COUNTED})
    return out


def merge_rounds(docs):
    """One cell's JSON from its rounds (scripts/sweep --order round-robin|shuffle: one iobench
    run per cell per round): the first round's document holding every round's measured runs,
    numbered in round order, each marked with its round, and the summaries recomputed over
    them; the syscall figures come from the first round's counting run."""
    merged = json.loads(json.dumps(docs[0]))
    for i, result in enumerate(merged["results"]):
        runs = []
        for rnd, doc in enumerate(docs, 1):
            for run in doc["results"][i]["runs"]:
                runs.append(dict(run, run=len(runs), round=rnd))
        result["runs"] = runs
        result["summary"] = {side: summarize(result, side) for side in ("sender", "receiver")}
    merged["rounds"] = len(docs)
    return merged


def placement(cell, doc):
    """How a cell's two sides were placed on CPUs: 'unpinned', '--cpus 0', '--cpus 0,1', or
    'unrecorded' for a run from before iobench recorded it."""
    opts = doc.get("options", {})
    if "sender_cpu" not in opts:
        return "unrecorded"
    s, r = opts["sender_cpu"], opts["receiver_cpu"]  # null (or -1): unpinned
    if (s is None or s < 0) and (r is None or r < 0):
        return "unpinned"
    return f"--cpus {s}" if s == r else f"--cpus {s},{r}"


def group_summary(result):
    """Medians over runs of a multi-connection result's memory and fairness, or None."""
    runs = [r["group"] for r in result["runs"] if "group" in r]
    if not runs:
        return None
    peak = {side: median([g[side].get("peak_buffer_bytes", 0) for g in runs
                          if g[side].get("available")]) for side in ("sender", "receiver")}
    return {"peak_buffer_bytes": peak,
            "slowest_conn_gbps": median([g["fairness"]["conn_gbps_min"] for g in runs]),
            "median_conn_gbps": median([g["fairness"]["conn_gbps_median"] for g in runs]),
            "aggregate_gbps": median([g["fairness"]["aggregate_gbps"] for g in runs]),
            "policy": runs[0]["sender"].get("policy", "")}


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
    return row["sender"]["cpu_s_per_gib"][stat] + row["receiver"]["cpu_s_per_gib"][stat]


def knee(rows, tolerance):
    """The smallest buffer whose total CPU per GiB is within `tolerance` of the lowest."""
    best = min(total_cpu_per_gib(r) for r in rows)
    for r in sorted(rows, key=lambda r: r["buf"]):
        if total_cpu_per_gib(r) <= best * (1 + tolerance):
            return r
    return None


def size_label(n):
    if n == 0:
        return "0"
    for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
        if n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


# --- deciding between two cells: the statistics iobench compare uses (src/util/stats.cc) ------

SEED = 0x10BE7C5  # fixed: the same runs give the same interval


def ratio_ci(base, new, level=0.95, draws=4000):
    """Percentile bootstrap interval of median(new) / median(base): (low, high)."""
    if not base or not new or median(base) == 0:
        return (0.0, 0.0)
    rng = random.Random(SEED)
    ratios = []
    for _ in range(draws):
        b = median([rng.choice(base) for _ in base])
        if b:
            ratios.append(median([rng.choice(new) for _ in new]) / b)
    ratios.sort()

    def pct(q):
        at = q * (len(ratios) - 1)
        lo = int(at)
        hi = min(lo + 1, len(ratios) - 1)
        return ratios[lo] + (ratios[hi] - ratios[lo]) * (at - lo)
    return (pct((1 - level) / 2), pct(1 - (1 - level) / 2))


def _u_counts(m, n):
    """Arrangements of m + n distinct values whose U statistic (pairs where the first set's value
    is the larger) is u, for u = 0..m*n."""
    f = [[1] + [0] * (m * n) for _ in range(n + 1)]
    for _ in range(m):
        g = [[0] * (m * n + 1) for _ in range(n + 1)]
        for j in range(n + 1):
            for u in range(m * n + 1):
                if u >= j:
                    g[j][u] += f[j][u - j]
                if j:
                    g[j][u] += g[j - 1][u]
        f = g
    return f[n]


def mann_whitney_p(a, b):
    """Two-sided Mann-Whitney U p-value: exact without ties up to 30 values a side, else the
    normal approximation with tie and continuity corrections."""
    if not a or not b:
        return 1.0
    u = sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in a for y in b)
    values = sorted(a + b)
    ties = len(set(values)) < len(values)
    m, n = len(a), len(b)
    if not ties and m <= 30 and n <= 30:
        counts = _u_counts(m, n)
        total = sum(counts)
        below = sum(c for k, c in enumerate(counts) if k <= u)
        above = sum(c for k, c in enumerate(counts) if k >= u)
        return min(1.0, 2 * min(below, above) / total)
    tie_term = sum(t ** 3 - t for t in (len(list(g)) for _, g in itertools.groupby(values)))
    var = m * n / 12 * ((m + n + 1) - tie_term / ((m + n) * (m + n - 1)))
    if var <= 0:
        return 1.0
    z = max(abs(u - m * n / 2) - 0.5, 0) / math.sqrt(var)
    return min(1.0, math.erfc(z / math.sqrt(2)))
