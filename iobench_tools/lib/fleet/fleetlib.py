"""The answer across a fleet's pairs (results/NAME/fleet.json, written by fleet/playbook.yml):
each pair's statement from its own sweep (studyjudge: rule v2 on its rounds, as scripts/recommend
reads one sweep), and per instance type and across every pair the size every pair names, or the
pairs that differ: pairs are different hosts, and hosts are never pooled as one."""
import json
import os

from iobench_tools.lib.judging import studyjudge
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
    """{(placement, proto): rows}: the cells a statement is judged among."""
    out = {}
    for r in rows:
        out.setdefault((r["placement"], r["proto"]), []).append(r)
    return out


def decide(rs):
    """(the size or None, words): the pair's statement, as scripts/recommend makes one sweep's
    (studyjudge: rule v2 on its rounds); None unless settled inside the range."""
    v = studyjudge.judge({rs[0]["proto"]: studyjudge.of_rows(rs)})
    if v.state == "unread":
        return None, f"no statement: {v.words()}"
    label = sweeplib.size_label(v.size)
    if v.state == "ended":
        return v.size, f"**{label}** ({v.words()})"
    return None, f"no settled statement ({label} so far; {v.words()})"


def pair_statements(pair):
    return {key: decide(rs) for key, rs in groups(pair["rows"]).items()}


def judged_lines(title, members, statements):
    """Per (placement, protocol) for these pairs: the size every pair's own statement names, or
    the pairs that differ. Pairs are hosts: their runs are never pooled as one host's (a
    design across hosts is scripts/design-table's). Returns (lines, {key: size or None})."""
    members = [m for m in members if not m["fanout"]]  # one writer, N replicas: judged apart
    keys = sorted({k for m in members for k in groups(m["rows"])})
    lines, picks = [f"### {title}", ""], {}
    if not keys:
        return lines + ["No pair of these finished a cell: nothing to judge.", ""], picks
    for key in keys:
        own = {m["record"]["name"]: statements[m["record"]["name"]].get(key, (None, "not measured"))
               for m in members}
        sizes = {k for k, _ in own.values()}
        picks[key] = next(iter(sizes)) if len(sizes) == 1 else None
        named = ", ".join(f"{n} {sweeplib.size_label(k) if k else 'none settled'}"
                          for n, (k, _) in sorted(own.items()))
        if picks[key] is not None:
            lines.append(f"- {key[1].upper()} ({key[0]}): every pair's own statement names "
                         f"**{sweeplib.size_label(picks[key])}** ({len(own)} pair(s)).")
        else:
            lines.append(f"- {key[1].upper()} ({key[0]}): the pairs do not name one size "
                         f"({named}): no size for all of them.")
    return lines + [""], picks


def default_line(picks, scope):
    """The one-connection default from the statements of one scope's protocols."""
    if not picks or any(k is None for k in picks.values()):
        undecided = [f"{p.upper()}" for (_, p), k in sorted(picks.items()) if k is None]
        return (f"**No default {scope}**" + (f": no settled statement for {', '.join(undecided)}"
                                             if undecided else ": no cells") + ".")
    one = max(picks.values())
    return (f"**Default: {sweeplib.size_label(one)}** — the largest statement across "
            + ", ".join(f"{p.upper()} {sweeplib.size_label(k)}"
                        for (_, p), k in sorted(picks.items())) + ".")


def fanout_lines(pairs):
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
                v = fanoutlib.verdict(doc["cells"], doc["replicas"], doc["bufs"], shape, proto)
                lines.append(f"- {p['record']['name']}: {fanoutlib.recommendation(v)}")
    return lines


def report(fleet_dir, cost):
    fleet, pairs = load(fleet_dir, cost)
    statements = {p["record"]["name"]: pair_statements(p) for p in pairs}
    protos = sorted({k[1] for kn in statements.values() for k in kn})
    lines = [f"# Buffer-size recommendation across a fleet: {fleet['name']}", "",
             f"- {len(pairs)} pairs in {len(fleet.get('waves', []))} wave(s) (pairs that share "
             f"a host run in different waves): "
             + "; ".join(", ".join(w) for w in fleet.get("waves", [])),
             f"- each pair: `scripts/sweep PAIR --connect REPLICA {fleet.get('sweep_args', '')}`"
             f" from its primary",
             f"- started {fleet.get('started')}, finished {fleet.get('finished') or 'not yet'}",
             "",
             "How: each pair's statement is rule v2 on its own rounds, as scripts/recommend "
             "reads one sweep (its recommendation.md has the tables); a size counts only when "
             "settled inside the range. Per instance type and across the fleet, a size is "
             "named when every pair's own statement names it; pairs are hosts, never pooled "
             "as one (a design across hosts: scripts/design-table).", "", "## Pairs", "",
             "| pair | instance type | primary → replica(s) | status | "
             + " | ".join(f"{p.upper()} statement" for p in protos) + " |",
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
        kn = statements[rec["name"]]
        shown = []
        for proto in protos:
            found = [k for (_, pr), (k, _) in kn.items() if pr == proto]
            shown.append("–" if not found else
                         " / ".join(sweeplib.size_label(k) if k else "none settled" for k in found))
        lines.append(f"| {rec['name']} | {rec.get('instance_type', '?')} | {rec.get('primary')} → "
                     f"{', '.join(rec.get('replicas', []))} | {status} | "
                     + " | ".join(shown) + " |")
    lines += fanout_lines(pairs)
    lines += ["", "## Per instance type", ""]
    types = sorted({p["record"].get("instance_type", "?") for p in pairs})
    type_defaults = {}
    for t in types:
        members = [p for p in pairs if p["record"].get("instance_type", "?") == t]
        body, picks = judged_lines(f"{t}: {', '.join(m['record']['name'] for m in members)}",
                                   members, statements)
        type_defaults[t] = max(picks.values()) if picks and None not in picks.values() else None
        lines += body + [f"- {default_line(picks, 'for ' + t)}", ""]
    lines += ["## Across the fleet", ""]
    body, picks = judged_lines(f"All {len(pairs)} pairs", pairs, statements)
    lines += body + [f"- {default_line(picks, 'across the fleet')}"]
    decided = {t: d for t, d in type_defaults.items() if d}
    if len(set(decided.values())) > 1:
        lines.append("- **The instance types disagree**: " + ", ".join(
            f"{t} {sweeplib.size_label(d)}" for t, d in decided.items())
            + ". Choose per instance type, or the largest if one default must serve them all.")
    return "\n".join(lines) + "\n", pairs
