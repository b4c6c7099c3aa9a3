"""Reading a fan-out scenario (results/<name>/fanout.json, written by scripts/fanout-scenario)
and a many-connections sweep: the per-N statements, the answer and the recommendation, shared by
fanout-scenario, conns-scenario and recommend. The criterion is the writer thread's CPU per GiB
delivered (N x bytes; a many-connections sweep: sender + receiver CPU per GiB). At each N the
fixed sizes are read by the one judge of a study (studyjudge: rule v2's sequence on the N's
paired rounds), and adaptive is a rule v2 step over that N's fixed answer: it replaces it only
when shown cheaper than it by more than 10% in CPU or in peak buffer memory (pooled over N) with
both below x1.10 of it at every N."""
from iobench_tools.lib.judging import designrule2 as rule
from iobench_tools.lib.judging import samework
from iobench_tools.lib.judging import studyjudge
from iobench_tools.lib.sweeps import sweeplib
from iobench_tools.lib.sweeps.fanoutcells import (cell_id, cell_runs, floor_text, noise_floor, runs_of,
                                           spread_cause, spread_text)
from iobench_tools.lib.kernel.iobenchlib import parse_size as size_bytes, stat

MEMORY = "peak_buffer_bytes"


def chunks_of(runs, shape, proto, n, buf):
    """A fan-out cell's chunk work: (chunks, the largest chunk) of its first run, or None (a
    many-connections cell, whose runs carry no chunk counts)."""
    rs = runs.get(cell_id({"shape": shape, "proto": proto, "replicas": n, "buf": buf}), [])
    if not rs or "chunks" not in rs[0] or "peak_chunk_bytes" not in rs[0]:
        return None
    return rs[0]["chunks"], rs[0]["peak_chunk_bytes"]


def same_chunks(runs, shape, proto, n, fixed):
    """The fixed size whose chunks the adaptive writer's are (as many, as large), or None: then
    it is that size by mechanism, whatever its runs cost."""
    ada = chunks_of(runs, shape, proto, n, "adaptive")
    return next((b for b in fixed if ada and chunks_of(runs, shape, proto, n, b) == ada), None)


def series(runs, shape, proto, n, bufs, key):
    """{buf: {round: value}} of the cells at N whose runs record their round (an older
    scenario's do not, and give nothing: a statement needs paired rounds)."""
    out = {}
    for b in bufs:
        c = cell_runs(runs, shape, proto, n, b, key)
        if c["rounds"]:
            out[b] = dict(zip(c["rounds"], c["total_cpu_runs"]))
    return out


def adaptive_step(runs, per_n, shape, proto, key):
    """Adaptive against each N's fixed answer, as one rule v2 step: {"ok", "gains", "failed"
    (N, criterion, ratio, bound), "words"}; None when no N has both. CPU and peak buffer memory
    are each a criterion, every N a condition."""
    cells = {"cpu": [], "memory": []}
    used = []
    for row in per_n:
        if row.get("answer") is None or "adaptive" not in row:
            continue
        for crit, k in (("cpu", key), ("memory", MEMORY)):
            s = series(runs, shape, proto, row["replicas"], [row["answer"], "adaptive"], k)
            if len(s) == 2:
                cells[crit].append({"fixed": s[row["answer"]], "adaptive": s["adaptive"]})
        used.append(row["replicas"])
    if not used or not cells["cpu"]:
        return None
    s = rule.step({}, {proto: cells}, "fixed", "adaptive", (proto,))
    failed = [(used[cell], crit, p, upper) for _, crit, cell, p, upper in s["failed"]]
    return {"ok": s["ok"], "gains": [(crit, p, upper) for _, crit, p, upper in s["gains"]],
            "failed": failed, "n": used}


def verdict(runs, replicas, bufs, shape, proto, key="writer_cpu_s_per_gib", same_as=None,
            control=None):
    """Per N: the lowest median (described), rule v2's statement on the fixed sizes and, with
    adaptive cells, the size adaptive's chunks are (same_as: by mechanism); across N the one
    size every N's settled statement names, and adaptive's step over each N's answer. `same_as`
    (N: fixed size) where the caller knows it; a fan-out's cells say it themselves
    (same_chunks). `control`: the size of the A/A control (noise_floor), if the scenario ran
    one: where its interval excludes 1, that N's statement is not settled."""
    fixed = [b for b in bufs if b != "adaptive"]
    floor = noise_floor(runs, replicas, shape, proto, control) if control else []
    bad_floor = {f["replicas"] for f in floor if f["excludes_one"]}
    per_n = []
    for n in replicas:
        known = [b for b in fixed if runs_of(runs, shape, proto, n, b, key)]
        if not known:
            continue
        med = {b: sweeplib.median(runs_of(runs, shape, proto, n, b, key)) for b in known}
        best = min(known, key=med.get)
        v = studyjudge.judge({proto: {size_bytes(b): c for b, c in
                                      series(runs, shape, proto, n, known, key).items()}})
        label = {size_bytes(b): b for b in known}.get(v.size)
        row = {"replicas": n, "best": best, "best_cpu_s_per_gib": med[best],
               "ratios": {b: med[b] / med[best] for b in known}, "answer": label,
               "state": v.state, "words": v.words(), "more": v.more}
        if n in bad_floor:
            row.update(floor_excludes_one=True, state="open")
        if runs_of(runs, shape, proto, n, "adaptive", key):
            row["adaptive"] = {"same_as": (same_as or {}).get(n)
                               or same_chunks(runs, shape, proto, n, fixed)}
        per_n.append(row)
    settled = [r for r in per_n if r["state"] in ("ended", "all")]
    answers = {r["answer"] for r in settled}
    one = sorted(answers) if per_n and len(settled) == len(per_n) and len(answers) == 1 else []
    step = adaptive_step(runs, [r for r in per_n if r["replicas"] not in bad_floor], shape,
                         proto, key)
    return {"shape": shape, "proto": proto, "per_n": per_n, "control": control,
            "noise_floor": floor, "spread_cause": spread_cause(runs, replicas, bufs, shape, proto),
            "one_size_for_every_n": one, "adaptive_step": step}


def conns_cells(rows):
    """A many-connections sweep (sweeplib.load's rows) as verdict cells of the shape
    "independent": per cell, each measured run's sender + receiver CPU per GiB with its round,
    and the sender's peak buffer memory (the median over runs; one connection without a group:
    its buffer)."""
    cells = {}
    for r in rows:
        buf = "adaptive" if r["label"] == "adaptive" else r["label"].lower()
        group = r["group"] or {}
        memory = group.get("peak_buffer_bytes", {}).get("sender", r["buf"] * r["conns"])
        cid = cell_id({"shape": "independent", "proto": r["proto"], "replicas": r["conns"],
                       "buf": buf})
        rounds = r.get("rounds") or [None] * len(r["total_cpu_runs"])
        cells[cid] = [{"cpu_s_per_gib": c, "peak_buffer_bytes": memory, "round": k}
                      for c, k in zip(r["total_cpu_runs"], rounds)]
    return cells


def conns_verdicts(rows):
    """The verdicts of a many-connections sweep, one per protocol: criterion sender + receiver
    CPU per GiB, the same rules as the fan-out writer's."""
    cells = conns_cells(rows)
    conns = sorted({r["conns"] for r in rows})
    fixed = sorted({r["label"].lower() for r in rows if r["label"] != "adaptive"},
                   key=size_bytes)
    bufs = fixed + (["adaptive"] if any(r["label"] == "adaptive" for r in rows) else [])
    return [verdict(cells, conns, bufs, "independent", p, key="cpu_s_per_gib",
                    same_as=adaptive_same_as(rows, p))
            for p in sorted({r["proto"] for r in rows})]


def adaptive_same_as(rows, proto):
    """Per connection count, the fixed size whose rows are the same work as the adaptive row
    (samework: per byte the same writes and records and, within 15%, reads)."""
    out = {}
    for a in (r for r in rows if r["proto"] == proto and r["label"] == "adaptive"):
        same = [r for r in rows if r["proto"] == proto and r["conns"] == a["conns"]
                and r["label"] != "adaptive" and samework.same_work(a, r)]
        if same:
            out[a["conns"]] = same[0]["label"].lower()
    return out


def _step_text(step):
    """Adaptive's step over the fixed answers, in words."""
    if step is None:
        return ""
    at = ", ".join(f"N={n}" for n in step["n"])
    gains = "; ".join(f"{crit} {studyjudge.bound_text(p, upper)}"
                      for crit, p, upper in step["gains"]) or "none past 10%"
    failed = "; ".join(f"N={n} {crit} {studyjudge.bound_text(p, upper)}"
                       for n, crit, p, upper in step["failed"])
    verdict = ("**adaptive replaces the fixed answer**" if step["ok"] else
               "adaptive does not replace the fixed answer")
    return (f" Adaptive against each N's fixed answer ({at}; rule v2's step: a gain past 10% in "
            f"CPU or memory, each below x1.10 at every N): gains shown: {gains}"
            + (f"; not shown below x1.10: {failed}" if failed else "") + f": {verdict}.")


def answer_text(v):
    per = "; ".join(f"N={r['replicas']}: {r['answer'] or 'none'} ({r['state']}; lowest median "
                    f"{r['best']})" for r in v["per_n"])
    if v["one_size_for_every_n"]:
        text = (f"Rule v2 names {v['one_size_for_every_n'][0]} at every N, each settled "
                f"({per}).")
    else:
        text = f"Rule v2 does not name one settled size at every N ({per})."
    same = [r for r in v["per_n"] if (r.get("adaptive") or {}).get("same_as")]
    if same:
        text += " Adaptive's chunks are a fixed size's (by mechanism): " + ", ".join(
            f"N={r['replicas']} {r['adaptive']['same_as']}" for r in same) + "."
    text += _step_text(v.get("adaptive_step"))
    return f"**{v['shape']}, {v['proto']}.** {text}{floor_text(v)}{spread_text(v)}"


def recommendation(v):
    """The chunk size this study names, for this shape and protocol (rule v2 at each N)."""
    ada = [r for r in v["per_n"] if "adaptive" in r]
    noun, many = (("buffer", "live connections") if v["shape"] == "independent"
                  else ("chunk", "replicas"))
    same = {r["adaptive"].get("same_as") for r in ada}
    head = f"{v['shape']}, {v['proto']}: "
    if ada and len(same) == 1 and None not in same:
        size = same.pop()
        return (head + f"the adaptive {noun} is a fixed {size} here (the same chunks at every "
                "N, by mechanism): " + (f"a fixed {size} {noun}, rule v2's statement at every N "
                                        "measured." if size in v["one_size_for_every_n"] else
                                        f"judge it as {size}."))
    step = v.get("adaptive_step")
    if step and step["ok"]:
        return (head + f"size the {noun} by the number of {many} (adaptive): it earns rule v2's "
                "step over the fixed answer at every N.")
    if v["one_size_for_every_n"]:
        return (head + f"a fixed {v['one_size_for_every_n'][0]} {noun} (rule v2's statement at "
                "every N measured, each settled).")
    return (head + "no one settled size at every N: " + ", ".join(
        f"N={r['replicas']}: {r['answer'] or 'none'} ({r['state']})" for r in v["per_n"]) + ".")


def sleeps(rs):
    """A cell's replicas' sleeps per GiB, median [min–max] ("" for runs from before the count)."""
    xs = [r.get("replica_sleeps_per_gib") for r in rs]
    if None in xs or not xs:
        return ""
    return f"{sweeplib.median(xs):,.0f} [{min(xs):,.0f}–{max(xs):,.0f}]"


def table(runs, replicas, bufs, shape, proto):
    # Scenarios run before the replicas' sleeps were counted carry no such column.
    counted = any("replica_sleeps_per_gib" in r for rs in runs.values() for r in rs)
    out = [f"\n### {shape}, {proto}\n",
           "| N | chunk | writer CPU s/GiB delivered (median [min–max]) | µs per chunk round "
           "| last replica done s | peak buffer memory | stalls | "
           + ("replicas' sleeps per GiB | " if counted else "") + "runs |",
           "|---:|---|---|---:|---:|---:|---:|" + ("---:|" if counted else "") + "---:|"]
    for n in replicas:
        for b in bufs:
            rs = runs.get(cell_id({"shape": shape, "proto": proto, "replicas": n, "buf": b}), [])
            if not rs:
                out.append(f"| {n} | {b} | failed | | | | |{' |' if counted else ''} 0 |")
                continue
            cpu = stat([r["writer_cpu_s_per_gib"] for r in rs])
            out.append(
                f"| {n} | {b} | {cpu['median']:.3f} [{cpu['min']:.3f}–{cpu['max']:.3f}] | "
                f"{sweeplib.median([r['writer_cpu_us_per_chunk'] for r in rs]):.1f} | "
                f"{sweeplib.median([r['last_done_s'] for r in rs]):.3f} | "
                f"{sweeplib.size_label(int(sweeplib.median([r['peak_buffer_bytes'] for r in rs])))}"
                f" | {int(sweeplib.median([r['stalls'] for r in rs]))} | "
                + (f"{sleeps(rs)} | " if counted else "") + f"{len(rs)} |")
    return "\n".join(out)
