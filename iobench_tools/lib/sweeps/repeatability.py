"""Many sweeps of one command, read together (issue #48): does every sweep name the same size,
and do the intervals a sweep states hold across sweeps?

- Each sweep's statement per protocol (studyjudge: rule v2 on that sweep, settled or open), and
  how often each came out.
- The A/A control across sweeps: how many sweeps' stated 95% intervals cover 1 (with the Wilson
  interval of that rate: ten sweeps cannot show 95% to better than about ±15%), and the
  between-sweep component — the spread of the sweeps' A/A log-ratios beyond what their own
  intervals allow (the DerSimonian–Laird estimate of a random-effects variance). A positive one
  is a sweep-level term: the state one sweep carries (the host that hour) that its own rounds
  cannot see, so a sweep's interval must be widened by it.
- Every size's ratio to the protocol's largest size across sweeps: the sweeps' ratios pooled by
  the same random-effects model, with the between-sweep spread, and how many independent sweeps
  would put the pooled interval clear of the tolerance (what a verdict on that pair needs)."""
import math
import os
import sys
import tarfile

from iobench_tools.lib.kernel.iobenchlib import median
from iobench_tools.lib.sweeps import noisefloor
from iobench_tools.lib.sweeps import sweeplib

Z95 = 1.959964


def log_interval(ratio, low, high):
    """(log ratio, its standard error) from a 95% interval (asymmetric ends averaged)."""
    return math.log(ratio), (math.log(high) - math.log(low)) / (2 * Z95)


def random_effects(points):
    """DerSimonian–Laird over [(log ratio, se)]: {"mean", "se", "tau", "q", "low", "high"} (the
    pooled ratio and its 95% interval as ratios; tau the between-sweep sd of the log ratio)."""
    points = [(x, max(se, 1e-9)) for x, se in points]  # a ratio the same every round: se 0
    w = [1 / se ** 2 for _, se in points]
    fixed = sum(wi * x for wi, (x, _) in zip(w, points)) / sum(w)
    q = sum(wi * (x - fixed) ** 2 for wi, (x, _) in zip(w, points))
    c = sum(w) - sum(wi * wi for wi in w) / sum(w)
    tau2 = max(0.0, (q - (len(points) - 1)) / c) if c > 0 else 0.0
    w2 = [1 / (se * se + tau2) for _, se in points]
    mean = sum(wi * x for wi, (x, _) in zip(w2, points)) / sum(w2)
    se = math.sqrt(1 / sum(w2))
    return {"mean": math.exp(mean), "se": se, "tau": math.sqrt(tau2), "q": q,
            "low": math.exp(mean - Z95 * se), "high": math.exp(mean + Z95 * se)}


def wilson(k, n):
    """The 95% Wilson interval of a rate of k in n."""
    if n == 0:
        return 0.0, 1.0
    p, z2 = k / n, Z95 * Z95
    mid = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, mid - half), min(1.0, mid + half)


def sweeps_needed(pooled_log, within_se, tau, tolerance):
    """Independent sweeps whose pooled 95% interval of this log ratio would end clear of the
    tolerance line (1 + tolerance) on the side its mean lies: each sweep adds its own
    within-sweep noise and the between-sweep term. None when the mean sits on the line."""
    gap = abs(pooled_log - math.log(1 + tolerance))
    if gap < 1e-9:
        return None
    return max(1, math.ceil((Z95 * math.hypot(within_se, tau) / gap) ** 2))


def aa_floors(sweeps):
    """[(name, floor dict)] of the sweeps that ran an A/A control (the manifest's, else
    recomputed from the control pair)."""
    out = []
    for name, manifest, _ in sweeps:
        f = manifest.get("noise_floor")
        if not f and manifest.get("control_pairs"):
            f = noisefloor.floor(*manifest["control_pairs"][0])
        if f:
            out.append((name, f))
    return out


def aa_calibration(floors):
    """The A/A across sweeps: coverage of 1 (k, n, its Wilson interval) and the between-sweep
    term; None without two sweeps."""
    if len(floors) < 2:
        return None
    covered = sum(f["low"] <= 1 <= f["high"] for _, f in floors)
    points = [log_interval(f["ratio"], f["low"], f["high"]) for _, f in floors]
    pooled = random_effects(points)
    within = median([se for _, se in points])
    return {"covered": covered, "n": len(floors), "rate": wilson(covered, len(floors)),
            "pooled": pooled, "within_se": within,
            # A sweep's interval widened by the between-sweep term: its half-width as a ratio.
            "widened_half": math.exp(Z95 * math.hypot(within, pooled["tau"])) - 1,
            "stated_half": math.exp(Z95 * within) - 1}


def pair_ratios(sweeps):
    """{(placement, proto, size): [(log ratio to the largest size, se)]} over the sweeps, each
    from the sweep's own paired comparison (sweeplib.compare)."""
    out = {}
    for _, _, rows in sweeps:
        for (placement, proto), rs in sweeplib.one_connection_groups(rows).items():
            top = max(rs, key=lambda r: r["buf"])
            for r in rs:
                if r is top:
                    continue
                ratio, _, (low, high), _, _ = sweeplib.compare(top, r)
                if ratio > 0 and low > 0:
                    out.setdefault((placement, proto, r["buf"], top["buf"]), []).append(
                        log_interval(ratio, low, high))
    return out


def unpack(archive, into, prog):
    """A sweep folder from its .tar.xz (one top folder; no member outside it): its path. A
    file that is not one stops the script `prog` with one line."""
    try:
        with tarfile.open(archive, "r:xz") as t:
            names = t.getnames()
            tops = {n.split("/")[0] for n in names}
            if len(tops) != 1 or any(n.startswith("/") or ".." in n.split("/") for n in names) \
                    or any(not (m.isfile() or m.isdir()) for m in t.getmembers()):
                sys.exit(f"{prog}: error: '{archive}' is not one sweep folder's archive")
            t.extractall(into)
    except (OSError, tarfile.TarError) as e:
        sys.exit(f"{prog}: error: cannot read '{archive}': {e}")
    return os.path.join(into, tops.pop())
