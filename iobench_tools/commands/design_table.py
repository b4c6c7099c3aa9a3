"""The design's answer across hosts and links (issue #66, docs/design-rule-v2-links.md): reads
sweeps of several hosts and links, groups them by the host their cells ran on and the link their
manifest names (never pooling two), and for each group gives rule v2's own answer (CPU, and the
real server's harms where an --evidence gives them for that host and link), the same at the level a union over the host's links
allows, and whether the design's answer holds there: not beaten (no larger size replaces it by a
direct step) and not harmful (against each smaller size, in each protocol, its CPU's one-sided
upper bound below x1.10). Across hosts, each step near the answer is pooled by random effects
over hosts at the reference link, the host term stated.

  scripts/design-table SWEEP... --answer 16k [--reference-link 5gbit:9001]
                       [--evidence RESULTS.json ...] [--out DIR]

A SWEEP is a sweep's folder or a .tar.xz of one; a group needs at least two sweeps. An
--evidence is a valkey-evidence run that names its host (and, with --where fleet, its link): the
real server's memory and client p99 of that host and link, which a step among 16K, 64K and 256K
needs there (docs/design-rule-v2-harms.md)."""
import json
import math
import os
import re
import sys
import tempfile

from iobench_tools.lib.judging import designlinks as links
from iobench_tools.lib.judging import designreport2
from iobench_tools.lib.judging.designreport2 import ratio
from iobench_tools.lib.judging import pooling
from iobench_tools.lib.judging import designrule2 as rule
from iobench_tools.lib.kernel import hostid, iobenchlib
from iobench_tools.lib.kernel.iobenchlib import size_label
from iobench_tools.lib.sweeps.designinputs import (cpu_series, load_sweeps, real_series,
                                                   rounds_of, rule_commits)

PROG = "design-table"
PAGES = {"reference": "docs/design-rule-v2.md", "links": "docs/design-rule-v2-links.md"}


def parse_args(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    ap.add_argument("sweeps", nargs="+", metavar="SWEEP", help="sweeps' folders or .tar.xz")
    ap.add_argument("--answer", required=True, type=iobenchlib.parse_size, metavar="SIZE",
                    help="the design's answer to check on every host and link (16k)")
    ap.add_argument("--reference-link", default="5gbit:9001", metavar="RATE:MTU",
                    help="the link the hosts are compared on (the campaigns')")
    ap.add_argument("--evidence", action="append", default=[], metavar="RESULTS.json",
                    help="a valkey-evidence results.json naming its host: the real server's "
                         "harms on that host and link (repeatable, one per host and link)")
    ap.add_argument("--out", metavar="DIR", default=None,
                    help="the folder for report.md and results.json (default: print the report)")
    a = ap.parse_args(argv)
    if not re.fullmatch(r"\w+:\d+", a.reference_link):
        ap.error(f"--reference-link '{a.reference_link}' is not RATE:MTU (5gbit:9001)")
    return a


def link_of(manifest):
    if manifest.get("where") != "netns" or not manifest.get("netns"):
        return manifest.get("where") or "unknown"
    return f"{manifest['netns']['rate']}:{manifest['netns']['mtu']}"


def groups_of(sweeps):
    """{(host, link): [(name, manifest, rows)]}: a sweep whose cells name two hosts stops here."""
    out = {}
    for sweep in sweeps:
        hosts = [hostid.short_key(h) for h in sweep[1].get("hosts_seen") or ["unknown"]]
        if len(hosts) > 1:
            sys.exit(f"{PROG}: error: sweep {sweep[0]} ran on {len(hosts)} hosts: {hosts}")
        out.setdefault((hosts[0], link_of(sweep[1])), []).append(sweep)
    return out


def evidence_of(paths, groups):
    """{(host, link): (path, the run's record)} of each --evidence, keyed as the groups are; one
    that names no host, or whose host and link no group has, stops the command."""
    out = {}
    for path in paths:
        try:
            with open(path) as f:
                ev = json.load(f)
        except (OSError, ValueError) as e:
            sys.exit(f"{PROG}: error: cannot read --evidence '{path}': {e}")
        if ev.get("kind") != "valkey-evidence" or not ev.get("host"):
            sys.exit(f"{PROG}: error: --evidence '{path}' is not a valkey-evidence run that "
                     "names its host")
        link = ev.get("link") or {}
        key = (hostid.short_key(hostid.host_key(ev["host"])),
               f"{link['rate']}:{link['mtu']}" if ev.get("where") == "fleet" else
               ev.get("where", "loopback"))
        if key not in groups:
            sys.exit(f"{PROG}: error: --evidence '{path}' ran on {key[0]}, link {key[1]}: no "
                     "sweeps of that host and link were given")
        out[key] = (os.path.relpath(os.path.abspath(path), iobenchlib.ROOT), ev)
    return out


def judge(members, design, per_host_links, evidence=None):
    cpu = cpu_series(members)
    names = {}
    real = real_series(evidence, "sync", names) if evidence else {}
    sizes = sorted({s for v in cpu.values() for series in v for s in series})
    rounds = min(rounds_of(m, rows) for _, m, rows in members)
    strict = rule.ALPHA / max(per_host_links, 1)
    return {"cpu": cpu, "sizes": sizes, "rounds": rounds, "strict": strict,
            "own": links.own_answers(cpu, sizes, real=real),
            "own_strict": links.own_answers(cpu, sizes, strict, real),
            "agree": rule.agreement(cpu, real, sizes, links.PROTOS),
            "holds": links.holds(cpu, sizes, design, rounds, real), "cells": names}


def registered(members, link, reference):
    """Whether the page that plans this group came before its first sweep, and the words."""
    page = PAGES["reference" if link == reference else "links"]
    commits = rule_commits(page)
    started = min((m.get("started") or "?") for _, m, _ in members)
    auto = any(m.get("repeat") == "auto" or m.get("stopped") for _, m, _ in members)
    if auto:
        return False, "a pilot: stopped by --repeat auto"
    if commits and commits[0][1] < started:
        return True, f"after {page} ({commits[0][0]})"
    return False, f"a re-reading: run before {page}"


def answers_text(own):
    return " / ".join(f"**{size_label(own[k][0])}**" if k == "design" else size_label(own[k][0])
                      for k in ("design", "tcp", "tls"))


def cell_text(cells, proto, cell):
    named = cells.get(proto) or []
    return named[cell] if cell is not None and cell < len(named) else f"cell {cell}"


def gains_text(judged, design):
    """Why no larger size with a CPU gain replaces the design's: its real-server harms are not
    measured in that group, or measured and not shown below x1.10."""
    stopped = {k: [s for s in j["holds"]["beaten"] if s["gains"] and not s["ok"]]
               for k, j in judged.items()}
    gained = [k for k, steps in stopped.items() if steps]
    if not gained:
        return ""
    failed = sorted(f"{h} {lk}" for (h, lk), steps in stopped.items()
                    if any(s["failed"] and not s["unmeasured"] for s in steps))
    unmeasured = [k for k in gained if all(s["unmeasured"] for s in stopped[k])]
    text = (f" A larger size's CPU gain over {size_label(design)} is shown in {len(gained)} of "
            f"{len(judged)} groups; none replaces it (rule v2 puts the burden of its harms on "
            "the larger size): ")
    parts = []
    if unmeasured:
        parts.append(f"in {len(unmeasured)} the real server's memory and p99 at the larger size "
                     "are not measured")
    if failed:
        crits = sorted({c for steps in stopped.values() for s in steps if not s["unmeasured"]
                        for _, c, *_ in s["failed"]})
        parts.append("where they are measured (" + "; ".join(failed) + "), the "
                     + " and ".join(crits) + " is not shown below x1.10 in some condition")
    return text + ", and ".join(parts) + "."


def holds_text(h, design, cells=None):
    if h["missing"]:
        return f"{size_label(design)} not measured"
    beaten = "; ".join(
        f"{size_label(s['large'])}: " + ("; ".join(f"{p.upper()} CPU {ratio(pooled, s['alpha'])} "
                                                   "shown" for p, _, pooled, _ in s["gains"])
                                         or "no gain shown")
        + (", **replaces it**" if s["ok"] else ", real-server harms not measured"
           if s["unmeasured"] else "".join(
               f", {p.upper()} {crit} not shown below x1.10 ({cell_text(cells or {}, p, cell)})"
               for p, crit, cell, _, _ in s["failed"] if crit != "cpu"))
        for s in h["beaten"]) or "no larger size"
    harms = "; ".join(
        f"{p.upper()} vs {size_label(small)} {ratio(pooled)}"
        + ("" if upper < rule.LINE else " **not below x1.10**"
           + (f" (about {need} sweeps would show it)" if need else " (its mean is not below)"))
        for p, small, pooled, upper, need in h["harms"])
    return f"{beaten} | {harms or 'no smaller size'} | " + ("**holds**" if h["holds"]
                                                             else "**does not hold**")


def host_table(judged, reference, design):
    """Random effects over hosts for the steps beside the answer, at the reference link."""
    at_ref = [(host, j) for (host, link), j in judged.items() if link == reference]
    hosts = [h for h, _ in at_ref]
    sizes = sorted(set.intersection(*(set(j["sizes"]) for _, j in at_ref))) if at_ref else []
    # The two steps up to the answer and the one past it: consecutive sizes of one chain.
    chain = [s for s in sizes if s < design][-2:] + [design] + [s for s in sizes if s > design][:1]
    pairs = list(zip(chain, chain[1:]))
    lines = [f"Each pair at the reference link ({reference}), the larger size's CPU over the "
             "smaller's: per host (its sweeps pooled, 95% one-sided bounds) and pooled over the "
             f"hosts by random effects (DerSimonian-Laird, HKSJ on {len(hosts) - 1} df); tau is "
             "the host term, the spread of the true ratio between hosts (as a log).", "",
             "| pair | protocol | " + " | ".join(hosts) + " | over hosts | host term (tau) |",
             "|---|---|" + "---|" * len(hosts) + "---|---|"]
    record = []
    for small, large in pairs:
        for proto in links.PROTOS:
            per = [pooling.pooled_pair(j["cpu"].get(proto, []), small, large) for _, j in at_ref]
            pooled = links.over_hosts([(p["log"], p["se"], p["k"]) for p in per if p])
            lines.append(f"| {size_label(small)} -> {size_label(large)} | {proto.upper()} | "
                         + " | ".join(ratio(p) for p in per) + f" | {ratio(pooled)} | "
                         + (f"{pooled['tau']:.3f}" if pooled else "—") + " |")
            record.append({"small": small, "large": large, "proto": proto,
                           "hosts": {h: (math.exp(p["log"]) if p else None)
                                     for h, p in zip(hosts, per)},
                           "pooled": math.exp(pooled["log"]) if pooled else None,
                           "tau": pooled["tau"] if pooled else None})
    return lines, record


def render(judged, notes, design, reference, head):
    rows = ["| host | link | sweeps x rounds | read as | own answer (design / TCP / TLS) | at the "
            "union's level | " + size_label(design) + " not beaten | " + size_label(design)
            + " not harmful (CPU, 95% one-sided) | verdict |",
            "|---|---|---|---|---|---|---|---|---|"]
    for (host, link), j in sorted(judged.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        rows.append(f"| {host} | {link} | {len(j['members'])} x {j['rounds']} | "
                    f"{notes[(host, link)][1]} | {answers_text(j['own'])} | "
                    f"{answers_text(j['own_strict'])} (each step at {j['strict']:.4f}) | "
                    + holds_text(j["holds"], design, j.get("cells")) + " |")
    every = all(j["holds"]["holds"] for j in judged.values())
    differ = sorted(f"{h} {lk}" for (h, lk), j in judged.items() if not j["holds"]["holds"])
    verdict = (f"**{size_label(design)} holds on every host and link measured.**" if every else
               f"**{size_label(design)} does not hold everywhere**: " + "; ".join(differ) + ".")
    verdict += gains_text(judged, design)
    lines = ["# The design's answer across hosts and links (issue #66)", ""] + head + [
        "", verdict, "", "## By host and link", "",
        "Each group is one host's sweeps on one link, judged alone by rule v2 "
        + ("(CPU; the real server's memory and p99 are not measured per link, so no step between "
           "16K, 64K and 256K passes). " if not any(j.get("evidence") for j in judged.values())
           else "(CPU, and the real server's memory and p99 where the 'read as' column names "
           "them; elsewhere no step between 16K, 64K and 256K passes). ")
        + "A group's own answer differs from the design's only when its steps pass at "
        "the level a union over the host's links allows; at 0.05 alone it differs at the "
        "per-link level only.", ""] + rows
    table, record = host_table(judged, reference, design)
    lines += ["", "## Agreement that could fail", "",
              f"Each group's own answer (the design's chunk), {rule.DRAWS} draws each: whole "
              "sweeps and rounds within sweeps resampled, each sweep left out, and the answer "
              "exchanged in every round with its next smaller and next larger size.", ""]
    for i, ((host, link), j) in enumerate(sorted(judged.items())):
        rows = designreport2.agreement_lines(
            {f"{host}, {link}": (j["own"]["design"][0], j["own"]["design"][1], j["agree"])},
            j["sizes"])
        lines += rows if i == 0 else rows[2:]
    lines += ["", "## Across hosts", ""] + table
    return "\n".join(lines) + "\n", record


def main(argv=None):
    a = parse_args(argv)
    reference = a.reference_link
    with tempfile.TemporaryDirectory(prefix="iobench-table.") as tmp:
        groups = groups_of(load_sweeps(a.sweeps, tmp))
    small = [f"{h} {lk} ({len(m)})" for (h, lk), m in groups.items() if len(m) < 2]
    if small:
        sys.exit(f"{PROG}: error: a group needs two sweeps or more to pool: {', '.join(small)}")
    # The union a link's own answer is read under: the host's links other than the reference
    # (docs/design-rule-v2-links.md: alpha / 7 for seven); the reference link's campaign keeps
    # rule v2's alpha.
    others = {}
    for host, link in groups:
        others[host] = others.get(host, 0) + (link != reference)
    judged, notes = {}, {}
    harms = evidence_of(a.evidence, groups)
    for key, members in groups.items():
        union = others[key[0]] if key[1] != reference else 1
        path, ev = harms.get(key, (None, None))
        judged[key] = dict(judge(members, a.answer, union, ev), members=members, evidence=path)
        notes[key] = registered(members, key[1], reference)
        if path:
            notes[key] = (notes[key][0], f"{notes[key][1]}; memory and p99: {path}")
    head = [f"- the design's answer checked: {size_label(a.answer)}; rule v2 "
            f"(docs/design-rule-v2.md) and its links page (docs/design-rule-v2-links.md)",
            f"- reference link (the hosts compared): {reference}",
            f"- command: `{iobenchlib.recorded_command(PROG)}`"]
    text, across = render(judged, notes, a.answer, reference, head)
    doc = {"tool": "iobench", "kind": "design-table", "command": iobenchlib.recorded_command(PROG),
           "answer": a.answer, "reference_link": reference, "delta": rule.DELTA,
           "alpha": rule.ALPHA,
           "holds_everywhere": all(j["holds"]["holds"] for j in judged.values()),
           "groups": [{"host": h, "link": lk, "sweeps": [n for n, _, _ in j["members"]],
                       "rounds": j["rounds"], "registered": notes[(h, lk)][0],
                       "read_as": notes[(h, lk)][1],
                       "own": {k: v[0] for k, v in j["own"].items()},
                       "own_at_union_level": {k: v[0] for k, v in j["own_strict"].items()},
                       "union_level": j["strict"], "holds": j["holds"]["holds"],
                       "step_is_real": rule.step_is_real(j["agree"], j["sizes"]),
                       "harms": [[p, s, round(math.exp(pp["log"]), 4), round(math.exp(u), 4), n]
                                 for p, s, pp, u, n in j["holds"]["harms"]],
                       "beaten_by": [s["large"] for s in j["holds"]["beaten"] if s["ok"]],
                       "memory_p99": j["evidence"]}
                      for (h, lk), j in sorted(judged.items())],
           "across_hosts": across,
           "sources": {"cpu": "iobench JSON of each sweep cell: sender + receiver CPU per GiB "
                              "per run, paired by round",
                       "host": "each cell's JSON context (cpu_model, cpus_online, kernel, "
                               "machine)",
                       "link": "each sweep's manifest (netns rate and MTU)",
                       "memory and p99": "each --evidence (valkey-evidence: the fork child's "
                                         "private dirty pages, valkey-benchmark's p99), on the "
                                         "host and link it names",
                       "pooling": "within a group: mean log ratio per sweep, DerSimonian-Laird, "
                                  "HKSJ on K-1 df; across hosts: the hosts' pooled ratios, "
                                  "DerSimonian-Laird, HKSJ on hosts-1 df"}}
    iobenchlib.write_or_print(PROG, a.out, doc, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
