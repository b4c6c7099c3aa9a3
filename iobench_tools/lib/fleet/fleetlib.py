"""The answer across a fleet's pairs (results/NAME/fleet.json, written by fleet/playbook.yml):
each pair's knee from its own sweep, and the knee per instance type and across every pair from
their runs pooled — each pair's runs relative to the median of its own lowest cell, so a faster
host does not pass for noise — with the pairs that disagree named."""
import json
import os

from iobench_tools.lib.kernel.iobenchlib import median
from iobench_tools.lib.sweeps import fanoutlib
from iobench_tools.lib.sweeps import sweeplib


def load(fleet_dir, cost):
    """(fleet.json, [pair]): each pair its record (pair.json: status, error, hosts, instance
    type), its manifest and one-connection rows (none when it never swept)."""
    fleet = json.load(open(os.path.join(fleet_dir, "fleet.json")))
    pairs = []
    for p in fleet["pairs"]:
        d = os.path.join(fleet_dir, p["name"])
        record_path = os.path.join(d, "pair.json")
        record = (json.load(open(record_path)) if os.path.exists(record_path)
                  else dict(p, status="not run", error="no pair.json: the playbook did not finish"))
        manifest, rows, fanout = None, [], None
        if os.path.exists(os.path.join(d, "manifest.json")):
            manifest, rows = sweeplib.load(d, "recommend", cost)
        if os.path.exists(os.path.join(d, "fanout.json")):  # a primary and several replicas
            fanout = json.load(open(os.path.join(d, "fanout.json")))
        rows = [r for r in rows if r["conns"] == 1 and r["group"] is None]
        pairs.append({"record": record, "dir": d, "manifest": manifest, "rows": rows,
                      "fanout": fanout})
    return fleet, pairs


def groups(rows):
    """{(placement, proto): rows}: the cells a knee is judged among."""
    out = {}
    for r in rows:
        out.setdefault((r["placement"], r["proto"]), []).append(r)
    return out


def decide(rs, tolerance):
    """(knee size or None, words), as scripts/recommend judges one sweep's protocol."""
    v = sweeplib.decide_knee(rs, tolerance)
    if v["edge"]:
        return None, f"no knee: {v['edge']}"
    k, sure, why = v["knee"], v["sure"], v["words"]
    label = sweeplib.size_label(k["buf"])
    if sure:
        return k["buf"], f"**{label}** ({why})"
    return None, f"no knee with confidence ({label} the likeliest; {why})"


def relative(rs):
    """The rows with each run's cost over the median of the lowest cell's runs."""
    base = min(median(r["total_cpu_runs"]) for r in rs)
    if base <= 0:  # a cell measured as free (a clock too coarse for its run): kept as it is
        return rs
    return [dict(r, total_cpu_runs=[x / base for x in r["total_cpu_runs"]]) for r in rs]


def pooled(members, key):
    """One row per size holding the relative runs of every member pair that measured the sizes
    all the others did; returns (rows, names pooled, names left out and why)."""
    have = {m["record"]["name"]: {r["buf"]: r for r in groups(m["rows"]).get(key, [])}
            for m in members}
    sizes = set().union(*(set(h) for h in have.values())) if have else set()
    full = [n for n, h in have.items() if h and set(h) == sizes]
    out = [f"{n} ({'no cells' if not h else 'sizes missing: a partial sweep'})"
           for n, h in have.items() if n not in full]
    rows = []
    for buf in sorted(sizes):
        runs, rounds = [], []
        for n in full:
            rel = {r["buf"]: r for r in relative(list(have[n].values()))}
            runs += rel[buf]["total_cpu_runs"]
            # A pair's rounds stay its own: two sizes are compared round by round within a pair.
            rounds = None if rounds is None or rel[buf].get("rounds") is None else \
                rounds + [f"{n}:{k}" for k in rel[buf]["rounds"]]
        if full:
            rows.append(dict(have[full[0]][buf], total_cpu_runs=runs, runs=len(runs),
                             rounds=rounds))
    return rows, full, out


def pair_knees(pair, tolerance):
    return {key: decide(rs, tolerance) for key, rs in groups(pair["rows"]).items()}


def judged_lines(title, members, knees, tolerance):
    """A pooled judgement per (placement, protocol) for these pairs, with who disagrees.
    Returns (lines, {key: knee or None})."""
    members = [m for m in members if not m["fanout"]]  # one writer, N replicas: judged apart
    keys = sorted({k for m in members for k in groups(m["rows"])})
    lines, picks = [f"### {title}", ""], {}
    if not keys:
        return lines + ["No pair of these finished a cell: nothing to judge.", ""], picks
    for key in keys:
        rows, full, left_out = pooled(members, key)
        knee, words = decide(rows, tolerance) if len(rows) >= 1 else (None, "no cells")
        picks[key] = knee
        runs = min(r["runs"] for r in rows) if rows else 0
        lines.append(f"- {key[1].upper()} ({key[0]}), {len(full)} pair(s) pooled, at least "
                     f"{runs} runs per size: {words}.")
        own = {n: knees[n].get(key, (None, "not measured")) for n in full}
        disagree = [f"{n} ({sweeplib.size_label(k) if k else 'no sure knee'})"
                    for n, (k, _) in own.items() if k != knee]
        if disagree:
            lines.append(f"  Pairs whose own sweep says otherwise: {', '.join(disagree)}.")
        if left_out:
            lines.append(f"  Left out: {', '.join(left_out)}.")
    return lines + [""], picks


def default_line(picks, scope):
    """The one-connection default from the knees of one scope's protocols."""
    if not picks or any(k is None for k in picks.values()):
        undecided = [f"{p.upper()}" for (_, p), k in sorted(picks.items()) if k is None]
        return (f"**No default {scope}**" + (f": no sure knee for {', '.join(undecided)}"
                                             if undecided else ": no cells") + ".")
    one = max(picks.values())
    return (f"**Default: {sweeplib.size_label(one)}** — the largest knee across "
            + ", ".join(f"{p.upper()} {sweeplib.size_label(k)}"
                        for (_, p), k in sorted(picks.items())) + ".")


def fanout_lines(pairs, tolerance):
    """The pairs of one primary and several replicas: each one's one-writer answer (their
    figures are the writer thread's, not comparable with a two-host sweep's: not pooled)."""
    lines = []
    for p in pairs:
        doc = p["fanout"]
        if not doc:
            continue
        if not lines:
            lines = ["", "## One primary, several replicas", "",
                     "Judged each on its own by the one-writer criterion (docs/fanout.md): "
                     "not pooled with the two-host sweeps.", ""]
        for shape in doc["shapes"]:
            for proto in doc["protos"]:
                v = fanoutlib.verdict(doc["cells"], doc["replicas"], doc["bufs"], shape, proto,
                                      tolerance)
                lines.append(f"- {p['record']['name']}: {fanoutlib.recommendation(v)}")
    return lines


def report(fleet_dir, tolerance, cost):
    fleet, pairs = load(fleet_dir, cost)
    knees = {p["record"]["name"]: pair_knees(p, tolerance) for p in pairs}
    protos = sorted({k[1] for kn in knees.values() for k in kn})
    lines = [f"# Buffer-size recommendation across a fleet: {fleet['name']}", "",
             f"- {len(pairs)} pairs in {len(fleet.get('waves', []))} wave(s) (pairs that share "
             f"a host run in different waves): "
             + "; ".join(", ".join(w) for w in fleet.get("waves", [])),
             f"- each pair: `scripts/sweep PAIR --connect REPLICA {fleet.get('sweep_args', '')}`"
             f" from its primary",
             f"- started {fleet.get('started')}, finished {fleet.get('finished') or 'not yet'}",
             "",
             "How: each pair's knee is judged on its own runs as scripts/recommend judges one "
             "sweep (its recommendation.md has the tables). Per instance type and across the "
             "fleet, the runs of every pair that measured every size are pooled, each relative "
             "to the median of its own pair's lowest cell, and judged the same way: a knee is "
             "named only when the pooled runs decide it.", "", "## Pairs", "",
             "| pair | instance type | primary → replica(s) | status | "
             + " | ".join(f"{p.upper()} knee" for p in protos) + " |",
             "|---|---|---|---|" + "---|" * len(protos)]
    for p in pairs:
        rec = p["record"]
        status = rec.get("status", "?") + (f": {rec['error']}" if rec.get("error") else "")
        cells = [c for c in (p["manifest"] or {}).get("cells", [])]
        failed = [c for c in cells if c.get("status") != "ok"]
        if p["fanout"]:
            status += f" (one writer, {len(rec.get('replicas', []))} replicas: below)"
            failed = []
        if failed:
            kept = len([f for f in os.listdir(os.path.join(p["dir"], "cells"))
                        if f.endswith(".json") and ".r" in f])
            status += (f" ({len(cells) - len(failed)} of {len(cells)} cells finished; {kept} "
                       f"run{'s' if kept != 1 else ''} kept in {rec['name']}/cells/)")
        kn = knees[rec["name"]]
        shown = []
        for proto in protos:
            found = [k for (_, pr), (k, _) in kn.items() if pr == proto]
            shown.append("–" if not found else
                         " / ".join(sweeplib.size_label(k) if k else "no sure knee" for k in found))
        lines.append(f"| {rec['name']} | {rec.get('instance_type', '?')} | {rec.get('primary')} → "
                     f"{', '.join(rec.get('replicas', []))} | {status} | "
                     + " | ".join(shown) + " |")
    lines += fanout_lines(pairs, tolerance)
    lines += ["", "## Per instance type", ""]
    types = sorted({p["record"].get("instance_type", "?") for p in pairs})
    type_defaults = {}
    for t in types:
        members = [p for p in pairs if p["record"].get("instance_type", "?") == t]
        body, picks = judged_lines(f"{t}: {', '.join(m['record']['name'] for m in members)}",
                                   members, knees, tolerance)
        type_defaults[t] = max(picks.values()) if picks and None not in picks.values() else None
        lines += body + [f"- {default_line(picks, 'for ' + t)}", ""]
    lines += ["## Across the fleet", ""]
    body, picks = judged_lines(f"All {len(pairs)} pairs", pairs, knees, tolerance)
    lines += body + [f"- {default_line(picks, 'across the fleet')}"]
    decided = {t: d for t, d in type_defaults.items() if d}
    if len(set(decided.values())) > 1:
        lines.append("- **The instance types disagree**: " + ", ".join(
            f"{t} {sweeplib.size_label(d)}" for t, d in decided.items())
            + ". Choose per instance type, or the largest if one default must serve them all.")
    return "\n".join(lines) + "\n", pairs
