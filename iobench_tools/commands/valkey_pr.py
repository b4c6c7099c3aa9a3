"""The Valkey pull requests of patches/upstream/NAME/, checked as a maintainer would check them.

For each PR (all by default): its commit applies with `patch --fuzz=0` to pristine Valkey 9.1.2
(Debian's source, pinned by hash) on the PRs it names; the C and C++ files it writes are clean
by Valkey's .clang-format (clang-format-19); and, unless --static, the tree builds with TLS and
the PR's own test passes with its change and fails with its test alone (the change left out).

  scripts/valkey-pr [--prs NAME,...] [--static] [--keep] [--out DIR] [--loops N [--busy K]]

With --loops N, a PR whose own Tcl tests passed (pr.json's test case, or its loop_cases) runs
them N times in a row in a unit of their own (their blocks of the unit, runtest --loops N), with
K CPU-bound processes beside them (--busy K: the load a flaky test shows under), and a PR passes
only if every one of those runs passed.

Each check runs in a temporary tree that is removed when it ends (--keep keeps it and says
where), bounded by --timeout. Writes OUT/checks.json and OUT/checks.md: per PR its patch's
SHA-256, each step's verdict and time, and the test's last lines where it did not do what it
should. Exit 1 when any PR fails a check, 2 on bad input.
"""
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from iobench_tools.lib.kernel.iobenchlib import ROOT, command_parser, recorded_command
from iobench_tools.lib.valkey import valkeypr, valkeytests

PROG = "valkey-pr"
CLANG_FORMAT = "clang-format-19"


def fail(msg, code=2):
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    sys.exit(code)


def parse_args(argv):
    ap = command_parser(__doc__, prog=PROG)
    ap.add_argument("--prs", default="", help="the PRs to check, by folder name (every one)")
    ap.add_argument("--static", action="store_true",
                    help="only apply and format-check, no build and no test (off)")
    ap.add_argument("--keep", action="store_true", help="keep each check's tree (off)")
    ap.add_argument("--timeout", type=int, default=1800,
                    help="seconds one build and test may take before it is stopped (1800)")
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "upstream-9.1", "pr-checks"),
                    help="the folder checks.json and checks.md go to (results/upstream-9.1/"
                         "pr-checks)")
    ap.add_argument("--loops", type=int, default=0,
                    help="run each PR's own Tcl tests this many times in a row once they pass (0: "
                         "not)")
    ap.add_argument("--busy", type=int, default=0,
                    help="CPU-bound processes beside the --loops runs (0)")
    ap.add_argument("--loop-protos", default="tcp",
                    help="the protocols the --loops runs use, a list: tcp, tls (tcp)")
    a = ap.parse_args(argv)
    a.loop_protos = [p for p in a.loop_protos.split(",") if p]
    bad = [p for p in a.loop_protos if p not in ("tcp", "tls")] or ([] if a.loop_protos else [""])
    if bad:
        ap.error(f"invalid --loop-protos: '{bad[0]}' (expected tcp, tls or both)")
    if not 0 <= a.loops <= 1000:
        ap.error(f"invalid --loops {a.loops}: expected 0..1000")
    if not 0 <= a.busy <= 64:
        ap.error(f"invalid --busy {a.busy}: expected 0..64")
    if a.busy and not a.loops:
        ap.error("--busy needs --loops: it loads the host only while the loops run")
    known = valkeypr.names()
    a.prs = [p for p in a.prs.split(",") if p] or known
    bad = [p for p in a.prs if p not in known]
    if bad:
        ap.error(f"invalid --prs: '{bad[0]}' (expected one of: {', '.join(known) or 'none'})")
    if not 60 <= a.timeout <= 7200:
        ap.error(f"invalid --timeout {a.timeout}: expected 60..7200 seconds")
    return a


def run(cmd, cwd, timeout, log):
    """Runs `cmd` in `cwd` with its output to `log`; (exit code or 'timeout', seconds)."""
    t0 = time.monotonic()
    with open(log, "a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        p = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            p.wait()
            rc = "timeout"
    return rc, round(time.monotonic() - t0, 1)


COMPILE_ERROR = re.compile(r"^(\S+?):\d+:\d+: error: (.*)$", re.M)


def compile_errors(text):
    """[(file, message)] of the compiler's errors in a build log."""
    return [(os.path.basename(f), m) for f, m in COMPILE_ERROR.findall(text)]


def fails_by_its_test(run, test):
    """Whether a run without the change failed because its test does not compile there: every
    compiler error in one of the PR's own test files (a test naming what the change adds, as
    05's names REPL_CHUNK_SIZE). Read from the errors recorded, or an older record's log tail."""
    if run.get("test") != "build failed" or test.get("kind") != "unit":
        return False
    errors = run.get("compile_errors")
    if errors is None:
        errors = compile_errors(run.get("log_tail") or "")
    return bool(errors) and all(f in test["files"] for f, _ in errors)


def tail(log, n=12):
    with open(log, errors="replace") as f:
        return "".join(f.readlines()[-n:])


def gtest_cases(log):
    with open(log, errors="replace") as f:
        return valkeypr.gtest_cases(f.read())


def build_and_test(tree, test, timeout, log):
    """Builds what the PR's test needs and runs it: ('passed'|'failed'|'build failed'|'timeout',
    build seconds, test seconds, {case: verdict}, the Tcl unit's figures or None)."""
    if test["kind"] == "unit":
        return unit_test(tree, test, timeout, log)
    if test["kind"] == "tcl":
        return tcl_test(tree, test, timeout, log)
    raise valkeypr.PrError(f"test kind '{test['kind']}' is not one this script runs")


def make(tree, target, timeout, log):
    return run(["make", "-C", "src", f"-j{os.cpu_count() or 1}", "BUILD_TLS=yes", "MALLOC=libc",
                *valkeypr.optimization_flags(), *([target] if target else [])], tree, timeout, log)


def unit_test(tree, test, timeout, log):
    """A GoogleTest filter of src/unit: only the PR's own test files and the runner's main are
    compiled (the rest of the unit suite is scripts/valkey-tests' to run)."""
    unit = os.path.join(tree, "src", "unit")
    keep = set(test["files"]) | {"main.cpp"}
    for f in os.listdir(unit):
        if f.endswith(".cpp") and f.startswith("test_") and f not in keep:
            os.remove(os.path.join(unit, f))
    rc, build_s = make(tree, "valkey-unit-gtests", timeout, log)
    if rc != 0:
        return ("timeout" if rc == "timeout" else "build failed"), build_s, 0.0, {}, None
    binary = os.path.join(unit, "valkey-unit-gtests")
    rc, test_s = run([binary, f"--gtest_filter={test['filter']}"], tree, timeout, log)
    verdict = "timeout" if rc == "timeout" else "passed" if rc == 0 else "failed"
    return verdict, build_s, test_s, gtest_cases(log), None


def tcl_test(tree, test, timeout, log):
    """The PR's test case in its Tcl unit, the whole unit run over TCP (in a private copy of the
    suite, every server it started killed at its end): the case's verdict, and the unit's."""
    rc, build_s = make(tree, "", timeout, log)
    if rc != 0:
        return ("timeout" if rc == "timeout" else "build failed"), build_s, 0.0, {}, None
    suite = tree + "-suite"
    valkeypr.copy_suite(tree, suite)
    runner = valkeytests.Runner(suite, os.path.join(tree, "src", "valkey-server"),
                                os.path.dirname(tree), timeout, 1)
    res = runner.run(os.path.join(tree, "src", "valkey-server"), "tcp", test["unit"])
    with open(log, "a") as f:
        f.write("\n".join(res["tail"]) + "\n")
    case = test["case"]
    verdict = ("passed" if case in res["passed"] else "failed" if case in res["failed"]
               else res["status"])
    unit = {"unit": test["unit"], "status": res["status"], "seconds": res["seconds"],
            "passed": len(res["passed"]), "failed": res["failed"], "exception": res["exception"]}
    return verdict, build_s, res["seconds"], {case: verdict}, unit


@contextlib.contextmanager
def busy_loops(count, seconds):
    """`count` CPU-bound shell loops for at most `seconds`, stopped when the block ends."""
    procs = [subprocess.Popen(["timeout", str(seconds), "sh", "-c", "while :; do :; done"],
                              start_new_session=True) for _ in range(count)]
    try:
        yield
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, 9)
            p.wait()


def loop_test(tree, test, a, proto):
    """The PR's own Tcl tests `a.loops` times in a row over `proto`, in a unit of only their
    blocks, beside `a.busy` busy loops: how many times each passed, and the run's status and
    time."""
    cases = test["loop_cases"]
    suite = tree + "-loop-suite"
    valkeypr.copy_suite(tree, suite)
    with open(os.path.join(suite, "tests", test["unit"] + ".tcl")) as f:
        blocks = valkeypr.blocks_of(f.read(), cases)
    unit = os.path.join(os.path.dirname(test["unit"]), "iobench-loop")
    with open(os.path.join(suite, "tests", unit + ".tcl"), "w") as f:
        f.write(blocks)
    server = os.path.join(tree, "src", "valkey-server")
    runner = valkeytests.Runner(suite, server, os.path.dirname(tree), a.timeout, 1)
    with busy_loops(a.busy, a.timeout):
        res = runner.run(server, proto, unit, extra=["--loops", str(a.loops)])
    return {"unit": test["unit"], "cases": cases, "loops": a.loops, "busy": a.busy, "proto": proto,
            "status": res["status"], "seconds": res["seconds"],
            "passed": {c: res["passed"].count(c) for c in cases}, "failed": res["failed"],
            "exception": res["exception"],
            **({"tail": [line.replace(os.path.dirname(tree), "WORK") for line in res["tail"]]}
               if res["tail"] else {})}


def loop_runs(c):
    """A check's --loops runs, one per protocol (a record from before --loop-protos holds one
    TCP run as a dict)."""
    loops = c.get("loops") or []
    return [dict(loops, proto=loops.get("proto", "tcp"))] if isinstance(loops, dict) else loops


def loops_good(c):
    """Whether every --loops run (one per protocol) passed every case every time."""
    return all(run["status"] == "passed" and all(n == run["loops"] for n in run["passed"].values())
               for run in loop_runs(c))


def check(name, a, work):
    """One PR's checks: a dict of verdicts (True is good) and figures."""
    pr = valkeypr.load(name)
    with open(pr["patch"]) as f:
        text = f.read()
    out = {"name": name, "title": pr["title"], "needs": pr["needs"], "test": pr["test"],
           "patch": os.path.relpath(pr["patch"], ROOT), "patch_sha256": valkeypr.sha256(pr["patch"]),
           "files": valkeypr.changed_files(text)}
    with_change = os.path.join(work, f"{name}-with-change")
    try:
        valkeypr.prepare(with_change, name)
        out["applies"] = True
    except valkeypr.PrError as e:
        out.update(applies=False, why=str(e))
        return out
    if shutil.which(CLANG_FORMAT):
        out["format_unclean"] = valkeypr.format_problems(with_change, out["files"], CLANG_FORMAT)
    else:
        out["format_unclean"] = None
        out["format_why"] = f"{CLANG_FORMAT} not found"
    test_alone = os.path.join(work, f"{name}-test-alone")
    try:
        valkeypr.prepare(test_alone, name, with_change=False)
        out["test_applies_alone"] = True
    except valkeypr.PrError as e:
        out.update(test_applies_alone=False, why=str(e))
        return out
    if a.static:
        return out
    # A test-only PR (a test that checked nothing, fixed) has no change to fail without: its
    # test must pass on its base, and that is all a run can show.
    runs = [(with_change, "with_change", "passed")]
    if not pr["test"].get("test_only"):
        runs.append((test_alone, "without_change", "failed"))
    for tree, key, want in runs:
        log = os.path.join(work, f"{name}-{key}.log")
        verdict, build_s, test_s, cases, unit = build_and_test(tree, pr["test"], a.timeout, log)
        # With the change, a Tcl case counts only if its whole unit passes too: the first
        # version of 02 passed its own case and failed five others.
        if unit and want == "passed" and verdict == "passed" and unit["status"] != "passed":
            verdict = f"passed, but its unit {unit['status']}"
        out[key] = {"test": verdict, "build_s": build_s, "test_s": test_s, "cases": cases}
        if unit:
            out[key]["tcl_unit"] = unit
        if verdict == "build failed":
            with open(log, errors="replace") as f:
                out[key]["compile_errors"] = compile_errors(f.read())
        if verdict != want:
            # The trees' scratch folder is this machine's: a record names it WORK.
            out[key]["log_tail"] = tail(log).replace(work, "WORK")
    if a.loops and pr["test"].get("loop_cases") and out["with_change"]["test"] == "passed":
        out["loops"] = [loop_test(with_change, pr["test"], a, proto) for proto in a.loop_protos]
    return out


def series_applies():
    """Whether every PR applies, in order, to one pristine tree (the series a release would
    take): True, or the line saying where it does not."""
    tree = tempfile.mkdtemp(prefix="valkey-pr-series-")
    try:
        valkeypr.patched_tree(tree, valkeypr.commits(valkeypr.patches_of(valkeypr.SERIES)))
        return True
    except valkeypr.PrError as e:
        return str(e)
    finally:
        shutil.rmtree(tree, ignore_errors=True)


def good(c):
    return (c.get("applies") and c.get("test_applies_alone") and not c.get("format_unclean")
            and c.get("with_change", {"test": "passed"})["test"] == "passed"
            and (c.get("without_change", {"test": "failed"})["test"] == "failed"
                 or fails_by_its_test(c["without_change"], c["test"]))
            and loops_good(c))


def report_md(doc):
    lines = [f"# The Valkey pull requests, checked on Valkey {valkeypr.BASE}", "",
             f"`{doc['command']}`", "",
             "| PR | applies (fuzz 0) | test alone applies | clang-format | own test with the "
             "change | without it | patch SHA-256 |", "|---|---|---|---|---|---|---|"]
    for c in doc["prs"]:
        fmt = ("not checked: " + c.get("format_why", "")) if c.get("format_unclean") is None \
            else ("clean" if not c["format_unclean"] else "unclean: " + ", ".join(c["format_unclean"]))
        def test(key):
            t = c.get(key)
            if not t:
                return "- (a test-only PR)" if c["test"].get("test_only") and c.get("with_change") \
                    else "-"
            said = t["test"]
            if key == "without_change" and fails_by_its_test(t, c["test"]):
                names = sorted({m for _, m in t.get("compile_errors") or compile_errors(
                    t.get("log_tail") or "")})
                said = f"fails: its test does not compile without it ({'; '.join(names)})"
            return f"{said} (build {t['build_s']} s, test {t['test_s']} s)"
        lines.append(f"| {c['name']} | {'yes' if c.get('applies') else 'no'} | "
                     f"{'yes' if c.get('test_applies_alone') else '-'} | {fmt} | "
                     f"{test('with_change')} | {test('without_change')} | "
                     f"`{c['patch_sha256'][:12]}` |")
    series = doc["series_applies"]
    lines += ["", "The whole series, every PR in order on one tree: " +
              ("applies with no fuzz." if series is True else f"does not apply: {series}")]
    for c in doc["prs"]:
        if c.get("why"):
            lines += ["", f"{c['name']}: {c['why']}"]
        for key, says in (("with_change", "with the change"), ("without_change", "test alone")):
            cases = c.get(key, {}).get("cases")
            if cases:
                lines += ["", f"{c['name']}, {says}: " + ", ".join(
                    f"{name} {verdict}" for name, verdict in sorted(cases.items()))]
            unit = c.get(key, {}).get("tcl_unit")
            if unit:
                lines[-1] += (f"; its unit {unit['unit']}: {unit['status']} in {unit['seconds']} s, "
                              f"{unit['passed']} passed, failed: {', '.join(unit['failed']) or 'none'}")
    for c in doc["prs"]:
        for loops in loop_runs(c):
            lines += ["", f"{c['name']}, its own tests {loops['loops']} times in a row over "
                      f"{loops['proto'].upper()} "
                      f"({loops['unit']}'s blocks of: {', '.join(loops['cases'])}), beside "
                      f"{loops['busy']} busy loops: {loops['status']} in {loops['seconds']} s; "
                      "passed " + ", ".join(f"{n} of {loops['loops']} ({case})"
                                            for case, n in loops["passed"].items())
                      + (f"; failed: {', '.join(loops['failed'])}" if loops["failed"] else "")]
    return "\n".join(lines) + "\n"


def main(argv=None):
    a = parse_args(argv)
    work = tempfile.mkdtemp(prefix="valkey-pr-")
    checks = []
    try:
        for name in a.prs:
            print(f"{PROG}: {name}: checking", flush=True)
            try:
                c = check(name, a, work)
            except valkeypr.PrError as e:
                fail(str(e), 1)
            checks.append(c)
            print(f"{PROG}: {name}: {'ok' if good(c) else 'FAILED'}", flush=True)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; the trees are removed", file=sys.stderr)
        return 130
    finally:
        if a.keep:
            print(f"{PROG}: the trees are kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    doc = {"command": recorded_command(PROG), "base": valkeypr.BASE, "static": a.static,
           "prs": checks, "series_applies": series_applies()}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "checks.json"), "w") as f:
        json.dump(doc, f, indent=1)
    with open(os.path.join(a.out, "checks.md"), "w") as f:
        f.write(report_md(doc))
    print(report_md(doc), end="")
    return 0 if all(good(c) for c in checks) and doc["series_applies"] is True else 1


if __name__ == "__main__":
    sys.exit(main())
