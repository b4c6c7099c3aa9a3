"""A cost model from counts: one protocol's CPU per GiB (the knee's cost: sender + receiver)
fitted over a sweep's workloads as a cost per call and per GiB moved,

    cpu_s_per_gib ~= per_call x calls/GiB + per_gib

where a call is a syscall of either side (TCP), or a TLS record (TLS: its write, its two reads,
its encryption and decryption go together, so records and syscalls cannot be told apart by a
fit)
by least absolute deviations (iteratively reweighted least squares: one cell in another regime
moves the fit little and shows as its own large residual). Where the residuals of the sizes a
knee is judged on are small, the model's predicted gap between sizes whose counts differ pools
every size's runs and can decide what one pair's noisy runs cannot; where they are large (the
cells are in different regimes: docs/measurement.md), the measurement decides."""
from iobench_tools.lib.iobenchlib import GiB, median, work_counts

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


def fit(rows, cost):
    """The model over `rows` (one protocol's workloads; `cost(row)` its CPU per GiB), or None
    when the counts are missing or fewer than 3 workloads fit: {"per_call_s", "per_gib_s",
    "call": "TLS record" or "syscall", "residuals": {buf: (measured - predicted) / predicted},
    "workloads"}."""
    pts = [(features(r), cost(r), r["buf"]) for r in rows]
    if len(pts) < 3 or any(f is None for f, _, _ in pts):
        return None
    xy = [(f[0], y) for f, y, _ in pts]
    weights = None
    for _ in range(IRLS_ROUNDS):
        line = line_fit(xy, weights)
        if line is None:
            return None
        per_gib, per_call = line
        floor = 1e-3 * median([y for _, y in xy])
        weights = [1 / max(abs(y - per_call * x - per_gib), floor) for x, y in xy]
    model = {"per_call_s": per_call, "per_gib_s": per_gib, "workloads": len(xy),
             "call": "TLS record" if any(f[1] for f, _, _ in pts) else "syscall"}
    predicted = [(buf, y, predict(model, r)) for (_, y, buf), r in zip(pts, rows)]
    model["residuals"] = {buf: (y - p) / p for buf, y, p in predicted if p > 0}
    model["stands_aside"] = unphysical(model)
    return model


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


def holds_for(model, rows, tolerance):
    """Does the model describe these rows to within half the tolerance (each one's residual)?
    A fit that stands aside (unphysical) describes none."""
    return not model.get("stands_aside") and all(r["buf"] in model["residuals"]
               and abs(model["residuals"][r["buf"]]) <= tolerance / 2 for r in rows)


def text(model, label, scope=None):
    """'Cost model (…, a robust fit over 4 workloads): 2.40 µs per TLS record, 0.210 s per GiB;
    residuals 1K +1.2%, … (every size).', and why it stands aside when it does."""
    res = ", ".join(f"{label(b)} {100 * r:+.1f}%" for b, r in sorted(model["residuals"].items()))
    aside = (f" It stands aside: {model['stands_aside']}."
             if model.get("stands_aside") else "")
    return (f"Cost model (CPU per GiB from the counts, a robust fit over {model['workloads']} "
            f"workloads): {1e6 * model['per_call_s']:.2f} µs per {model['call']}, "
            f"{model['per_gib_s']:.3f} s per GiB; residuals {res}"
            f"{f' ({scope})' if scope else ''}.{aside}")
