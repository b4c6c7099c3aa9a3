"""Pooling paired rounds across studies (sweeps, hosts, real-server cells): the statistics every
rule and report of the design shares. A "series" is {size: {round: cost}} for one study and
protocol (or one real-server cell and criterion); a pair's rounds give log ratios, each study
its point (mean, standard error, rounds), and the points pool by DerSimonian-Laird random
effects with the Hartung-Knapp-Sidik-Jonkman interval. Rule v1 (docs/design-rule.md) defined
them; its decision code is retired and its record frozen (results/design-answer/report.md)."""
import math

from iobench_tools.lib.kernel.iobenchlib import median

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


def per_round_sd(studies, small, large):
    """The pair's per-round sd of the log ratio (the median over the studies) and the rounds
    they hold in all: the spread a design's resolution is planned from."""
    points = [p for p in (study_point(paired_logs(x, small, large)) for x in studies) if p]
    return median([se * math.sqrt(n) for _, se, n in points]), sum(n for _, _, n in points)
