"""Reading a fan-out scenario (results/<name>/fanout.json, written by scripts/fanout-scenario):
the per-N verdicts, the answer and the recommendation, shared by fanout-scenario and recommend.
The criterion is the writer thread's CPU per GiB delivered (N x bytes), each cell's median of
its rounds; every size (adaptive too) is set against the best fixed size with the 95% bootstrap
interval of the ratio (round by round where the runs record their round, as sweeps are judged):
a size is "within the tolerance" unless that interval lies above it."""
from iobench_tools.lib.judging import samework
from iobench_tools.lib.sweeps import sweeplib
from iobench_tools.lib.sweeps.fanoutcells import (cell_id, cell_runs, floor_text, noise_floor, runs_of,
                                           spread_cause, spread_text)
from iobench_tools.lib.kernel.iobenchlib import parse_size as size_bytes, stat


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


def adaptive_row(cell, best, same_as, near, mem, tolerance):
    """Adaptive against the best fixed size at one N: measured, or, when its chunks are a fixed
    size's (same_as), that size's standing ("by mechanism"); and against the memory frontier:
    the best fixed size that used no more memory than adaptive did (frontier_of)."""
    lo, hi = sweeplib.compare(cell[best], cell["adaptive"])[2]
    memory, best_memory = sweeplib.median(mem["adaptive"]), sweeplib.median(mem[best])
    ratio = (sweeplib.median(cell["adaptive"]["total_cpu_runs"])
             / sweeplib.median(cell[best]["total_cpu_runs"]))
    row = {"ratio": ratio, "ci": [lo, hi], "within": hi <= 1 + tolerance,
           "outside": lo > 1 + tolerance, "memory_bytes": memory,
           "best_memory_bytes": best_memory, "no_more_memory": memory <= best_memory,
           "memory_saved_bytes": max(0, best_memory - memory)}
    if same_as:
        row.update(same_as=same_as, within=same_as in near, outside=same_as not in near)
    row.update(frontier_of(cell, mem, memory, tolerance, same_as))
    return row


def frontier_of(cell, mem, memory, tolerance, same_as=None):
    """The fair comparison where memory binds: the fixed size with the lowest median cost among
    those whose peak memory was no more than adaptive's, and adaptive's ratio to it with its 95%
    interval ("frontier": None when every fixed size used more memory than adaptive did). An
    adaptive writer whose chunks are a fixed size's (same_as) is that size: the frontier itself
    when it is that size (by mechanism), else set against it through that size's runs."""
    fits = [b for b in cell if b != "adaptive" and cell[b]["total_cpu_runs"] and mem.get(b)
            and sweeplib.median(mem[b]) <= memory]
    if not fits:
        return {"frontier": None}
    f = min(fits, key=lambda b: sweeplib.median(cell[b]["total_cpu_runs"]))
    out = {"frontier": f, "frontier_memory_bytes": sweeplib.median(mem[f])}
    if same_as == f:
        return dict(out, frontier_ratio=1.0, frontier_ci=[1.0, 1.0], frontier_by_mechanism=True,
                    within_frontier=True, outside_frontier=False)
    subject = cell[same_as] if same_as in cell else cell["adaptive"]
    ratio, _, (lo, hi), _, _ = sweeplib.compare(cell[f], subject)
    return dict(out, frontier_ratio=ratio, frontier_ci=[lo, hi],
                within_frontier=hi <= 1 + tolerance, outside_frontier=lo > 1 + tolerance)


def miss_cause(a):
    """Why adaptive missed its frontier, where its chunks say it: they are a fixed size's."""
    if not a.get("same_as"):
        return ""
    return (f": the rule's chunk here is {a['same_as']} (the same chunks), and {a['same_as']} "
            f"costs more than {a['frontier']} at this N, so a fixed {a['same_as']} misses the "
            "same way: the rule's size, not its adapting, is what misses")


def frontier_text(ada, pct):
    """Adaptive against the memory frontier at each N, and the memory it saves against the best
    fixed size overall."""
    parts, within = [], 0
    for r in ada:
        a = r["adaptive"]
        saved = (f", {sweeplib.size_label(int(a['memory_saved_bytes']))} less than the best "
                 "fixed size" if a["memory_saved_bytes"] else "")
        if a.get("frontier") is None:
            parts.append(f"N={r['replicas']}: less memory than any fixed size "
                         f"({sweeplib.size_label(int(a['memory_bytes']))}{saved})")
            continue
        within += a["within_frontier"]
        if a.get("frontier_by_mechanism"):
            parts.append(f"N={r['replicas']}: the same chunks as {a['frontier']}, the frontier "
                         f"(by mechanism; {sweeplib.size_label(int(a['memory_bytes']))}{saved})")
            continue
        parts.append(f"N={r['replicas']}: x{a['frontier_ratio']:.3f} [{a['frontier_ci'][0]:.3f}, "
                     f"{a['frontier_ci'][1]:.3f}] of {a['frontier']} "
                     f"({sweeplib.size_label(int(a['frontier_memory_bytes']))} against "
                     f"{sweeplib.size_label(int(a['memory_bytes']))}{saved})"
                     + ("" if a["within_frontier"] else
                        " — above it by more than " + pct + miss_cause(a) if a["outside_frontier"] else
                        " — undecided: the A/A interval excludes 1 here"
                        if a.get("undecided_by_floor") else " — not shown within " + pct))
    judged = sum(1 for r in ada if r["adaptive"].get("frontier") is not None)
    return (f" Against the memory frontier (the best fixed size that used no more memory than "
            f"adaptive did): within {pct} at {within} of {judged} N; " + "; ".join(parts) + ".")


def undecided_by_floor(row):
    """An A/A interval that excludes 1 at this N: adaptive's verdicts there are not decided."""
    a = row.get("adaptive")
    if a and not a.get("same_as"):
        a.update(within=False, outside=False, undecided_by_floor=True)
        if a.get("frontier") is not None and not a.get("frontier_by_mechanism"):
            a.update(within_frontier=False, outside_frontier=False)


def verdict(runs, replicas, bufs, shape, proto, tolerance, key="writer_cpu_s_per_gib",
            same_as=None, control=None):
    """Per N: the best fixed size, the sizes within `tolerance` of it, adaptive against it; and
    the fixed size whose worst ratio to the best over every N is smallest (minimax). `same_as`
    (N: fixed size) names the size adaptive is the same work as, where the caller knows it; a
    fan-out's cells say it themselves (same_chunks). `control`: the size of the A/A control
    (noise_floor), if the scenario ran one."""
    fixed = [b for b in bufs if b != "adaptive"]
    floor = noise_floor(runs, replicas, shape, proto, control) if control else []
    bad_floor = {f["replicas"] for f in floor if f["excludes_one"]}
    per_n, near_sets, worst = [], [], {b: 1.0 for b in fixed}
    for n in replicas:
        cpu = {b: runs_of(runs, shape, proto, n, b, key) for b in bufs}
        mem = {b: runs_of(runs, shape, proto, n, b, "peak_buffer_bytes") for b in bufs}
        known = [b for b in fixed if cpu[b]]
        if not known:
            continue
        med = {b: sweeplib.median(cpu[b]) for b in known}
        best = min(known, key=med.get)
        # A size is as good as the best unless its runs show it worse by more than the
        # tolerance: the 95% bootstrap interval of its ratio to the best lies above 1 + tolerance.
        cell = {b: cell_runs(runs, shape, proto, n, b, key) for b in bufs}
        near = [b for b in known if b == best
                or sweeplib.compare(cell[best], cell[b])[2][0] <= 1 + tolerance]
        for b in fixed:
            worst[b] = max(worst[b], med[b] / med[best]) if b in med else float("inf")
        row = {"replicas": n, "best": best, "within_tolerance": near,
               "best_cpu_s_per_gib": med[best],
               "ratios": {b: med[b] / med[best] for b in known}}
        if cpu.get("adaptive"):
            same = (same_as or {}).get(n) or same_chunks(runs, shape, proto, n, fixed)
            row["adaptive"] = adaptive_row(cell, best, same, near, mem, tolerance)
        if n in bad_floor:
            row["floor_excludes_one"] = True
            undecided_by_floor(row)
        per_n.append(row)
        near_sets.append(set(near))
    common = set.intersection(*near_sets) if near_sets else set()
    minimax = min(fixed, key=lambda b: (worst[b], size_bytes(b))) if fixed else None
    return {"shape": shape, "proto": proto, "tolerance": tolerance, "per_n": per_n,
            "control": control, "noise_floor": floor,
            "spread_cause": spread_cause(runs, replicas, bufs, shape, proto),
            "one_size_for_every_n": sorted(common, key=size_bytes),
            "minimax": minimax, "minimax_worst_ratio": worst.get(minimax)}


def conns_cells(rows):
    """A many-connections sweep (sweeplib.load's rows) as verdict cells of the shape
    "independent": per cell, each measured run's sender + receiver CPU per GiB, and the sender's
    peak buffer memory (the median over runs; one connection without a group: its buffer)."""
    cells = {}
    for r in rows:
        buf = "adaptive" if r["label"] == "adaptive" else r["label"].lower()
        group = r["group"] or {}
        memory = group.get("peak_buffer_bytes", {}).get("sender", r["buf"] * r["conns"])
        cid = cell_id({"shape": "independent", "proto": r["proto"], "replicas": r["conns"],
                       "buf": buf})
        cells[cid] = [{"cpu_s_per_gib": c, "peak_buffer_bytes": memory}
                      for c in r["total_cpu_runs"]]
    return cells


def conns_verdicts(rows, tolerance):
    """The verdicts of a many-connections sweep, one per protocol: criterion sender + receiver
    CPU per GiB, the same rules as the fan-out writer's."""
    cells = conns_cells(rows)
    conns = sorted({r["conns"] for r in rows})
    fixed = sorted({r["label"].lower() for r in rows if r["label"] != "adaptive"},
                   key=size_bytes)
    bufs = fixed + (["adaptive"] if any(r["label"] == "adaptive" for r in rows) else [])
    return [verdict(cells, conns, bufs, "independent", p, tolerance, key="cpu_s_per_gib",
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


def _adaptive_detail(rows):
    return "; ".join(
        f"N={r['replicas']} " + (f"is {r['adaptive']['same_as']} by mechanism (the same chunks), "
                                 if r["adaptive"].get("same_as") else "")
        + f"x{r['adaptive']['ratio']:.3f} "
        f"[{r['adaptive']['ci'][0]:.3f}, {r['adaptive']['ci'][1]:.3f}], memory "
        f"{sweeplib.size_label(int(r['adaptive']['memory_bytes']))} vs "
        f"{sweeplib.size_label(int(r['adaptive']['best_memory_bytes']))}" for r in rows)


def answer_text(v):
    pct = f"{v['tolerance'] * 100:g}%"
    moves = ", ".join(f"N={r['replicas']}: {r['best']}" for r in v["per_n"])
    if v["one_size_for_every_n"]:
        text = (f"One size is within {pct} of the best at every N: "
                f"{' or '.join(v['one_size_for_every_n'])} (best per N: {moves}).")
    else:
        text = (f"No one size is within {pct} of the best at every N: the best moves ({moves}); "
                f"the size that loses least at its worst N is {v['minimax']} "
                f"(x{v['minimax_worst_ratio']:.3f} of the best there).")
    ada = [r for r in v["per_n"] if "adaptive" in r]
    if ada:
        good = [r for r in ada if r["adaptive"]["within"] and r["adaptive"]["no_more_memory"]]
        unsure = [r for r in ada if not r["adaptive"]["within"] and not r["adaptive"]["outside"]
                  and not r["adaptive"].get("undecided_by_floor")]
        floored = [r for r in ada if r["adaptive"].get("undecided_by_floor")]
        if len(good) == len(ada):
            text += (f" Adaptive is within {pct} of the best fixed size at every N with no more "
                     f"memory ({_adaptive_detail(ada)}).")
        else:
            above = [r for r in ada if r["adaptive"]["outside"]]
            more = [r for r in ada if not r["adaptive"]["no_more_memory"]]
            text += (f" Adaptive is not within {pct} of the best with no more memory at every N: "
                     f"it is at {len(good)} of {len(ada)} ({len(unsure)} undecided: the interval "
                     f"reaches past {pct}; {len(above)} clearly above it; {len(more)} with more "
                     f"memory" + (f"; {len(floored)} undecided by the A/A control"
                                  if floored else "") + f"); {_adaptive_detail(ada)}.")
        text += frontier_text(ada, pct)
    return f"**{v['shape']}, {v['proto']}.** {text}{floor_text(v)}{spread_text(v)}"


def recommendation(v):
    """The chunk size a replication design should default to, for this shape and protocol."""
    ada = [r for r in v["per_n"] if "adaptive" in r]
    noun, many = (("buffer", "live connections") if v["shape"] == "independent"
                  else ("chunk", "replicas"))
    same = {r["adaptive"].get("same_as") for r in ada}
    if ada and len(same) == 1 and None not in same:
        size = same.pop()
        return (f"{v['shape']}, {v['proto']}: the adaptive {noun} is a fixed {size} here (the "
                f"same chunks at every N, by mechanism): "
                + (f"a fixed {size} {noun}, within {v['tolerance'] * 100:g}% of the best at "
                   "every N measured." if size in v["one_size_for_every_n"] else
                   f"judge it as {size}: " + ", ".join(
                       f"N={r['replicas']}: {r['best']}" for r in v["per_n"]) + " best."))
    if ada and all(r["adaptive"]["within"] and r["adaptive"]["no_more_memory"] for r in ada):
        return (f"{v['shape']}, {v['proto']}: size the {noun} by the number of {many} "
                "(adaptive): as cheap as the best fixed size at every N, with no more memory.")
    if v["one_size_for_every_n"]:
        size = v["one_size_for_every_n"][0]
        return (f"{v['shape']}, {v['proto']}: a fixed {size} {noun} (the smallest size within "
                f"{v['tolerance'] * 100:g}% of the best at every N measured).")
    judged = [r for r in ada if r["adaptive"].get("frontier") is not None]
    if ada and judged and all(r["adaptive"]["within_frontier"] for r in judged):
        saved = max(r["adaptive"]["memory_saved_bytes"] for r in ada)
        return (f"{v['shape']}, {v['proto']}: size the {noun} by the number of {many} "
                f"(adaptive) where memory binds: within {v['tolerance'] * 100:g}% of the best "
                f"fixed size that fits in its memory at every N"
                + (f", saving up to {sweeplib.size_label(int(saved))} against the best fixed "
                   "size overall" if saved else "") + ".")
    return (f"{v['shape']}, {v['proto']}: no fixed size is best at every N; {v['minimax']} "
            f"loses least at its worst N (x{v['minimax_worst_ratio']:.3f}), and the best size "
            "moves with N: " + ", ".join(f"N={r['replicas']}: {r['best']}" for r in v["per_n"])
            + ".")


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
