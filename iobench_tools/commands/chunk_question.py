"""The chunk question read by its rule (docs/chunk-question.md, written before the runs): from one
valkey-evidence run of one Valkey binary at every chunk (NAME~SIZE, --load-tool open --plain),
whether a 32K or 64K chunk keeps the clients' p99 during a full sync within 10% of 16K's in every
condition, after the A/A twin and the idle cells are shown to cover 1; or, with --power, the
rounds a campaign needs for that, from a pilot's spread.

  scripts/chunk-question RESULTS.json [--larger series~32k,series~64k] [--baseline series~16k]
                         [--twin series~16k#2] [--power] [--report FILE]

Every bound is a median's order statistic at 1 - 0.05/K (K: conditions x sizes), so one
hiccup round moves it by one rank, not by its size."""
import json
import sys

from iobench_tools.lib.judging import chunkrule
from iobench_tools.lib.kernel import hostid, iobenchlib

PROG = "chunk-question"


def parse_args(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    ap.add_argument("results", metavar="RESULTS.json", help="a valkey-evidence results.json")
    ap.add_argument("--larger", default="series~32k,series~64k",
                    help="the builds judged against --baseline, smallest first")
    ap.add_argument("--baseline", default="series~16k", help="the build they are judged against")
    ap.add_argument("--twin", default="series~16k#2", help="the baseline's A/A twin")
    ap.add_argument("--power", action="store_true",
                    help="read RESULTS.json as a pilot: each condition's per-round spread and the "
                         "chance that a campaign of N rounds passes every condition at a true "
                         "ratio of 1.00 and 1.05")
    ap.add_argument("--report", default=None, metavar="FILE",
                    help="write the report to this file too (default: print it only)")
    a = ap.parse_args(argv)
    a.sizes = a.larger.split(",")
    try:
        with open(a.results) as f:
            a.doc = json.load(f)
    except (OSError, ValueError) as e:
        ap.error(f"invalid RESULTS.json '{a.results}': {e}")
    if a.doc.get("kind") != "valkey-evidence":
        ap.error(f"invalid RESULTS.json '{a.results}': not a valkey-evidence run")
    builds = a.doc.get("builds", [])
    missing = [b for b in [a.baseline, a.twin, *a.sizes] if b not in builds]
    if missing:
        ap.error(f"invalid builds {','.join(missing)}: the run holds {','.join(builds)}")
    return a


def fmt(x):
    return "-" if x is None else f"x{x:.3f}"


def judgement_row(j, what):
    sd = f"{j['sd']:.3f}" if j.get("sd") is not None else "-"
    return (f"| {what} | {j['rounds']} | {fmt(j.get('ratio'))} | {fmt(j.get('low'))} .. "
            f"{fmt(j.get('high'))} | {sd} | {j['verdict']}"
            + (f" | {gate_text(j)}" if "ok" in j else "") + " |")


def gate_text(j):
    if j["ok"]:
        return "covers 1"
    return "no bound yet" if j.get("low") is None and j.get("high") is None else "does not cover 1"


def report(a):
    r = chunkrule.read(a.doc, a.sizes, a.baseline, a.twin)
    out = [f"# The chunk question: {', '.join(a.sizes)} against {a.baseline}", "",
           f"- run: `{a.doc.get('command', '?')}`", hostid.host_line(a.doc.get("host")),
           f"- figure: the open loop's p99 in the primary's sync window ({chunkrule.FIGURE}); "
           f"idle cells: the whole load's p99",
           f"- each bound a median's order statistic at {r['level']:.4f} (0.05 over "
           f"{r['judgements_k']} judgements), one-sided each way", "",
           "## Gates (each must cover 1)", "",
           "| gate | rounds | median ratio | bounds | sd of log | verdict | gate |",
           "|---|---|---|---|---|---|---|"]
    out += [judgement_row(g, f"{g['gate']} {g['build']} {g['condition'][0]}"
                          + (f" N={g['condition'][1]}" if g['condition'][1] else ""))
            for g in r["gates"]]
    out += ["", "## Harms", "", "| size, condition | rounds | median ratio | bounds | sd of log "
            "| verdict |", "|---|---|---|---|---|---|"]
    out += [judgement_row(j, f"{j['build']} {j['condition'][0]} N={j['condition'][1]}")
            for j in r["judgements"]]
    ans = r["answer"]
    out += ["", f"**Answer**: {ans['size'] or 'none'}: {ans['why']}."]
    if a.power:
        out += power_lines(r, len(r["judgements"]))
    return "\n".join(out) + "\n"


def power_lines(r, k):
    """The pilot read for planning: its largest per-condition spread and the chance a campaign
    passes every judgement."""
    sds = [j["sd"] for j in r["judgements"] + [g for g in r["gates"]] if j.get("sd")]
    if not sds:
        return ["", "(no spread to plan from: the pilot needs two rounds or more)"]
    sd_med, sd_max = sorted(sds)[len(sds) // 2], max(sds)
    out = ["", "## Power (this run read as a pilot)", "",
           f"Per-round sd of the paired log p99: median {sd_med:.3f}, largest {sd_max:.3f} "
           f"(over {len(sds)} judgements and gates). The chance that all {k} judgements read "
           "'within 10%' (normal rounds, 2,000 draws):", "",
           "| rounds | sd | true x1.00 | true x1.05 |", "|---|---|---|---|"]
    for sd in (sd_med, sd_max):
        for n in (10, 20, 40, 80):
            out.append(f"| {n} | {sd:.3f} | {chunkrule.power(sd, n, 1.00, k):.2f} | "
                       f"{chunkrule.power(sd, n, 1.05, k):.2f} |")
    return out


def main(argv=None):
    a = parse_args(argv)
    text = report(a)
    if a.report:
        with open(a.report, "w") as f:
            f.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
