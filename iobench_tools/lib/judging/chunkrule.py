"""The chunk question's rule (docs/chunk-question.md), written before its runs: does a 32K or
64K full-sync chunk move a primary's client p99 during the sync, condition by condition, from
one valkey-evidence run of one binary at every size (NAME~SIZE) with an A/A twin and idle cells.

Per condition (mode, replicas) and size, round r gives d_r = log(p99 at SIZE / p99 at the
baseline), both cells of round r. The estimate is the median of the d_r; its bounds are the
distribution-free order statistics for a median (a binomial count of rounds above it), so one
hiccup round moves them by one rank at most, never by its size. Every bound is at 1 - alpha/K,
K the number of judgements the answer rests on (conditions x sizes): the answer is joint.

Gates read first: in every condition the A/A twin's interval and, for every size, the idle
cell's interval (the chunk does no work there) must cover 1. A gate that fails voids the
reading: the instrument does not resolve a harm of the size asked."""
import functools
import math
import random

from iobench_tools.lib.kernel.iobenchlib import median

ALPHA = 0.05
DELTA = 0.10  # a harm under 10% of the baseline's p99 is no harm
FIGURE = "sync_p99_ms"  # the open loop's p99 inside the primary's sync window
IDLE_FIGURE = "p99_ms"
SEED = 0x0C4A4C


def binom_cdf(k, n):
    """P(Binomial(n, 1/2) <= k)."""
    return sum(math.comb(n, i) for i in range(0, k + 1)) / 2 ** n


@functools.lru_cache(maxsize=None)
def _bound_rank(n, level):
    """The smallest k with P(Binom(n, 1/2) <= k - 1) >= level, or None: the k-th smallest of n
    values lies above the median with that confidence (and the k-th largest below it)."""
    return next((k for k in range(1, n + 1) if binom_cdf(k - 1, n) >= level), None)


def median_bounds(values, level):
    """(low, high): the order statistics that hold the median with `level` confidence each side
    alone (one-sided at `level`), or None for a side too few values cannot bound."""
    x = sorted(values)
    k = _bound_rank(len(x), level)
    return (x[len(x) - k], x[k - 1]) if k else (None, None)


def paired_logs(doc, cell_of, base_of, figure):
    """[log(cell / base)] over the rounds both have (each run tagged with its round)."""
    def by_round(cid):
        c = next((c for c in doc["cells"] if c["id"] == cid), None)
        return {r["round"]: r.get(figure) for r in (c or {}).get("runs", [])}
    a, b = by_round(base_of), by_round(cell_of)
    return [math.log(b[k] / a[k]) for k in sorted(set(a) & set(b))
            if a[k] and b[k] and a[k] > 0 and b[k] > 0]  # None or 0: no figure


def judge(logs, level):
    """One judgement: the median ratio, its bounds at `level`, the verdict."""
    if not logs:
        return {"rounds": 0, "verdict": "no rounds"}
    low, high = median_bounds(logs, level)
    out = {"rounds": len(logs), "ratio": math.exp(median(logs)),
           "low": math.exp(low) if low is not None else None,
           "high": math.exp(high) if high is not None else None,
           "sd": _sd(logs)}
    if low is None and high is None:
        out["verdict"] = "too few rounds to bound"
    elif high is not None and high < math.log(1 + DELTA):
        out["verdict"] = "within 10%"
    elif low is not None and low > math.log(1 + DELTA):
        out["verdict"] = "harm above 10%"
    else:
        out["verdict"] = "not resolved"
    return out


def covers_one(j):
    return j.get("low") is not None and j.get("high") is not None and j["low"] <= 1 <= j["high"]


def _sd(xs):
    if len(xs) < 2:
        return None
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def conditions(doc):
    """The (mode, replicas) a run's sync cells hold, in order."""
    seen = []
    for c in doc["cells"]:
        key = (c["mode"], c["replicas"])
        if c["mode"] != "idle" and key not in seen:
            seen.append(key)
    return seen


def cell(doc, proto, mode, replicas, build):
    if mode == "idle":
        return f"{proto}-idle-{build}"
    return f"{proto}-{mode}-n{replicas}-{build}"


def read(doc, sizes, baseline, twin, proto="tcp"):
    """The rule's reading of a valkey-evidence results.json: {gates, judgements, answer}.
    `sizes`: the builds judged against `baseline` (series~32k, series~64k); `twin`: the
    baseline's A/A twin (series~16k#2)."""
    conds = conditions(doc)
    k = len(conds) * len(sizes)
    level = 1 - ALPHA / max(k, 1)
    gates = []
    for mode, n in conds:
        j = judge(paired_logs(doc, cell(doc, proto, mode, n, twin),
                              cell(doc, proto, mode, n, baseline), FIGURE), level)
        gates.append(dict(j, gate="A/A", condition=(mode, n), build=twin, ok=covers_one(j)))
    for build in [twin, *sizes]:
        j = judge(paired_logs(doc, cell(doc, proto, "idle", None, build),
                              cell(doc, proto, "idle", None, baseline), IDLE_FIGURE), level)
        gates.append(dict(j, gate="idle", condition=("idle", None), build=build,
                          ok=covers_one(j)))
    judgements = []
    for build in sizes:
        for mode, n in conds:
            j = judge(paired_logs(doc, cell(doc, proto, mode, n, build),
                                  cell(doc, proto, mode, n, baseline), FIGURE), level)
            judgements.append(dict(j, condition=(mode, n), build=build))
    return {"level": level, "judgements_k": k, "gates": gates, "judgements": judgements,
            "answer": answer(gates, judgements, sizes, baseline)}


def answer(gates, judgements, sizes, baseline):
    """The largest size within 10% in every condition, if every gate covers 1; else why not."""
    if not all(g["ok"] for g in gates):
        failed = [f"{g['gate']} {g['build']} {g['condition'][0]}" for g in gates if not g["ok"]]
        return {"size": None, "why": "the instrument does not resolve: a gate does not cover 1 "
                                     f"({', '.join(failed)})"}
    ok = [b for b in sizes if all(j["verdict"] == "within 10%"
                                  for j in judgements if j["build"] == b)]
    # A larger size carries its harms' burden: it is taken only where every smaller one is too.
    taken = baseline
    for b in sizes:
        if b not in ok:
            break
        taken = b
    harmed = [j for j in judgements if j["verdict"] == "harm above 10%"]
    return {"size": taken, "why": (f"{taken} within 10% of {baseline} in every condition"
                                   if taken != baseline else
                                   f"no larger size shown within 10% in every condition"
                                   + (f"; shown above it in {len(harmed)}" if harmed else ""))}


def power(sd, rounds, true_ratio, k, draws=2000, seed=SEED):
    """The chance that k independent conditions, each of `rounds` normal log ratios around
    log(true_ratio) with spread `sd`, all read 'within 10%' at level 1 - ALPHA/k."""
    rng = random.Random(seed)
    level = 1 - ALPHA / k
    mu = math.log(true_ratio)
    passed = 0
    for _ in range(draws):
        if all(judge([rng.gauss(mu, sd) for _ in range(rounds)], level)["verdict"]
               == "within 10%" for _ in range(k)):
            passed += 1
    return passed / draws
