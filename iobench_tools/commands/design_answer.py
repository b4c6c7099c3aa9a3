"""The design's answer (docs/design-rule-v2.md): the full-sync chunk a replication design takes,
from reference sweeps (CPU) and the real server's evidence (memory, client p99), by rule v2,
fixed before the runs: the sequence of steps from the smallest size, each larger size carrying
the burden of its harms. Writes the report (each protocol's steps, the agreement, the idle
control) and answer.json.

  scripts/design-answer SWEEP... --evidence results/upstream-9.1/evidence-chunk/results.json
      [--out results/design-answer]

A SWEEP is a sweep's folder or a .tar.xz of one (scripts/sweep NAME ... --repeat 20). The sweeps
must be one host's (their cells name it): two hosts are never pooled as one. Rule v1
(docs/design-rule.md) is retired: its record, results/design-answer/report.md, stays as
committed."""
import json
import math
import os
import re
import sys
import tempfile

from iobench_tools.lib.judging import designreport2
from iobench_tools.lib.judging import designrule2 as rule2
from iobench_tools.lib.kernel import hostid
from iobench_tools.lib.kernel import iobenchlib
from iobench_tools.lib.sweeps.designinputs import (REAL_FIGURES, aa_series, cpu_series,  # noqa: F401
                                                   load_sweeps, one_host, one_link, real_series,
                                                   rounds_of, rule_commits, size_of_build,
                                                   sweep_series)

PROG = "design-answer"
TCP, TLS = "tcp", "tls"
PROTOS = (TCP, TLS)


def parse_args(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    ap.add_argument("sweeps", nargs="+", metavar="SWEEP",
                    help="the reference sweeps' folders or .tar.xz archives")
    ap.add_argument("--evidence", required=True, metavar="RESULTS.json",
                    help="scripts/valkey-evidence's results.json with series@16k, @64k, @256k")
    ap.add_argument("--rule", choices=("1", "2"), default="2",
                    help="2: docs/design-rule-v2.md (default); 1: refused, rule v1 is retired "
                         "(its record, results/design-answer/report.md, stays as committed)")
    ap.add_argument("--evidence-host-unrecorded", action="store_true",
                    help="rule 2: read an --evidence that names no host (made before hosts were "
                         "recorded) as the sweeps' host's; the report says it is unchecked "
                         "(default: its harms are not read, as another host's would not be)")
    ap.add_argument("--out", metavar="DIR", default=None,
                    help="the folder for report.md and answer.json (default: print the report)")
    a = ap.parse_args(argv)
    if a.rule == "1":
        ap.error("--rule 1: rule v1 is retired; its record is results/design-answer/report.md, "
                 "as committed (docs/design-rule.md); rule v2 is the default")
    if len(a.sweeps) < 2:
        ap.error(f"give at least 2 sweeps; {len(a.sweeps)} cannot be pooled")
    return a


def v2_head(sweeps, evidence, evidence_path, host, unrecorded_used):
    """The v2 report's opening lines: the rule's commit against the first sweep, the host, the
    link, the runs."""
    commits = rule_commits("docs/design-rule-v2.md")
    first = commits[0] if commits else ("?", "?")
    started = min((m.get("started") or "?") for _, m, _ in sweeps)
    links = sorted({hostid.link_text(m.get("netns")) for _, m, _ in sweeps})
    # Where a sweep's folder went (--results, a scratch folder) is no part of what it measured.
    command = re.sub(r" --results \S+", "", sweeps[0][1].get("command", "?"))
    return [
        f"- rule: [docs/design-rule-v2.md](../../docs/design-rule-v2.md), first committed "
        f"{first[0]} at {first[1]}; the first sweep started {started}: "
        + ("**the rule came first**" if first[1] < started else "**the runs came first: this is "
           "a re-reading, not a pre-registered result**")
        + ("" if len(commits) < 2 else "; the page's later commits: "
           + ", ".join(f"{h} ({t})" for h, t in commits[1:])),
        f"- host: {host}; link: {', '.join(links)}",
        f"- CPU: {len(sweeps)} sweeps ({', '.join(n for n, _, _ in sweeps)}), each "
        f"`{command.replace(sweeps[0][0], 'NAME')}`",
        f"- memory and p99: `{evidence.get('command', evidence_path)}` ({evidence.get('rounds')} "
        f"rounds; Valkey {evidence.get('base')}; "
        + ("its host checked" if evidence.get("host") else "it names no host: read as this "
           "host's by --evidence-host-unrecorded, unchecked" if unrecorded_used else
           "it names no host: **not read** (its harms would be another host's)") + ")",
        *harms_plan(evidence),
        f"- command: `{iobenchlib.recorded_command(PROG)}`"]


HARMS_PAGE = "docs/design-rule-v2-harms.md"


def harms_plan(evidence):
    """The real server's run against the page that planned it (its rounds and conditions), when
    the run records its start: [] for an older run, which no page planned."""
    started = evidence.get("started")
    if not started:
        return []
    commits = rule_commits(HARMS_PAGE)
    first = commits[0] if commits else ("?", "?")
    link = evidence.get("link") or {}
    where = (f"{evidence.get('where')} {link.get('rate')} MTU {link.get('mtu')}" if link else
             evidence.get("where", "?"))
    return [f"- harms planned: `{HARMS_PAGE}`, first committed "
            f"{first[0]} at {first[1]}; the real server's first run started {started} ({where}): "
            + ("**the plan came first**" if first[1] < started else
               "**the runs came first: not a pre-registered reading**")]


def main_v2(a, sweeps, evidence, evidence_path, cpu, sizes, host):
    names = {}
    # Harms from a run that names no host are this host's only when the user says so.
    usable = bool(evidence.get("host")) or a.evidence_host_unrecorded
    real = real_series(evidence, "sync", names) if usable else {}
    control = designreport2.idle_control(real_series(evidence, "idle") if usable else {})
    results = {}
    for name, protos in (("the design (TCP and TLS)", PROTOS), ("TCP", (TCP,)), ("TLS", (TLS,))):
        answer, steps = rule2.answer(cpu, real, sizes, protos)
        results[name] = (answer, steps, rule2.agreement(cpu, real, sizes, protos))
    text = designreport2.render(
        v2_head(sweeps, evidence, evidence_path, host,
                not evidence.get("host") and a.evidence_host_unrecorded), results, sizes, names,
        control, designreport2.spread(real))
    doc = {"tool": "iobench", "kind": "design-answer", "rule": "docs/design-rule-v2.md",
           "command": iobenchlib.recorded_command(PROG), "delta": rule2.DELTA,
           "alpha": rule2.ALPHA, "host": host,
           "answer": results["the design (TCP and TLS)"][0],
           "answers": {n: r[0] for n, r in results.items()},
           "v2": designreport2.record(results, sizes),
           "idle_control": [[p, c, s, l, round(math.exp(x["log"]), 4), round(math.exp(u), 4)]
                            for p, c, s, l, x, u in control],
           "sweeps": [{"name": n, "seed": m.get("seed"), "rounds": rounds_of(m, rows),
                       "started": m.get("started"), "hosts": m.get("hosts_seen")}
                      for n, m, rows in sweeps],
           "sources": {"cpu": "iobench JSON of each sweep cell: sender + receiver CPU per GiB "
                              "per run (CLOCK_PROCESS_CPUTIME_ID), paired by round",
                       "memory_p99": evidence_path,
                       "host": "each cell's JSON context (cpu_model, cpus_online, kernel, "
                               "machine)",
                       "pooling": "CPU: mean log ratio per sweep, DerSimonian-Laird tau^2, "
                                  "HKSJ t on K-1 df; real server: each cell's own t"}}
    iobenchlib.write_or_print(PROG, a.out, doc, text)
    return 0


def main(argv=None):
    a = parse_args(argv)
    try:
        with open(a.evidence) as f:
            evidence = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"{PROG}: error: cannot read --evidence '{a.evidence}': {e}")
    if evidence.get("kind") != "valkey-evidence":
        sys.exit(f"{PROG}: error: --evidence '{a.evidence}' is not a valkey-evidence results.json")
    with tempfile.TemporaryDirectory(prefix="iobench-design.") as tmp:
        sweeps = load_sweeps(a.sweeps, tmp)
    cpu = cpu_series(sweeps)
    missing = [p for p in PROTOS if len(cpu.get(p, [])) != len(sweeps)]
    if missing:
        sys.exit(f"{PROG}: error: a sweep has no {missing[0].upper()} cells: the rule reads TCP "
                 "and TLS from every sweep")
    host = one_host(sweeps, evidence)
    one_link(sweeps)
    sizes = sorted({s for v in cpu.values() for series in v for s in series})
    evidence_path = os.path.relpath(os.path.abspath(a.evidence), iobenchlib.ROOT)
    return main_v2(a, sweeps, evidence, evidence_path, cpu, sizes, host)
