"""The design's answer (issue #56, docs/design-rule.md): the full-sync chunk a replication design
takes, from K reference sweeps (CPU) and the real server's evidence (memory, client p99), by the
rule fixed before the runs. Writes the design table (every size: the sweeps' CPU, the real
server's memory and p99, the pull requests' choices, the rule's verdict), the agreement (the
null, the resampled sweeps, each sweep alone), the A/A control pooled at the fixed round, and
whether the runs reached the resolution the rule states.

  scripts/design-answer SWEEP... --evidence results/upstream-9.1/evidence-chunk/results.json
      [--rule 1|2] [--out results/design-answer]

A SWEEP is a sweep's folder or a .tar.xz of one (scripts/sweep NAME ... --repeat 20). --rule 2
(the default) is docs/design-rule-v2.md; --rule 1 re-renders the record of docs/design-rule.md.
The sweeps must be one host's (their cells name it): two hosts are never pooled as one."""
import json
import math
import os
import re
import sys
import tempfile

from iobench_tools.lib.judging import designreport2
from iobench_tools.lib.judging import designrule as rule
from iobench_tools.lib.judging import designrule2 as rule2
from iobench_tools.lib.kernel import hostid
from iobench_tools.lib.kernel import iobenchlib
from iobench_tools.lib.sweeps import sweeplib
from iobench_tools.lib.sweeps.designinputs import (REAL_FIGURES, aa_series, cpu_series,  # noqa: F401
                                                   load_sweeps, one_host, one_link, real_series,
                                                   rounds_of, rule_commits, size_of_build,
                                                   sweep_series)

PROG = "design-answer"
TCP, TLS = "tcp", "tls"
PROTOS = (TCP, TLS)
SETS = {"design": PROTOS, TCP: (TCP,), TLS: (TLS,)}
# The sizes others chose, beside the rule's (the design table's last column).
CHOSEN = {16384: "Valkey PR #817 (merged, 2024): 16K, on CPU and calls over 1K..64K",
          65536: "patches/upstream/05-chunk-size: 64K (Linux's pipe; memory and p99 above it)",
          262144: "the recommender of 2026-11-27 on one sweep: TCP 256K, a tie-break on the "
                  "fewest calls (issue #56)"}


def parse_args(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    ap.add_argument("sweeps", nargs="+", metavar="SWEEP",
                    help="the reference sweeps' folders or .tar.xz archives")
    ap.add_argument("--evidence", required=True, metavar="RESULTS.json",
                    help="scripts/valkey-evidence's results.json with series@16k, @64k, @256k")
    ap.add_argument("--rule", choices=("1", "2"), default="2",
                    help="2: docs/design-rule-v2.md (default); 1: the record of "
                         "docs/design-rule.md")
    ap.add_argument("--evidence-host-unrecorded", action="store_true",
                    help="rule 2: read an --evidence that names no host (made before hosts were "
                         "recorded) as the sweeps' host's; the report says it is unchecked "
                         "(default: its harms are not read, as another host's would not be)")
    ap.add_argument("--out", metavar="DIR", default=None,
                    help="the folder for report.md and answer.json (default: print the report)")
    a = ap.parse_args(argv)
    if len(a.sweeps) < 2:
        ap.error(f"give {rule.SWEEPS} sweeps (the rule's K); {len(a.sweeps)} cannot be pooled")
    return a


def ratio(p, bounds=("lo", "hi")):
    if p is None:
        return "—"
    lo, hi = (math.exp(p[b]) for b in bounds)
    return f"x{math.exp(p['log']):.3f} [{lo:.3f}..{hi:.3f}]"


def label(size):
    return sweeplib.size_label(size)


def versus(table, proto, crit, s, a):
    """Pooled log(cost of s / cost of a) from the table (which holds log(large / small))."""
    if s == a:
        return None
    if s > a:
        return table.get((proto, crit, a, s))
    p = table.get((proto, crit, s, a))
    if p is None:
        return None
    flip = {"log": -p["log"], "lo": -p["hi"], "hi": -p["lo"], "lo95": -p["hi95"],
            "hi95": -p["lo95"]}
    return dict(p, **flip)


def why(table, size, answer, fell):
    """The rule's word on one size of the design table."""
    if size in fell:
        # The answer's own step when it beat this size, else the smallest size that did.
        big, better = next((b for b in fell[size] if b[0] == answer), fell[size][0])
        shown = "; ".join(f"{proto.upper()} {rule.CRITERION_WORDS[c]} {ratio(versus(table, proto, c, size, big))}"
                          for proto, c, _ in better)
        return f"beaten by {label(big)} ({shown} of {label(big)}'s)"
    if size == answer:
        return "**the answer**: no larger size is shown better by more than 10% without being shown worse"
    _, _, worse = rule.beats(table, size, answer, PROTOS)
    if worse:
        return "does not beat it: shown worse by more than 10% in " + ", ".join(
            f"{p.upper()} {rule.CRITERION_WORDS[c]}" for p, c, _ in worse)
    return f"does not beat {label(answer)}: not shown better by more than 10% in any criterion"


def design_table(table, sizes, answer, fell):
    head = ["| size | TCP CPU / answer's (sweeps) | TLS CPU / answer's (sweeps) | child memory / 16K's "
            "TCP · TLS (Valkey 9.1.2) | client p99 / 16K's TCP · TLS (Valkey 9.1.2) | chosen by | "
            "the rule |", "|---|---|---|---|---|---|---|"]
    for s in sizes:
        real = {c: " · ".join("x1" if s == 16384 else ratio(versus(table, p, c, s, 16384))
                               for p in PROTOS) for c in REAL_FIGURES}
        cpu = [("x1" if s == answer else ratio(versus(table, p, "cpu", s, answer))) for p in PROTOS]
        head.append(f"| {label(s)} | {cpu[0]} | {cpu[1]} | {real['memory']} | {real['p99']} | "
                    f"{CHOSEN.get(s, '')} | {why(table, s, answer, fell)} |")
    return head


def pair_lines(cpu, table, sizes):
    """Every CPU pair pooled, with the spread the planned resolution came from: the per-round sd
    of the log ratio (median over the sweeps) and the between-sweep sd (tau)."""
    lines = ["| protocol | larger / smaller | pooled (one-sided 95% bounds) | pooled 95% | "
             "between-sweep sd | per-round sd (median) | rounds |", "|---|---|---|---|---|---|---|"]
    for proto in PROTOS:
        for i, s in enumerate(sizes):
            for big in sizes[i + 1:]:
                p = table.get((proto, "cpu", s, big))
                if p is None:
                    continue
                sd, rounds = rule.per_round_sd(cpu[proto], s, big)
                lines.append(f"| {proto.upper()} | {label(big)} / {label(s)} | {ratio(p)} | "
                             f"{ratio(p, ('lo95', 'hi95'))} | {p['tau']:.3f} | "
                             f"{sd:.3f} | {rounds} |")
    return lines


def counts(c, total):
    return ", ".join(f"{label(s)} {n}/{total}" for s, n in sorted(c.items())) or "—"


def agreement_lines(agree):
    lines = ["| answer for | the runs | resampled sweeps (K of K, with replacement) | null (sizes "
             "exchangeable in every round) | each sweep alone |", "|---|---|---|---|---|"]
    for name in SETS:
        a = agree["answers"][name]
        lines.append(f"| {name.upper() if name != 'design' else 'the design (TCP and TLS)'} | "
                     f"**{label(a)}** | {counts(agree['resampled'][name], rule.DRAWS)} | "
                     f"{counts(agree['null'][name], rule.DRAWS)} | "
                     f"{', '.join(label(s) for s in agree['alone'][name])} |")
    return lines


def survives_null(agree, name):
    """The runs' answer is named far more often by the resampled sweeps than by the null."""
    a = agree["answers"][name]
    return agree["resampled"][name].get(a, 0) >= 0.8 * rule.DRAWS and \
        agree["null"][name].get(a, 0) <= 0.05 * rule.DRAWS


def aa_summary(sweeps):
    """The A/A twin against its cell, each sweep at its fixed round and pooled."""
    points, covered, rows = [], 0, []
    for name, manifest, _ in sweeps:
        series = aa_series(manifest)
        point = rule.study_point(rule.paired_logs(series, 0, 1)) if series else None
        if point is None:
            rows.append((name, None))
            continue
        own = rule.pool([point])
        covered += own["lo95"] <= 0 <= own["hi95"]
        points.append(point)
        rows.append((name, own))
    return {"pooled": rule.pool(points), "covered": covered, "n": len(points), "rows": rows}


def sweep_lines(sweeps, aa):
    lines = ["| sweep | seed | rounds | stopped | A/A twin / cell at the last round (95%) |",
             "|---|---|---|---|---|"]
    for (name, m, rows), (_, own) in zip(sweeps, aa["rows"]):
        lines.append(f"| {name} | {m.get('seed')} | {rounds_of(m, rows)} | "
                     f"{m.get('stopped', 'ran every round it was given')} | "
                     f"{ratio(own, ('lo95', 'hi95')) if own else 'no control'} |")
    return lines


def report(sweeps, evidence_path, evidence, cpu, table, agree, aa, misses, commits):
    sizes = sorted({s for p in PROTOS for st in sweeps for s in sweep_series(st[2]).get(p, {})})
    answer, fell = rule.answer(table, sizes, PROTOS)
    started = min((m.get("started") or "?") for _, m, _ in sweeps)
    first = commits[0] if commits else ("?", "?")
    aa_ok = aa["pooled"] is not None and aa["pooled"]["lo95"] <= 0 <= aa["pooled"]["hi95"]
    lines = [
        "# The design's answer: the full-sync chunk (issue #56)", "",
        "> Record of the rule of 2026-11-28 (v1); today's answer: results/design-answer/README.md "
        "(by rule v2, docs/design-rule-v2.md).", "",
        f"- rule: [docs/design-rule.md](../../docs/design-rule.md), first committed {first[0]} at "
        f"{first[1]}; the first sweep started {started}: "
        + ("**the rule came first**" if first[1] < started else "**the runs came first: this "
           "is not a pre-registered reading**")
        + ("" if len(commits) < 2 else f"; the page's later commits: "
           + ", ".join(h for h, _ in commits[1:])),
        f"- CPU: {len(sweeps)} sweeps (the rule's K is {rule.SWEEPS}), each "
        f"`{sweeps[0][1].get('command', '?').replace(sweeps[0][0], 'NAME')}`",
        f"- memory and p99: `{evidence.get('command', evidence_path)}` "
        f"({evidence.get('rounds')} rounds; Valkey {evidence.get('base')})",
        f"- command: `{iobenchlib.recorded_command(PROG)}`", ""]
    if not aa_ok:
        lines += ["**No answer: the A/A control's pooled interval excludes 1** "
                  f"({ratio(aa['pooled'], ('lo95', 'hi95'))}); the runs carry an order effect.", ""]
    else:
        lines += [f"**The design's chunk: {label(answer)}** — TCP alone "
                  f"{label(agree['answers'][TCP])}, TLS alone {label(agree['answers'][TLS])}. "
                  "The smallest size no larger size beats: shown better by more than 10% in CPU, "
                  "memory or p99 under one protocol, and shown worse by more than 10% in none.", ""]
    lines += ["## The design table", "",
              "Ratios are costs (lower is better) with their one-sided 95% bounds as an interval "
              "(the rule's test at 10%); CPU pooled over the sweeps by random effects (HKSJ), "
              "memory and p99 pooled over the real server's six cells per protocol (dual, "
              "diskless, disk; 1 and 4 replicas). Not measured: —.", ""]
    lines += design_table(table, sizes, answer, fell)
    lines += ["", "## Is the agreement the runs'?", "",
              f"The rule on {rule.DRAWS} resamples of the sweeps, on {rule.DRAWS} draws of the "
              "null (each sweep's sizes dealt at random within every round, the real server's "
              "too: under it the rule names the smallest size) and on each sweep alone:", ""]
    lines += agreement_lines(agree)
    lines += [""] + [f"- {n}: {label(agree['answers'][n])} "
                     + ("survives the null: the resampled sweeps name it in "
                        f"{agree['resampled'][n].get(agree['answers'][n], 0)} of {rule.DRAWS}, the "
                        f"null in {agree['null'][n].get(agree['answers'][n], 0)}"
                        if survives_null(agree, n) else
                        "does **not** survive the null: the runs' agreement on it is the rule's "
                        "or too weak to count")
                     for n in SETS]
    p = aa["pooled"]
    lines += ["", "## The A/A control, at the fixed round", "",
              f"TCP 16K's twin against its cell: pooled {ratio(p, ('lo95', 'hi95'))} (95%, HKSJ; "
              f"between-sweep sd {p['tau']:.3f}, Cochran's Q {p['q']:.1f} on {p['k'] - 1} degrees "
              f"of freedom); each sweep's own 95% interval at its last round covers 1 in "
              f"{aa['covered']} of {aa['n']}. No sweep could stop early, so these are read where "
              "the design fixed them." if p else "No sweep ran an A/A control.", ""]
    lines += sweep_lines(sweeps, aa)
    lines += ["", "## Did the runs reach the stated resolution?", ""]
    if misses:
        lines += ["No: these pooled CPU intervals straddle a line (x1.10 or x1/1.10) and are wider "
                  f"than planned x{rule.WIDTH_SLACK}:", ""]
        lines += [f"- {p.upper()} {label(b)} / {label(s)}: one-sided half-width "
                  f"{100 * h:.1f}% (planned {100 * rule.PLANNED_HALF[p]:.1f}%); at this spread "
                  f"about {rule.sweeps_to_reach(table[(p, 'cpu', s, b)], cpu[p], s, b, p)} "
                  f"sweeps of {rule.ROUNDS} rounds would reach planned x{rule.WIDTH_SLACK}"
                  for p, s, b, h in misses]
        lines += ["", "The answer above stands by the rule (a larger size must be shown better); "
                  "where a pair missed the resolution, how close to the line its bound came is "
                  "in the table, and the next design plans from the spread below."]
    else:
        lines += [f"Yes: every pooled CPU interval lies clear of both lines or within planned "
                  f"x{rule.WIDTH_SLACK} (TCP {100 * rule.PLANNED_HALF[TCP]:.1f}%, TLS "
                  f"{100 * rule.PLANNED_HALF[TLS]:.1f}%)."]
    lines += ["", "## Every CPU pair, pooled", "",
              "Costs of the larger size over the smaller's (below 1: the larger is cheaper); "
              "the spread they came with is what the next design's resolution is planned from.",
              ""]
    lines += pair_lines(cpu, table, sizes)
    lines += ["", "## Sources", "",
              "- CPU per GiB: each run's sender + receiver CPU (CLOCK_PROCESS_CPUTIME_ID of each "
              "side, pinned 0,1), iobench's JSON in each sweep's cells, paired by round",
              f"- memory: {evidence.get('sources', {}).get('memory', '?')}",
              f"- p99: {evidence.get('sources', {}).get('latency', '?')}"]
    return "\n".join(lines) + "\n", answer, aa_ok


def record(sweeps, table, agree, aa, misses, answer, aa_ok, evidence_path):
    """results.json: what the report says, as data."""
    def entry(p):
        return None if p is None else {k: round(v, 6) for k, v in p.items()}
    return {"tool": "iobench", "kind": "design-answer", "rule": "docs/design-rule.md",
            "command": iobenchlib.recorded_command(PROG),
            "delta": rule.DELTA, "answer": answer if aa_ok else None,
            "answers": agree["answers"], "aa_ok": aa_ok,
            "sweeps": [{"name": n, "seed": m.get("seed"), "rounds": rounds_of(m, rows),
                        "started": m.get("started")} for n, m, rows in sweeps],
            "agreement": {k: {n: {str(s): c for s, c in v.items()} for n, v in agree[k].items()}
                          for k in ("resampled", "null")} | {"alone": agree["alone"]},
            "aa": {"pooled": entry(aa["pooled"]), "covered": aa["covered"], "n": aa["n"]},
            "resolution_misses": [list(m) for m in misses],
            "pairs": [{"proto": p, "criterion": c, "small": s, "large": b, "log_large_over_small":
                       entry(v)} for (p, c, s, b), v in sorted(table.items())],
            "sources": {"cpu": "iobench JSON of each sweep cell: sender + receiver CPU per GiB "
                               "per run (CLOCK_PROCESS_CPUTIME_ID), paired by round",
                        "memory_p99": evidence_path,
                        "pooling": "mean log ratio per study; DerSimonian-Laird tau^2; "
                                   "Hartung-Knapp-Sidik-Jonkman t on K-1 df"}}


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
    if a.rule == "2":
        return main_v2(a, sweeps, evidence, evidence_path, cpu, sizes, host)
    real = real_series(evidence)
    table = rule.table_of(cpu, real, sizes)
    agree = rule.agreement(cpu, real, sizes, SETS, full=table)
    aa = aa_summary(sweeps)
    misses = rule.reached(table)
    text, answer, aa_ok = report(sweeps, evidence_path, evidence, cpu, table, agree, aa, misses,
                                 rule_commits())
    if a.out:
        path = iobenchlib.write_result_folder(
            a.out, record(sweeps, table, agree, aa, misses, answer, aa_ok, evidence_path), text)
        print(f"{PROG}: wrote {path}")
    else:
        sys.stdout.write(text)
    return 0
