"""Deciding between two cells: the statistics `iobench compare` uses (src/util/stats.cc) — the
ratio of medians with its percentile bootstrap interval and the Mann-Whitney U test — and, for
cells measured in the same interleaved rounds, the round-by-round comparison: the median of the
per-round ratios, its bootstrap interval and Wilcoxon's signed-rank test."""
import itertools
import math
import random

from iobench_tools.lib.kernel.iobenchlib import median

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
    return _interval(sorted(ratios), level)


def _interval(draws, level):
    """The central `level` interval of sorted bootstrap draws, interpolated: (low, high)."""
    def pct(q):
        at = q * (len(draws) - 1)
        lo = int(at)
        hi = min(lo + 1, len(draws) - 1)
        return draws[lo] + (draws[hi] - draws[lo]) * (at - lo)
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


def versus(runs_a, runs_b):
    """How cell b's total CPU per GiB compares with cell a's: (ratio of medians, half-width of
    its 95% bootstrap interval, (low, high), Mann-Whitney p)."""
    low, high = ratio_ci(runs_a, runs_b)
    ratio = median(runs_b) / median(runs_a) if median(runs_a) else 0
    return ratio, (high - low) / 2, (low, high), mann_whitney_p(runs_a, runs_b)


# Rounds two cells must share to be compared round by round.
MIN_PAIRED_ROUNDS = 5


def paired_ratios(row_a, row_b, key="total_cpu_runs"):
    """Per shared round, b's cost over a's (the rounds both measured), or None when the cells
    were not measured in the same rounds (--order cell, an older sweep) or share too few."""
    ra, rb = row_a.get("rounds"), row_b.get("rounds")
    if not ra or not rb or not row_a.get(key) or not row_b.get(key):
        return None
    a, b = dict(zip(ra, row_a[key])), dict(zip(rb, row_b[key]))
    shared = sorted(set(a) & set(b), key=str)
    if len(shared) < MIN_PAIRED_ROUNDS or any(a[k] <= 0 for k in shared):
        return None
    return [b[k] / a[k] for k in shared]


def median_ci(values, level=0.95, draws=4000):
    """Percentile bootstrap interval of the median of `values`: (low, high)."""
    rng = random.Random(SEED)
    return _interval(sorted(median([rng.choice(values) for _ in values])
                            for _ in range(draws)), level)


def _signed_rank_counts(n):
    """Sign assignments of the ranks 1..n whose positive ranks sum to w, for w = 0..n(n+1)/2."""
    counts = [1] + [0] * (n * (n + 1) // 2)
    for r in range(1, n + 1):
        for w in range(len(counts) - 1, r - 1, -1):
            counts[w] += counts[w - r]
    return counts


def wilcoxon_p(ratios):
    """Two-sided Wilcoxon signed-rank p-value of log(ratio) against 0: exact without ties up to
    30 pairs, else the normal approximation with tie and continuity corrections. Ratios of 1
    are dropped, as the test does."""
    d = [math.log(x) for x in ratios if x > 0 and x != 1]
    n = len(d)
    if n == 0:
        return 1.0
    order = sorted(range(n), key=lambda i: abs(d[i]))
    ranks, i = [0.0] * n, 0
    while i < n:
        j = i
        while j + 1 < n and abs(d[order[j + 1]]) == abs(d[order[i]]):
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    w = sum(r for r, x in zip(ranks, d) if x > 0)
    ties = len({abs(x) for x in d}) < n
    if not ties and n <= 30:
        counts = _signed_rank_counts(n)
        total = sum(counts)
        below = sum(c for k, c in enumerate(counts) if k <= w)
        above = sum(c for k, c in enumerate(counts) if k >= w)
        return min(1.0, 2 * min(below, above) / total)
    tie_term = sum(t ** 3 - t for t in (ranks.count(r) for r in set(ranks)))
    var = n * (n + 1) * (2 * n + 1) / 24 - tie_term / 48
    if var <= 0:
        return 1.0
    z = max(abs(w - n * (n + 1) / 4) - 0.5, 0) / math.sqrt(var)
    return min(1.0, math.erfc(z / math.sqrt(2)))


def compare(row_a, row_b, key="total_cpu_runs"):
    """How cell b's cost compares with cell a's: (ratio, half-width of its 95% interval,
    (low, high), p, how). Cells measured in the same rounds are compared round by round: the
    median of the per-round ratios, the bootstrap interval of that median, Wilcoxon's
    signed-rank test; other cells by their medians (versus: Mann-Whitney)."""
    ratios = paired_ratios(row_a, row_b, key)
    if ratios is None:
        return (*versus(row_a[key], row_b[key]), "unpaired")
    low, high = median_ci(ratios)
    return median(ratios), (high - low) / 2, (low, high), wilcoxon_p(ratios), \
        f"paired over {len(ratios)} rounds"
