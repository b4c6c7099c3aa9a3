"""The evidence a Valkey reviewer asks first, read from scripts/valkey-evidence's runs: each build
(each pull request of patches/upstream/, or the whole series) beside stock 9.1.2, per protocol,
mode and replica count, figure by figure, paired round by round."""
from iobench_tools.lib.judging import statslib
from iobench_tools.lib.kernel import hostid
from iobench_tools.lib.sweeps.sweeplib import median

# (key, heading, unit): every one is better lower.
FIGURES = [
    ("sync_s", "sync s", 1),
    ("writes", "writes", 1),
    ("writer_cpu_s_per_gib", "writer CPU s/GiB", 1),
    ("p50_ms", "client p50 ms", 1),
    ("p99_ms", "client p99 ms", 1),
    ("p999_ms", "client p99.9 ms", 1),
    ("child_private_dirty_bytes", "child private MiB", 1 << 20),
    ("primary_rss_bytes", "primary RSS MiB", 1 << 20),
    ("replica_buffers_bytes", "replica buffers MiB", 1 << 20),
    ("replication_buffers_bytes", "replication buffers MiB", 1 << 20),
]
# Shown where the runs have them: the writer's event-loop calls (studies before they were
# counted have none) and, on a fleet whose links differ, the sync of the replicas behind the
# fastest links and of those behind the slower.
LOOP_FIGURES = [
    # From the primary's first BGSAVE for SYNC to its last replica's sync, by its log: the sync
    # without the replicas' connect time, which quantises sync_s near a second.
    ("primary_sync_s", "primary's sync s", 1),
    ("writer_epoll_waits", "writer epoll_wait", 1),
    ("writer_epoll_ctls", "writer epoll_ctl", 1),
    ("writer_pipe_reads", "writer pipe reads", 1),
    ("fast_sync_s", "fast links' sync s", 1),
    ("slow_sync_s", "slow link's sync s", 1),
    # --load-tool open: the open-loop load's slices inside the sync's window (REPLICAOF to done).
    ("sync_p99_ms", "client p99 ms in the sync (open loop)", 1),
    ("sync_p999_ms", "client p99.9 ms in the sync (open loop)", 1),
]
# --event-loop: the primary's event loop, timed in the kernel (iobench watch --event-loop): what a
# request that arrives during an iteration waits at most, split by whether the iteration wrote
# a chunk (a large write), and each chunk's write in the loop and in the save child.
LOOP_FIGURES += [
    ("loop_write_p50_us", "loop pass with a chunk p50 µs", 1),
    ("loop_write_p99_us", "loop pass with a chunk p99 µs", 1),
    ("loop_write_p999_us", "loop pass with a chunk p99.9 µs", 1),
    ("loop_write_max_us", "loop pass with a chunk max µs", 1),
    ("loop_other_p99_us", "loop pass without p99 µs", 1),
    ("write_in_loop_p99_us", "chunk write in the loop p99 µs", 1),
    ("write_child_p99_us", "chunk write in the child p99 µs", 1),
]
LOAD_FIGURES = [f for f in FIGURES if f[0].endswith("_ms")]


def figures_of(doc):
    """The FIGURES the runs have (a --plain run has no writer's figures, a --no-load run no
    latency, an older one no shared replication buffer), and the writer's event-loop calls
    where the runs counted them."""
    runs = [r for c in doc["cells"] for r in c["runs"]]
    return [f for f in FIGURES + LOOP_FIGURES if any(f[0] in r for r in runs)]


def cell_id(c):
    if c["mode"] == "idle":
        return f"{c['proto']}-idle-{c['build']}"
    return f"{c['proto']}-{c['mode']}-n{c['replicas']}-{c['build']}"


def flat(fig):
    """A run's figures with its load's and memory's lifted to the top (one key each)."""
    out = {k: v for k, v in fig.items() if k not in ("load", "memory")}
    out.update(fig.get("load") or {})
    out.update(fig.get("memory") or {})
    return out


def compare(base, new, key):
    """new against base on one figure: medians, ratio with its 95% interval (paired over the
    rounds both ran), and a verdict (lower is better)."""
    a = [r for r in base if r.get(key) is not None]
    b = [r for r in new if r.get(key) is not None]
    out = {"base": median([r[key] for r in a]) if a else None,
           "new": median([r[key] for r in b]) if b else None, "ratio": None, "ci": None,
           "verdict": "-"}
    if len(a) < 2 or len(b) < 2 or not out["base"] or min(r[key] for r in a) <= 0:
        return out
    row = lambda rs: {"v": [r[key] for r in rs], "rounds": [r.get("round") for r in rs]}  # noqa
    ra, rb = row(a), row(b)
    if None in ra["rounds"] or None in rb["rounds"]:
        ra["rounds"] = rb["rounds"] = None
    ratio, _, (lo, hi), _, how = statslib.compare(ra, rb, key="v")
    out.update(ratio=ratio, ci=[lo, hi], how=how,
               verdict="parity within noise" if lo <= 1 <= hi else
               "lower" if hi < 1 else "higher")
    return out


def comparisons(doc):
    """Every build but the baseline (stock unless the study named another) against it, per
    protocol, mode and N (and the idle load)."""
    against = doc.get("against", "stock")
    runs = {c["id"]: c["runs"] for c in doc["cells"]}
    out = []
    for c in doc["cells"]:
        if c["build"] == against:
            continue
        base = runs.get(cell_id(dict(c, build=against)))
        if base is None:
            continue
        keys = (LOAD_FIGURES + [f for f in LOOP_FIGURES if f[0].startswith("loop_other")]
                if c["mode"] == "idle" else figures_of(doc))
        out.append({"build": c["build"], "proto": c["proto"], "mode": c["mode"],
                    "replicas": c.get("replicas"),
                    "figures": {k: compare(base, c["runs"], k) for k, _, _ in keys}})
    return out


def _fmt(x, unit):
    if x is None:
        return "-"
    x = x / unit
    return f"{x:.0f}" if x >= 100 else f"{x:.3f}" if x < 10 else f"{x:.1f}"


def _cell(f, unit):
    text = f"{_fmt(f['base'], unit)} → {_fmt(f['new'], unit)}"
    if f["ratio"] is not None:
        text += f" x{f['ratio']:.3f} [{f['ci'][0]:.3f}–{f['ci'][1]:.3f}]"
        if f["verdict"] != "parity within noise":
            text += f" {f['verdict']}"
    return text


def links_text(link):
    """The fleet's links where they differ (one rate is said by the study's README)."""
    if not link or "," not in link["rate"]:
        return ""
    rates = link["rate"].split(",")
    return (f"; links: {', '.join(f'replica {i + 1} at {r}' for i, r in enumerate(rates[:-1]))}"
            f", the others at {rates[-1]} (tbf, MTU {link['mtu']})")


def child_text(doc):
    """Where the fork child was asked to run (--child-cpu) and the CPUs it was seen on, where the
    runs sampled them (studies before they did say nothing)."""
    seen = sorted({cpu for c in doc["cells"] for r in c["runs"] for cpu in r.get("child_cpus", [])})
    asked = (f"; the fork child on CPU {doc['child_cpu']} (bgsave-cpulist)"
             if doc.get("child_cpu") is not None else "")
    return asked + (f"; the fork child seen on CPU {','.join(map(str, seen))}" if seen else "")


def load_coverage(doc):
    """Whether the load's window (from REPLICAOF) outlasted each sync: a latency said to be
    measured during a sync is only that where it did."""
    load = doc.get("load")
    syncs = [r["sync_s"] for c in doc.get("cells", []) if c.get("mode") != "idle"
             for r in c.get("runs", []) if r.get("sync_s")]
    if not load or not syncs:
        return []
    covered = sum(s <= load["seconds"] for s in syncs)
    out = [f"- the load's {load['seconds']} s window outlasted the whole sync in {covered} of "
           f"{len(syncs)} runs (the longest sync: {max(syncs):.3f} s from REPLICAOF)"]
    cut = [r for c in doc.get("cells", []) if c.get("mode") != "idle"
           for r in c.get("runs", []) if "load_outlasted_sync" in r]
    if cut:
        logged = sum(r.get("sync_window") == "primary's log" for r in cut)
        out.append(f"- the open loop's sync figures: the slices inside the primary's own window "
                   f"(its log, from the fork to its last replica online) in {logged} of "
                   f"{len(cut)} runs, else from REPLICAOF; the load outlasted that window in "
                   f"{sum(bool(r['load_outlasted_sync']) for r in cut)} of {len(cut)}, and the "
                   f"windows held {min(r['sync_requests'] for r in cut)}.."
                   f"{max(r['sync_requests'] for r in cut)} requests")
    return out


def load_line(load):
    """What the clients were: valkey-benchmark's closed loop or iobench load's open one."""
    if not load:
        return "- no client load (--no-load)"
    if load.get("tool") == "open":
        return (f"- client load: iobench load --command {load.get('command', 'get')} --conns 4 "
                f"--rate {load['rps']} for {load['seconds']} s from REPLICAOF (open loop: each "
                "request's latency from its intended send time); idle: the same load with no sync")
    return (f"- client load: valkey-benchmark -t {load.get('command', 'get')}"
            f"{' -r 100000' if load.get('command') == 'set' else ''} -c 4 --rps {load['rps']} for "
            f"{load['seconds']} s from REPLICAOF (the same build's benchmark); idle: the same "
            "load with no sync")


def host_quiet(doc):
    """What ran beside the study: the host's CPU outside its processes in each run (median,
    the worst and where), and how each run waited for a quiet host first."""
    runs = [(c["id"], r) for c in doc.get("cells", []) for r in c.get("runs", [])
            if "outside_cpu_s" in r]
    if not runs:
        return []
    worst = max(runs, key=lambda cr: cr[1]["outside_cpu_s"])
    out = [f"- the host's CPU outside the study's processes (softirq and kernel threads "
           f"included: the network's receive path is charged there, not to a process): median "
           f"{median([r['outside_cpu_s'] for _, r in runs]):.2f} s a run, at most "
           f"{worst[1]['outside_cpu_s']:.2f} s ({worst[0]} round {worst[1].get('round', 0) + 1})"]
    settled = [r for _, r in runs if "settle_s" in r]
    if settled:
        out[-1] += (f"; before each run the host was let settle (sync(2), then 0.5 s under 5% "
                    f"of a CPU): median {median([r['settle_s'] for r in settled]):.2f} s, "
                    f"quiet in {sum(bool(r['settled_quiet']) for r in settled)} of "
                    f"{len(settled)} (else 30 s and on)")
    return out


def report_md(doc):
    load = doc["load"]
    against = doc.get("against", "stock")
    figures = figures_of(doc)
    out = [f"# Valkey 9.1.2: each build beside {against}, with client latency and memory during a sync",
           "", f"- command: `{doc['command']}`",
           f"- builds: {', '.join(f'{b} (`build/valkey/9.1/{b}`)' for b in doc['builds'])}",
           hostid.host_line(doc.get("host")),
           f"- RDB: {doc['rdb_bytes']} bytes of iobench's replication stream"
           + (f" and one string of {doc['large_value_bytes']} random bytes (a write larger than "
              "a chunk)" if doc.get("large_value_bytes") else "") + f"; {doc['rounds']} "
           "rounds, every cell once per round in the experiment kernel's balanced order; "
           f"placement --cpus {doc['cpus']} (primary, replicas; the load runs on the replicas' "
           f"CPU){child_text(doc)}; {doc['where']}" + links_text(doc.get("link")),
           load_line(load),
           "- memory: peaks sampled every 20 ms while the sync runs (the fork child's private "
           "dirty pages from smaps_rollup; INFO memory's mem_clients_slaves for the replicas' "
           + ("output buffers and mem_total_replication_buffers for the shared replication "
              "buffer, every 100 ms)" if FIGURES[-1] in figures else "buffers, every 100 ms)"),
           f"- each cell: {against} → build medians, the ratio build/{against} with its 95% interval "
           "(paired round by round), and 'lower' or 'higher' where the interval excludes 1"]
    out += load_coverage(doc) + host_quiet(doc)
    if doc.get("plain"):
        out.append("- plain (--plain): no iobench watch on the primary or the replicas, so no "
                   "instrument sits in their way; the sync's time is from REPLICAOF to every "
                   "replica's link up, and the writer's writes, CPU and event loop are not "
                   "measured")
    if doc.get("event_loop"):
        out.append("- event loop (--event-loop): iobench watch --event-loop on the primary "
                   "alone (no replica's figures); a pass's busy time bounds what it adds to a "
                   "request that arrives during it. Traced cells: take latency from --plain "
                   "cells")
    out.append("")
    heads = [h for _, h, _ in figures]
    for build in doc["builds"]:
        comps = [c for c in doc["comparisons"] if c["build"] == build]
        if not comps:
            continue
        out += [f"## {build} against {against}", "",
                "| proto | mode | N | " + " | ".join(heads) + " |",
                "|---|---|---|" + "---|" * len(heads)]
        for c in comps:
            cells = [(_cell(c["figures"][k], u) if k in c["figures"] else "")
                     for k, _, u in figures]
            out.append(f"| {c['proto']} | {c['mode']} | {c['replicas'] or '-'} | "
                       + " | ".join(cells) + " |")
        out.append("")
    if doc["failures"]:
        out += ["## Failed runs", ""] + [f"- {x}" for x in doc["failures"]]
    return "\n".join(out) + "\n"
