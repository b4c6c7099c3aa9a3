"""Rule v2 of docs/design-rule-v2.md (issue #66): the burden on the larger size for its harms as
for its gains. A larger size L replaces the default S only when L is shown better than S by more
than DELTA in some criterion (the gains held to ALPHA together, Bonferroni) and every harm's
one-sided upper bound stays below 1 + DELTA in every condition measured (each at ALPHA: an
intersection-union test needs no split). The sizes are tried as a fixed sequence, smallest
first, each against the default it would replace, and the sequence stops at the first size that
does not replace it: the answer is shown directly better than the size it replaced, and the
chance of naming any size past a step that is not there stays under ALPHA.

Series are v1's ({size: {round: cost}}, designrule.py): CPU pooled over one host's sweeps by
random effects (a protocol is one condition), the real server's memory and p99 judged cell by
cell (mode x replicas x protocol; never pooled, the worst binds)."""
import functools
import math
import random

from iobench_tools.lib.judging import pooling

DELTA = 0.10                      # the resolution: differences under it are not acted on
ALPHA = 0.05                      # one-sided, for each step of the sequence
LINE = math.log(1 + DELTA)
DRAWS = 200                       # resampled and null draws each
SEED = 66
# The chunks the real server is built at: a step between two of them needs its harms there
# measured on the host (a campaign without them cannot take it).
REAL_SIZES = (16384, 65536, 262144)
REAL_CRITERIA = ("memory", "p99")


def t_cdf(t, df):
    """Student's t distribution function (the regularized incomplete beta, by its continued
    fraction: no scipy here)."""
    x = df / (df + t * t)
    tail = 0.5 * _betainc(df / 2, 0.5, x)
    return 1 - tail if t > 0 else tail


def _betainc(a, b, x):
    if x <= 0 or x >= 1:
        return 0.0 if x <= 0 else 1.0
    ln = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + \
        b * math.log(1 - x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(ln) * _betacf(a, b, x) / a
    return 1 - math.exp(ln) * _betacf(b, a, 1 - x) / b


def _betacf(a, b, x):
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + num * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-12:
            break
    return h


@functools.lru_cache(maxsize=None)
def t_upper(alpha, df):
    """The t with P(T > t) = alpha on `df` degrees of freedom (bisection on t_cdf). Cached: a
    null's draws ask the same few (alpha, df) pairs thousands of times (design-table's 8000
    tallies spent 510 of their 527 s here)."""
    if df < 1:
        return math.inf
    lo, hi = 0.0, 1000.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if 1 - t_cdf(mid, df) > alpha else (lo, mid)
    return (lo + hi) / 2


def bounds(p, alpha):
    """(lower, upper) one-sided bounds of a pooled log ratio at level alpha each."""
    t = t_upper(alpha, p["df"])
    return p["log"] - t * p["se"], p["log"] + t * p["se"]


def conditions(cpu, real, small, large, protos):
    """What one step reads, log(large / small) each: the gains' tests ({(proto, crit): pooled},
    CPU over the host's sweeps, memory and p99 over the real server's cells) and the harms'
    conditions ([(proto, crit, cell index or None, pooled)]: CPU per protocol, memory and p99
    per cell)."""
    gains, harms = {}, []
    for proto in protos:
        p = pooling.pooled_pair(cpu.get(proto, []), small, large)
        if p is not None:
            gains[(proto, "cpu")] = p
            harms.append((proto, "cpu", None, p))
        for crit, cells in (real.get(proto) or {}).items():
            pooled = pooling.pooled_pair(cells, small, large)
            if pooled is not None:
                gains[(proto, crit)] = pooled
            for i, cell in enumerate(cells):
                own = pooling.pool([pooling.study_point(pooling.paired_logs(cell, small, large))])
                if own is not None:
                    harms.append((proto, crit, i, own))
    return gains, harms


def step(cpu, real, small, large, protos, level=ALPHA):
    """Does `large` replace `small`? {"ok", "gains": [(proto, crit, pooled, upper)] shown
    better, "failed": [(proto, crit, cell, pooled, upper)] harms not shown below the line,
    "unmeasured": [(proto, crit)] real-server harms the step needs and has not, "tests": the
    gains' count, "alpha": each gain's level, "conditions": what it read (conditions)}.
    `level`: the step's (ALPHA; a union over several links reads each at ALPHA / links,
    docs/design-rule-v2-links.md)."""
    gains, harms = conditions(cpu, real, small, large, protos)
    alpha = level / max(len(gains), 1)
    # Harms the real server should have measured and did not: the burden is the larger size's.
    unmeasured = []
    if small in REAL_SIZES and large in REAL_SIZES:
        unmeasured = [(proto, crit) for proto in protos for crit in REAL_CRITERIA
                      if not any(h[0] == proto and h[1] == crit for h in harms)]
    shown = []
    for (proto, crit), p in sorted(gains.items()):
        upper = bounds(p, alpha)[1]
        if upper < -LINE:
            shown.append((proto, crit, p, upper))
    failed = []
    for proto, crit, cell, p in harms:
        upper = bounds(p, level)[1]
        if not upper < LINE:
            failed.append((proto, crit, cell, p, upper))
    return {"ok": bool(shown) and not failed and not unmeasured, "gains": shown,
            "failed": failed, "unmeasured": unmeasured, "tests": len(gains), "alpha": alpha,
            "small": small, "large": large, "conditions": (gains, harms)}


def answer(cpu, real, sizes, protos, level=ALPHA):
    """The fixed sequence: (the answer, [each step tried, in order])."""
    current, steps = sizes[0], []
    for large in sizes[1:]:
        s = step(cpu, real, current, large, protos, level)
        steps.append(s)
        if not s["ok"]:
            break
        current = large
    return current, steps


def exchanged(series, a, b, rng):
    """A series with sizes `a` and `b` exchangeable: in each round their costs swapped with
    probability 1/2 (the targeted null of the step between them)."""
    out = {size: dict(costs) for size, costs in series.items()}
    for r in set(out.get(a, {})) & set(out.get(b, {})):
        if rng.random() < 0.5:
            out[a][r], out[b][r] = out[b][r], out[a][r]
    return out


def resampled_rounds(series, rng):
    """One sweep's rounds drawn with replacement (each round keeps its sizes together)."""
    rounds = sorted({r for costs in series.values() for r in costs}, key=str)
    pick = [rng.choice(rounds) for _ in rounds]
    return {size: {i: costs[r] for i, r in enumerate(pick) if r in costs}
            for size, costs in series.items()}


def _map(cpu, real, f):
    return ({p: [f(s) for s in v] for p, v in cpu.items()},
            {p: {c: [f(s) for s in v] for c, v in crits.items()} for p, crits in real.items()})


def agreement(cpu, real, sizes, protos):
    """What could make the answer fail, each counted over DRAWS: {"answer", "sweeps" (whole
    sweeps resampled), "rounds" (rounds resampled within each sweep), "left_out" (the answer with
    each sweep left out), "null_below"/"null_above" (the answer exchanged with its next smaller /
    larger size in every round: {size: count})}."""
    rng = random.Random(SEED)
    a = answer(cpu, real, sizes, protos)[0]
    out = {"answer": a, "sweeps": {}, "rounds": {}, "left_out": [],
           "null_below": {}, "null_above": {}}

    def tally(key, c, r):
        got = answer(c, r, sizes, protos)[0]
        out[key][got] = out[key].get(got, 0) + 1

    k = min((len(v) for v in cpu.values()), default=0)
    for _ in range(DRAWS):
        pick = [rng.randrange(k) for _ in range(k)]
        tally("sweeps", {p: [v[i] for i in pick] for p, v in cpu.items()}, real)
        tally("rounds", *_map(cpu, real, lambda s: resampled_rounds(s, rng)))
    for i in range(k if k > 1 else 0):
        out["left_out"].append(answer({p: v[:i] + v[i + 1:] for p, v in cpu.items()}, real,
                                      sizes, protos)[0])
    at = sizes.index(a)
    for key, other in (("null_below", at - 1), ("null_above", at + 1)):
        if 0 <= other < len(sizes):
            for _ in range(DRAWS):
                tally(key, *_map(cpu, real, lambda s: exchanged(s, a, sizes[other], rng)))
    return out


def step_is_real(agree, sizes):
    """The answer's own step (over its next smaller size) fails under its targeted null: the
    null names a smaller size in at least 1 - ALPHA of its draws. False for the smallest size
    (no step) and when the null still names the answer (the agreement is the rule's)."""
    a = agree["answer"]
    if sizes.index(a) == 0 or not agree["null_below"]:
        return False
    smaller = sum(n for s, n in agree["null_below"].items() if s < a)
    return smaller >= (1 - ALPHA) * DRAWS
