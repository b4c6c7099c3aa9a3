"""This host's answer in twenty minutes (issue #66, docs/design-rule-v2-sequential.md): a pilot
sweep, then sweeps of the finalists one after another, judged after each from the third on by
rule v2 at the look's share of the error rate, until the sequence is decided or the time is out;
says in words what it reached. Writes report.md, results.json and every sweep's archive to the
folder it is given.

  scripts/host-answer NAME [--minutes 20] [--where netns|loopback] [--out DIR]
  scripts/host-answer --reread DIR        # judge a finished run again from its archives

Root for --where netns (the emulated 5 Gbit/s, MTU 9001 link, as the campaign's)."""
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time

from iobench_tools.lib.judging import pooling
from iobench_tools.lib.judging import designrule2 as rule
from iobench_tools.lib.judging.designreport2 import ratio
from iobench_tools.lib.judging import sequential as seq
from iobench_tools.lib.kernel import axes, hostid, hostlock, iobenchlib
from iobench_tools.lib.kernel.iobenchlib import size_label
from iobench_tools.lib.sweeps.designinputs import (cpu_series, load_sweeps, one_host, one_link,
                                                   rule_commits)

PROG = "host-answer"
PROTOS = ("tcp", "tls")
PAGE = "docs/design-rule-v2-sequential.md"


def parse_args(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    ap.add_argument("name", nargs="?", help="the run's name: its sweeps are NAME-pilot, NAME-01...")
    ap.add_argument("--minutes", type=float, default=seq.MINUTES,
                    help="the time the whole command may take, pilot included")
    ap.add_argument("--where", choices=("netns", "loopback"), default="netns",
                    help="scripts/sweep --where for every sweep")
    axes.add_bytes(ap, None, per="run (default: the sweep's; another is not the page's design "
                             "and the report says so)")
    ap.add_argument("--out", metavar="DIR", default=None,
                    help="the folder for report.md, results.json and the sweeps' archives "
                         "(default: results/NAME)")
    ap.add_argument("--reread", metavar="DIR", default=None,
                    help="judge the archives of a finished run in DIR again, running nothing")
    a = ap.parse_args(argv)
    if not a.reread and not a.name:
        ap.error("give a NAME to run, or --reread DIR")
    if a.minutes <= 0:
        ap.error(f"--minutes {a.minutes:g} must be above 0")
    return a


def run_sweep(name, sizes, rounds, a, scratch):
    cmd = [os.path.join(iobenchlib.ROOT, "scripts", "sweep"), name, "--where", a.where,
           "--proto", ",".join(PROTOS), "--bufs", ",".join(f"{s // 1024}k" for s in sizes),
           "--repeat", str(rounds), "--results", scratch] + (["--bytes", a.bytes] if a.bytes else [])
    started = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"{PROG}: error: sweep {name} failed (exit {p.returncode}): "
                 + (p.stderr.strip().splitlines() or ["no message"])[-1])
    return time.monotonic() - started


def archive(scratch, name, out):
    path = os.path.join(out, f"{name}.tar.xz")
    with tarfile.open(path, "w:xz") as t:
        t.add(os.path.join(scratch, name), arcname=name)
    return path


def pilot_decides(pilot):
    """The pilot's one step (1K -> 4K at ALPHA_PILOT) and the finalists it leaves."""
    step = rule.step(cpu_series([pilot]), {}, 1024, 4096, PROTOS, seq.ALPHA_PILOT)
    return step, ([4096] if step["ok"] else [1024, 4096]) + [8192, 16384, 65536]


def judge(sweeps, finalists, k_max):
    """Every look from FIRST_LOOK to the last sweep: [(k, level, answer, steps, end)]."""
    looks = []
    for k in range(seq.FIRST_LOOK, len(sweeps) + 1):
        level = seq.look_level(k, k_max)
        answer, steps, end = seq.walk(cpu_series(sweeps[:k]), {}, finalists, PROTOS, level)
        looks.append((k, level, answer, steps, end))
        if end != "open":
            break
    return looks


def reached_words(look, sweeps):
    k, level, answer, steps, end = look
    if end == "ended":
        small, large, _, _, why = steps[-1]
        return (f"Decided after {k} sweeps: **{size_label(answer)}** ({size_label(large)} does "
                f"not replace {size_label(small)}: {why})")
    if end == "all":
        return f"Decided after {k} sweeps: **{size_label(answer)}**, every finalist passed"
    small, large = steps[-1][0], steps[-1][1]
    cpu = cpu_series(sweeps[1:k + 1])  # the look's k sweeps after the pilot
    parts = [f"{proto.upper()} {ratio(p, level)}" for proto in PROTOS
             if (p := pooling.pooled_pair(cpu.get(proto, []), small, large))]
    return (f"Not decided in {k} sweeps: {size_label(large)} against {size_label(small)} is "
            f"still open at the last look's level {level:.4f} ({'; '.join(parts)}): neither "
            f"shown past {rule.DELTA:.0%} nor shown short of it. The answer so far is "
            f"**{size_label(answer)}**, the last size passed")


def step_ratios(sweeps, k, level, small, large):
    """What a look read of one step: large/small CPU per protocol, with the interval at the
    look's level, over the look's k sweeps after the pilot."""
    cpu = cpu_series(sweeps[1:k + 1])
    parts = [f"{proto.upper()} {ratio(p, level)}" for proto in PROTOS
             if (p := pooling.pooled_pair(cpu.get(proto, []), small, large))]
    return "; ".join(parts) or "no pairs"


def report(doc, looks, sweeps, out):
    page = os.path.relpath(os.path.join(iobenchlib.ROOT, PAGE), out)
    lines = ["# This host's answer in twenty minutes (issue #66)", "",
             f"- rule: [{PAGE}]({page}) (rule v2, group-sequential), first committed "
             f"{doc['page'][0]} at {doc['page'][1]}; the first sweep started {doc['started']}: "
             + ("**the page came first**" if doc["page"][1] < doc["started"] else
                "**the runs came first**"),
             f"- host: {doc['host']}; link: {doc['link']}",
             f"- time: {doc['seconds']:.0f} s of {doc['minutes']:g} minutes (the pilot "
             f"{doc['pilot_seconds']:.0f} s; {len(sweeps) - 1} sweeps of {seq.ROUNDS} rounds, "
             f"planned at most {doc['k_max']})",
             f"- command: `{doc['command']}`"]
    if doc.get("bytes"):
        lines.append(f"- **not the page's design**: --bytes {doc['bytes']}")
    lines += ["", f"{doc['words']}.", "",
              f"Pilot (`{sweeps[0][0]}`, {seq.PILOT_ROUNDS} rounds, level {seq.ALPHA_PILOT}): "
              + ("4K replaces 1K, so the sequence starts at 4K." if doc["pilot_step"] else
                 "4K is not shown to replace 1K at its level: 1K stays a finalist.")
              + " Finalists: " + ", ".join(size_label(s) for s in doc["finalists"]) + ".", "",
              "| look (sweeps) | level | walk | ends |", "|---|---|---|---|"]
    for k, level, answer, steps, end in looks:
        walk = "; ".join(f"{size_label(s)} -> {size_label(lg)} {state}" for s, lg, state, _, _
                         in steps)
        lines.append(f"| {k} | {level:.4f} | {walk} | {end}: {size_label(answer)} |")
    if looks:
        lines += ["", "What each look read: the CPU per GiB of each step's larger size over its "
                  "smaller, per protocol, median of the paired rounds with the interval at the "
                  f"look's level: rule v2's step ({PAGE}) reads these, a gain past "
                  f"{rule.DELTA:.0%} against the real server's harms.", "",
                  "| look | step | ratios |", "|---|---|---|"]
        for k, level, answer, steps, end in looks:
            for s, lg, state, _, _ in steps:
                lines.append(f"| {k} | {size_label(s)} -> {size_label(lg)} ({state}) | "
                             f"{step_ratios(sweeps, k, level, s, lg)} |")
    return "\n".join(lines) + "\n"


def finish(out, doc, looks, sweeps):
    last = looks[-1] if looks else None
    doc["answer"] = last[2] if last else None
    doc["words"] = reached_words(last, sweeps) if last else \
        f"No look: {len(sweeps) - 1} sweeps ran, {seq.FIRST_LOOK} are needed for the first"
    doc["looks"] = [{"sweeps": k, "level": lv, "answer": ans, "end": end,
                     "steps": [[s, lg, st] for s, lg, st, _, _ in steps]}
                    for k, lv, ans, steps, end in looks]
    text = report(doc, looks, sweeps, out)
    print(f"{PROG}: wrote {iobenchlib.write_result_folder(out, doc, text)}")
    sys.stdout.write(text)


def reread(a):
    with open(os.path.join(a.reread, "results.json")) as f:
        doc = json.load(f)
    with tempfile.TemporaryDirectory(prefix="iobench-host.") as tmp:
        sweeps = load_sweeps([os.path.join(a.reread, f"{n}.tar.xz") for n in doc["sweeps"]], tmp)
    looks = judge(sweeps[1:], doc["finalists"], doc["k_max"]) if doc["k_max"] else []
    finish(a.reread, doc, looks, sweeps)
    return 0


def main(argv=None):
    a = parse_args(argv)
    if a.reread:
        return reread(a)
    # The host's measurement lock across every sweep (each runs under it, not beside another).
    with hostlock.measurement(PROG):
        return measure(a)


def measure(a):
    out = a.out or os.path.join(iobenchlib.ROOT, "results", a.name)
    os.makedirs(out, exist_ok=True)
    t0, started = time.monotonic(), time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    with tempfile.TemporaryDirectory(prefix="iobench-host.") as scratch:
        names = [f"{a.name}-pilot"]
        pilot_s = run_sweep(names[0], seq.PILOT_SIZES, seq.PILOT_ROUNDS, a, scratch)
        archive(scratch, names[0], out)
        pilot = load_sweeps([os.path.join(scratch, names[0])], scratch)[0]
        step, finalists = pilot_decides(pilot)
        runs = lambda sizes, rounds: (len(sizes) * 2 + 1) * (rounds + 1)  # noqa: E731
        per_sweep = pilot_s / runs(seq.PILOT_SIZES, seq.PILOT_ROUNDS) * runs(finalists,
                                                                            seq.ROUNDS)
        k_max = seq.plan_sweeps(a.minutes * 60 - (time.monotonic() - t0), per_sweep)
        sweeps, took = [pilot], []
        for k in range(1, k_max + 1):
            left = a.minutes * 60 - (time.monotonic() - t0) - seq.MARGIN_S
            if k > 1 and left < max(took):  # the next sweep would run past the minutes
                break
            names.append(f"{a.name}-{k:02d}")
            took.append(run_sweep(names[-1], finalists, seq.ROUNDS, a, scratch))
            archive(scratch, names[-1], out)
            sweeps += load_sweeps([os.path.join(scratch, names[-1])], scratch)
            if k >= seq.FIRST_LOOK and judge(sweeps[1:], finalists, k_max)[-1][4] != "open":
                break
    host = one_host(sweeps, {})
    doc = {"tool": "iobench", "kind": "host-answer", "command": iobenchlib.recorded_command(PROG),
           "page": list((rule_commits(PAGE) or [("?", "?")])[0]),
           "started": started, "host": hostid.short_key(host), "host_key": host,
           "link": one_link(sweeps), "minutes": a.minutes, "bytes": a.bytes,
           "seconds": time.monotonic() - t0, "pilot_seconds": pilot_s, "sweep_seconds": took,
           "k_max": k_max, "pilot_step": step["ok"], "finalists": finalists, "sweeps": names,
           "alpha_pilot": seq.ALPHA_PILOT, "alpha_main": seq.ALPHA_MAIN,
           "sources": {"cpu": "iobench JSON of each sweep cell: sender + receiver CPU per GiB "
                              "per run, paired by round; each sweep archived beside this file",
                       "levels": "Lan-DeMets O'Brien-Fleming increments (sequential.py)"}}
    looks = judge(sweeps[1:], finalists, k_max) if k_max else []
    finish(out, doc, looks, sweeps)
    return 0
