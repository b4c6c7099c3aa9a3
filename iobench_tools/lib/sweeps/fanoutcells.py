"""The fan-out scenario's cells and how far to trust them: a cell's name and its runs as the
statistics read them; the A/A control at each N (the control size run twice per round: the
noise floor); and, where a cell is wide, how its runs' cost follows the replicas' sleeps (the
named cause). fanoutlib's verdicts read these."""
from iobench_tools.lib.sweeps import sweeplib


def cell_id(c):
    """A cell's name; the A/A control's second copy of a size (twin) is that size's name
    with -twin."""
    return f"{c['shape']}-{c['proto']}-n{c['replicas']}-{c['buf']}" + \
        ("-twin" if c.get("twin") else "")


def noise_floor(runs, replicas, shape, proto, control):
    """The A/A control at each N: the control size run twice per round under two names, the
    twin's cost over the original's (round by round) with its 95% interval. The ratio is 1 by
    construction; an interval that excludes 1 says this scenario's intervals are narrower than
    its runs' spread, and no verdict at that N is stated as decided."""
    out = []
    for n in replicas:
        c = {"shape": shape, "proto": proto, "replicas": n, "buf": control}
        a = cell_runs(runs, shape, proto, n, control, "writer_cpu_s_per_gib")
        twin_runs = runs.get(cell_id(dict(c, twin=True)), [])
        if len(a["total_cpu_runs"]) < 2 or len(twin_runs) < 2:
            continue
        rounds = [r.get("round") for r in twin_runs]
        b = {"total_cpu_runs": [r["writer_cpu_s_per_gib"] for r in twin_runs],
             "rounds": rounds if None not in rounds else None}
        ratio, half, (lo, hi), _, _ = sweeplib.compare(a, b)
        out.append({"replicas": n, "ratio": ratio, "ci": [lo, hi], "half_width": half,
                    "excludes_one": lo > 1 or hi < 1})
    return out


def spearman(xs, ys):
    """Spearman's rank correlation (ties take their mean rank); None under 5 pairs or with no
    spread."""
    if len(xs) < 5:
        return None

    def ranks(v):
        order = sorted(range(len(v)), key=v.__getitem__)
        r = [0.0] * len(v)
        i = 0
        while i < len(v):
            j = i
            while j + 1 < len(v) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx, syy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return sxy / (sxx * syy) ** 0.5 if sxx and syy else None


WIDE = 1.5  # a cell whose slowest run costs this many times its fastest has a spread to explain


def spread_cause(runs, replicas, bufs, shape, proto):
    """For each size with a wide cell (slowest over fastest run above WIDE): how its runs' cost
    follows the replicas' sleeps per GiB, each run over its cell's median (pooled over N), as
    Spearman's rho with the run count; None when the runs carry no sleep counts."""
    out = {}
    for b in bufs:
        cells = [runs.get(cell_id({"shape": shape, "proto": proto, "replicas": n, "buf": b}), [])
                 for n in replicas]
        cells = [c for c in cells if c and all(r.get("replica_sleeps_per_gib") for r in c)]
        if not any(max(r["writer_cpu_s_per_gib"] for r in c)
                   > WIDE * min(r["writer_cpu_s_per_gib"] for r in c) for c in cells):
            continue
        xs, ys = [], []
        for c in cells:
            mc = sweeplib.median([r["writer_cpu_s_per_gib"] for r in c])
            ms = sweeplib.median([r["replica_sleeps_per_gib"] for r in c])
            xs += [r["writer_cpu_s_per_gib"] / mc for r in c]
            ys += [r["replica_sleeps_per_gib"] / ms for r in c]
        rho = spearman(xs, ys)
        if rho is not None:
            out[b] = {"rho": rho, "runs": len(xs)}
    return out


FOLLOWS = 0.7  # a rank correlation this strong names the replicas' sleeps as the spread's cause


def spread_text(v):
    causes = v.get("spread_cause") or {}
    if not causes:
        return ""
    named = [b for b, c in causes.items() if c["rho"] >= FOLLOWS]
    text = (f" Wide cells (a slowest run over {WIDE:g}x the fastest), each run's cost and its "
            "replicas' sleeps per GiB over its cell's median, pooled over N (Spearman): "
            + "; ".join(f"{b} rho {c['rho']:.2f} ({c['runs']} runs)" for b, c in causes.items())
            + ".")
    if named:
        text += (f" For {', '.join(named)} the cost follows the sleeps: each is a wake-up the "
                 "writer's write pays for, so the cell's spread is how often its replicas slept, "
                 "and a median over few runs is a draw of that.")
    rest = [b for b in causes if b not in named]
    if rest:
        text += f" For {', '.join(rest)} the sleeps do not explain the spread (rho under {FOLLOWS:g})."
    return text


def floor_text(v):
    """The A/A line of one shape and protocol."""
    floor = v.get("noise_floor")
    if not floor:
        return ""
    covers = sum(1 for f in floor if not f["excludes_one"])
    parts = "; ".join(f"N={f['replicas']} x{f['ratio']:.3f} [{f['ci'][0]:.3f}, {f['ci'][1]:.3f}]"
                      for f in floor)
    text = (f" A/A control ({v['control']} run twice per round under two names; the twin over "
            f"the original): {parts}; its interval covers 1 at {covers} of {len(floor)} N.")
    bad = [f["replicas"] for f in floor if f["excludes_one"]]
    if bad:
        text += (" Where it does not (N=" + ", ".join(map(str, bad)) + "), the intervals are "
                 "narrower than the runs' spread: nothing there is stated as decided; more "
                 "rounds, or a quieter host, would tell.")
    return text


def runs_of(runs, shape, proto, n, buf, key):
    return [r[key] for r in runs.get(cell_id(
        {"shape": shape, "proto": proto, "replicas": n, "buf": buf}), [])]


def cell_runs(runs, shape, proto, n, buf, key):
    """A cell's runs as statslib.compare reads them: their costs and the round of each (None
    for a scenario from before the rounds were recorded: compared by medians)."""
    rs = runs.get(cell_id({"shape": shape, "proto": proto, "replicas": n, "buf": buf}), [])
    rounds = [r.get("round") for r in rs]
    return {"total_cpu_runs": [r[key] for r in rs],
            "rounds": rounds if rounds and None not in rounds else None}
