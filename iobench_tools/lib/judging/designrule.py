"""The design rule of docs/design-rule.md (issue #56): which full-sync chunk a replication design
takes, judged over CPU (the reference sweeps), memory and client p99 (the real server) at a
stated resolution, with the burden on the larger size and no tie-break.

The constants below are the page's numbers (tests/scripts/test_design_rule.py checks that the
two agree). Everything here works on plain numbers: a "series" is {size: {round: cost}} for one
sweep and protocol (or one real-server cell and criterion); the command that reads sweeps and
reports (iobench_tools/commands/design_answer.py) builds them."""
import math
import random

from iobench_tools.lib.kernel.iobenchlib import median

DELTA = 0.10                      # the resolution: differences under it are not acted on
SWEEPS = 8                        # K: independent reference sweeps
ROUNDS = 20                       # rounds per sweep, every sweep read at this round
DRAWS = 200                       # null and resampled draws each
PLANNED_HALF = {"tcp": 0.040, "tls": 0.012}  # planned one-sided 95% half-widths (log), pilot's
WIDTH_SLACK = 1.5                 # an interval up to planned x this reaches the resolution
SEED = 56                         # the null's and the resampling's draws: the same every read
CRITERIA = ("cpu", "memory", "p99")
CRITERION_WORDS = {"cpu": "CPU per GiB", "memory": "child memory", "p99": "client p99"}

# Student's t, one-sided 95% (two-sided 90%) and two-sided 95%, by degrees of freedom.
_T95 = [6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782,
        1.771, 1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711,
        1.708, 1.706, 1.703, 1.701, 1.699, 1.697]
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def t_quantile(df, two_sided_95=False):
    """Student's t at one-sided 95% (or two-sided 95%) on `df` degrees of freedom."""
    table, normal = (_T975, 1.960) if two_sided_95 else (_T95, 1.645)
    if df < 1:
        return math.inf
    return table[df - 1] if df <= len(table) else normal


def paired_logs(series, small, large):
    """log(cost of `large` / cost of `small`) for each round both were measured in."""
    a, b = series.get(small) or {}, series.get(large) or {}
    return [math.log(b[r] / a[r]) for r in sorted(set(a) & set(b), key=str)
            if a[r] > 0 and b[r] > 0]


def study_point(logs):
    """One study's (mean log ratio, its standard error, rounds), or None under 2 rounds."""
    n = len(logs)
    if n < 2:
        return None
    mean = sum(logs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    return mean, max(sd / math.sqrt(n), 1e-6), n


def pool(points):
    """Studies' [(mean, se, rounds)] pooled: DerSimonian–Laird tau² and the Hartung–Knapp–
    Sidik–Jonkman interval on K-1 degrees of freedom (one study: its own t on rounds-1).
    {"log", "se", "df", "tau", "q", "k", "lo", "hi" (one-sided 95% bounds), "lo95", "hi95"}."""
    points = [p for p in points if p is not None]
    if not points:
        return None
    if len(points) == 1:
        mean, se, n = points[0]
        df, tau, q = n - 1, 0.0, 0.0
    else:
        w = [1 / se ** 2 for _, se, _ in points]
        fixed = sum(wi * x for wi, (x, _, _) in zip(w, points)) / sum(w)
        q = sum(wi * (x - fixed) ** 2 for wi, (x, _, _) in zip(w, points))
        c = sum(w) - sum(wi * wi for wi in w) / sum(w)
        tau2 = max(0.0, (q - (len(points) - 1)) / c) if c > 0 else 0.0
        w2 = [1 / (se ** 2 + tau2) for _, se, _ in points]
        mean = sum(wi * x for wi, (x, _, _) in zip(w2, points)) / sum(w2)
        df, tau = len(points) - 1, math.sqrt(tau2)
        hk = sum(wi * (x - mean) ** 2 for wi, (x, _, _) in zip(w2, points)) / df
        # HKSJ, never narrower than the plain random-effects interval.
        se = math.sqrt(max(hk, 1.0) / sum(w2))
    t1, t2 = t_quantile(df), t_quantile(df, two_sided_95=True)
    return {"log": mean, "se": se, "df": df, "tau": tau, "q": q, "k": len(points),
            "lo": mean - t1 * se, "hi": mean + t1 * se,
            "lo95": mean - t2 * se, "hi95": mean + t2 * se}


def pooled_pair(studies, small, large):
    """{size: {round: cost}} of several studies, the pair (small, large) pooled (pool)."""
    return pool([study_point(paired_logs(s, small, large)) for s in studies])


LINE = math.log(1 + DELTA)


def shown_better(p):
    """The larger size (p is log(larger / smaller)) shown cheaper by more than DELTA."""
    return p is not None and p["hi"] < -LINE


def shown_worse(p):
    return p is not None and p["lo"] > LINE


def table_of(cpu, real, sizes):
    """{(proto, criterion, small, large): pooled} for every pair of sizes: `cpu` is {proto: [one
    series per sweep]}, `real` {proto: {criterion: [one series per cell]}}."""
    out = {}
    for i, s in enumerate(sizes):
        for big in sizes[i + 1:]:
            for proto, studies in cpu.items():
                out[(proto, "cpu", s, big)] = pooled_pair(studies, s, big)
            for proto, crits in real.items():
                for crit, studies in crits.items():
                    out[(proto, crit, s, big)] = pooled_pair(studies, s, big)
    return out


def beats(table, large, small, protos):
    """Does `large` beat `small` under these protocols? (bool, [(proto, crit, pooled) shown
    better], [(proto, crit, pooled) shown worse])."""
    better, worse = [], []
    for (proto, crit, s, big), p in table.items():
        if proto in protos and s == small and big == large:
            if shown_better(p):
                better.append((proto, crit, p))
            if shown_worse(p):
                worse.append((proto, crit, p))
    return bool(better) and not worse, better, worse


def answer(table, sizes, protos):
    """The smallest size no larger size beats, and why each smaller one fell:
    (size, {smaller size: [(a larger size that beat it, its `better` list)]})."""
    fell = {}
    for i, s in enumerate(sizes):
        beaten = [(big, b) for big in sizes[i + 1:]
                  for ok, b, _ in [beats(table, big, s, protos)] if ok]
        if not beaten:
            return s, fell
        fell[s] = beaten
    return sizes[-1], fell


def shuffled(series, rng):
    """A series with its sizes made exchangeable: each round's costs dealt to the sizes at
    random (the null)."""
    rounds = sorted({r for costs in series.values() for r in costs}, key=str)
    out = {size: {} for size in series}
    for r in rounds:
        present = [size for size in series if r in series[size]]
        values = [series[size][r] for size in present]
        rng.shuffle(values)
        for size, v in zip(present, values):
            out[size][r] = v
    return out


def agreement(cpu, real, sizes, protos_sets, full=None):
    """What the rule names from these runs, and how often: {"answers": {name: size},
    "resampled": {name: {size: count}}, "null": {name: {size: count}}, "alone": {name: [size
    per sweep]}}, for each named protocol set (e.g. {"design": ("tcp", "tls"), "tcp":
    ("tcp",)}). `full`: the runs' own table_of, when the caller has it."""
    rng = random.Random(SEED)
    full = full or table_of(cpu, real, sizes)
    out = {"answers": {n: answer(full, sizes, ps)[0] for n, ps in protos_sets.items()},
           "resampled": {n: {} for n in protos_sets}, "null": {n: {} for n in protos_sets},
           "alone": {n: [] for n in protos_sets}}
    k = min(len(v) for v in cpu.values())
    for _ in range(DRAWS):
        pick = [rng.randrange(k) for _ in range(k)]
        t = table_of({p: [v[i] for i in pick] for p, v in cpu.items()}, real, sizes)
        _count(out["resampled"], t, sizes, protos_sets)
    for _ in range(DRAWS):
        t = table_of({p: [shuffled(s, rng) for s in v] for p, v in cpu.items()},
                     {p: {c: [shuffled(s, rng) for s in v] for c, v in crits.items()}
                      for p, crits in real.items()}, sizes)
        _count(out["null"], t, sizes, protos_sets)
    for i in range(k):
        t = table_of({p: [v[i]] for p, v in cpu.items()}, real, sizes)
        for n, ps in protos_sets.items():
            out["alone"][n].append(answer(t, sizes, ps)[0])
    return out


def _count(into, table, sizes, protos_sets):
    for n, ps in protos_sets.items():
        size = answer(table, sizes, ps)[0]
        into[n][size] = into[n].get(size, 0) + 1


def reached(table, protos=None):
    """Pooled CPU intervals that miss the resolution: neither clear of both lines nor within
    planned x WIDTH_SLACK. [(proto, small, large, half-width)]: empty when it is reached."""
    misses = []
    for (proto, crit, s, big), p in sorted(table.items(), key=lambda kv: kv[0]):
        if crit != "cpu" or p is None or (protos and proto not in protos):
            continue
        half = (p["hi"] - p["lo"]) / 2
        clear = all(p["hi"] < line or p["lo"] > line for line in (-LINE, LINE))
        if not clear and half > PLANNED_HALF.get(proto, 0.0) * WIDTH_SLACK:
            misses.append((proto, s, big, half))
    return misses


def per_round_sd(studies, small, large):
    """The pair's per-round sd of the log ratio (the median over the studies) and the rounds
    they hold in all: the spread a design's resolution is planned from."""
    points = [p for p in (study_point(paired_logs(x, small, large)) for x in studies) if p]
    return median([se * math.sqrt(n) for _, se, n in points]), sum(n for _, _, n in points)


def sweeps_to_reach(pooled, studies, small, large, proto):
    """Sweeps of ROUNDS rounds whose pooled one-sided half-width would reach planned x
    WIDTH_SLACK at this pair's spread: each sweep's within error (the per-round sd over
    sqrt(ROUNDS)) and the between-sweep tau, with t on K-1 degrees of freedom."""
    per_sweep = math.hypot(per_round_sd(studies, small, large)[0] / math.sqrt(ROUNDS),
                           pooled["tau"])
    target = PLANNED_HALF[proto] * WIDTH_SLACK
    k = 2
    while k < 1000 and t_quantile(k - 1) * per_sweep / math.sqrt(k) > target:
        k += 1
    return k
