"""A cost model from counts: one protocol's CPU per GiB (sender + receiver)
fitted over a sweep's workloads as a cost per call and per GiB moved,

    cpu_s_per_gib ~= per_call x calls/GiB + per_gib

where a call is a syscall of either side (TCP), or a TLS record (TLS: its write, its two reads,
its encryption and decryption go together, so records and syscalls cannot be told apart by a
fit)
by least absolute deviations (iteratively reweighted least squares: one cell in another regime
moves the fit little and shows as its own large residual). It describes a sweep (the page
prints it with every residual, and where the residuals are large the cells are in different
regimes: docs/measurement.md); it decides nothing: the statement is rule v2's (studyjudge)."""
import json
import math
import random
import re

from iobench_tools.lib.kernel.iobenchlib import GiB, median, work_counts

# Rounds of reweighting: the fit settles within a few on any sweep's 3..8 points.
IRLS_ROUNDS = 30


def features(row):
    """A row's calls per GiB: TLS records (both ways) when it has any, else syscalls (both
    sides, data direction); None when they were not counted."""
    c = work_counts(row)
    if not c["bytes"] or not c["writes"] or not c["reads"] or c["records_out"] is None:
        return None
    records = (c["records_out"] or 0) + (c["records_in"] or 0)
    return (records or c["writes"] + c["reads"]) * GiB / c["bytes"], bool(records)


def line_fit(points, weights=None):
    """Weighted least squares for y = a + b x over (x, y) points: (a, b), or None when every x
    is the same (no slope to fit)."""
    w = weights or [1.0] * len(points)
    sw = sum(w)
    sx = sum(wi * x for wi, (x, _) in zip(w, points))
    sy = sum(wi * y for wi, (_, y) in zip(w, points))
    sxx = sum(wi * x * x for wi, (x, _) in zip(w, points))
    sxy = sum(wi * x * y for wi, (x, y) in zip(w, points))
    det = sw * sxx - sx * sx
    if abs(det) <= 1e-12 * sw * sxx:
        return None
    b = (sw * sxy - sx * sy) / det
    return (sy - b * sx) / sw, b


def robust_line(xy):
    """Least absolute deviations for y = a + b x (IRLS): (a, b), or None (no slope to fit)."""
    weights, line = None, None
    for _ in range(IRLS_ROUNDS):
        line = line_fit(xy, weights)
        if line is None:
            return None
        per_gib, per_call = line
        floor = 1e-3 * median([y for _, y in xy])
        weights = [1 / max(abs(y - per_call * x - per_gib), floor) for x, y in xy]
    return line


# Bootstrap draws of the fitted cost per call (each workload's runs resampled, its median
# refitted): enough for a 95% interval's ends to settle to a few percent.
PER_CALL_DRAWS = 300


def per_call_interval(rows, xs, runs):
    """The 95% percentile-bootstrap interval of the fitted cost per call, each workload's
    runs (`runs(row)`) resampled; None when a workload has fewer than 3 runs."""
    samples = [runs(r) or [] for r in rows]
    if any(len(s) < 3 for s in samples):
        return None
    rng = random.Random(0x10BE7C5)
    draws = []
    for _ in range(PER_CALL_DRAWS):
        line = robust_line([(x, median([rng.choice(s) for _ in s])) for x, s in zip(xs, samples)])
        if line is not None:
            draws.append(line[1])
    draws.sort()
    return draws[int(0.025 * (len(draws) - 1))], draws[int(0.975 * (len(draws) - 1))]


def fit(rows, cost, micro=None, runs=None):
    """The model over `rows` (one protocol's workloads; `cost(row)` its CPU per GiB), or None
    when the counts are missing or fewer than 3 workloads fit: {"per_call_s", "per_gib_s",
    "call": "TLS record" or "syscall", "residuals": {buf: (measured - predicted) / predicted},
    "workloads", "per_call_ci": the fitted cost per call's 95% interval over `runs(row)` (each
    run's CPU per GiB; None without them), "micro", "stands_aside": why it is no model}.
    `micro`: iobench-micro's cost per syscall on this host (micro_per_call), the physics the
    fit must agree with."""
    pts = [(features(r), cost(r), r["buf"]) for r in rows]
    if len(pts) < 3 or any(f is None for f, _, _ in pts):
        return None
    xy = [(f[0], y) for f, y, _ in pts]
    line = robust_line(xy)
    if line is None:
        return None
    per_gib, per_call = line
    model = {"per_call_s": per_call, "per_gib_s": per_gib, "workloads": len(xy), "points": xy,
             "call": "TLS record" if any(f[1] for f, _, _ in pts) else "syscall",
             "per_call_ci": per_call_interval(rows, [x for x, _ in xy], runs) if runs else None,
             "micro": micro}
    predicted = [(buf, y, predict(model, r)) for (_, y, buf), r in zip(pts, rows)]
    model["residuals"] = {buf: (y - p) / p for buf, y, p in predicted if p > 0}
    model["stands_aside"] = unphysical(model) or disagrees_with_micro(model)
    return model


# Student's t at 97.5% for the micro fit's degrees of freedom (sizes - 2); 1.96 beyond.
T975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
        10: 2.23, 12: 2.18, 15: 2.13, 20: 2.09, 30: 2.04}


def micro_per_call(path):
    """iobench-micro's cost of one syscall on this host, from its JSON (scripts/micro):
    BM_TcpLoopbackWriteRead's CPU time per iteration fitted over sizes as a + b x size, a over
    the iteration's syscalls, with the intercept's 95% interval. {"per_call_s", "low", "high",
    "sizes", "source"}; None when the file has fewer than 3 sizes of it; ValueError when it
    cannot be read."""
    try:
        doc = json.load(open(path))
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read iobench-micro JSON '{path}': {e}") from e
    pts, calls = [], []
    units = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
    for b in doc.get("benchmarks", []) if isinstance(doc, dict) else []:
        m = re.match(r"^BM_TcpLoopbackWriteRead/(\d+)$", str(b.get("name", "")))
        if m and b.get("run_type", "iteration") == "iteration":
            if b.get("time_unit", "ns") not in units or \
                    not isinstance(b.get("cpu_time"), (int, float)):
                raise ValueError(f"iobench-micro JSON '{path}': {b['name']} has no cpu_time "
                                 "in a known time_unit")
            pts.append((int(m.group(1)), b["cpu_time"] * units[b.get("time_unit", "ns")]))
            calls.append(b.get("syscalls", 2.0))
    line = line_fit(pts) if len({x for x, _ in pts}) >= 3 else None
    if line is None:
        return None
    a, b = line
    n = len(pts)
    mx = sum(x for x, _ in pts) / n
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    ssr = sum((y - a - b * x) ** 2 for x, y in pts)
    se = math.sqrt(ssr / (n - 2) * (1 / n + mx * mx / sxx)) if n > 2 and sxx > 0 else 0.0
    # The t of the nearest tabled degrees of freedom at or below the fit's: the wider interval.
    t = T975[max((k for k in T975 if k <= n - 2), default=1)] if n - 2 <= 30 else 1.96
    per = sum(calls) / len(calls)
    return {"per_call_s": a / per, "low": (a - t * se) / per, "high": (a + t * se) / per,
            "sizes": n, "source": path}


def disagrees_with_micro(model):
    """Why a fit of syscall costs is no model of this host (None: it agrees, or cannot be
    checked): its cost per syscall's interval and iobench-micro's measured one do not
    overlap — the fit then describes something other than what a call costs here (a regime,
    the noise), however small its residuals."""
    micro, ci = model.get("micro"), model.get("per_call_ci")
    if not micro or model["call"] != "syscall" or not ci:
        return None
    if ci[1] < micro["low"] or ci[0] > micro["high"]:
        return (f"its cost per syscall, {1e6 * model['per_call_s']:.2f} µs "
                f"[{1e6 * ci[0]:.2f}..{1e6 * ci[1]:.2f}], disagrees with iobench-micro's "
                f"{1e6 * micro['per_call_s']:.2f} µs [{1e6 * micro['low']:.2f}.."
                f"{1e6 * micro['high']:.2f}] measured on this host")
    return None


def unphysical(model):
    """Why a fit is no model of this host's costs (None: it may be one): a call or a GiB moved
    cannot cost less than nothing. Such a fit (−0.73 µs per syscall, seen on a sweep whose
    three workloads sat in two regimes) describes the noise, not the work."""
    if model["per_call_s"] < 0:
        return (f"its fitted cost per {model['call']} is negative "
                f"({1e6 * model['per_call_s']:.2f} µs): no physical model")
    if model["per_gib_s"] < 0:
        return (f"its fitted cost per GiB moved is negative ({model['per_gib_s']:.3f} s): no "
                "physical model")
    return None


def predict(model, row):
    return model["per_call_s"] * features(row)[0] + model["per_gib_s"]


def text(model, label, scope=None):
    """'Cost model (…, a robust fit over 4 workloads): 2.40 µs per TLS record, 0.210 s per GiB;
    residuals 1K +1.2%, … (every size).', and why it stands aside when it does."""
    res = ", ".join(f"{label(b)} {100 * r:+.1f}%" for b, r in sorted(model["residuals"].items()))
    aside = (f" It stands aside: {model['stands_aside']}."
             if model.get("stands_aside") else "")
    ci, micro = model.get("per_call_ci"), model.get("micro")
    if ci:
        aside = (f" Its cost per {model['call']}'s 95% interval (each workload's runs "
                 f"resampled): [{1e6 * ci[0]:.2f}..{1e6 * ci[1]:.2f}] µs.") + aside
    if micro and model["call"] == "syscall" and not model.get("stands_aside"):
        aside += (f" iobench-micro measured {1e6 * micro['per_call_s']:.2f} µs per syscall "
                  f"[{1e6 * micro['low']:.2f}..{1e6 * micro['high']:.2f}] on this host: "
                  + ("they agree." if ci else "the fit has no interval to check it against."))
    elif micro is None and model["call"] == "syscall":
        aside += " Not checked against iobench-micro (recommend --micro FILE)."
    return (f"Cost model (CPU per GiB from the counts, a robust fit over {model['workloads']} "
            f"workloads): {1e6 * model['per_call_s']:.2f} µs per {model['call']}, "
            f"{model['per_gib_s']:.3f} s per GiB; residuals {res}"
            f"{f' ({scope})' if scope else ''}.{aside}")
