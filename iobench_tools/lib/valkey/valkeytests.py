"""Valkey's Tcl test suite run unit by unit against several builds (scripts/valkey-tests): a
private copy of the suite per run, its output read into passed/failed/skipped test names, and the
verdict of each patched build against stock."""
import fcntl
import os
import queue
import re
import shutil
import signal
import subprocess
import threading
import time

ANSI = re.compile(r"\x1b\[[0-9;]*m")
LINE = re.compile(r"^\[(ok|err|skip|ignore|exception)\]: (.*?)(?: \(\d+ ms\))?$")
PORTS_PER_SLOT = 2000
TAIL_LINES = 15


def units_of(suite):
    """The suite's units as runtest's --single names them: integration/replication, unit/type/list."""
    root = os.path.join(suite, "tests")
    found = set()
    for top in ("integration", "unit"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith(".tcl"):
                    found.add(os.path.relpath(os.path.join(dirpath, f), root)[:-4])
    return found


def parse_output(text):
    """runtest's lines: the names of the tests passed, failed and skipped, and any exception."""
    out = {"passed": [], "failed": [], "skipped": [], "exception": []}
    kind = {"ok": "passed", "err": "failed", "skip": "skipped", "ignore": "skipped",
            "exception": "exception"}
    for raw in text.splitlines():
        m = LINE.match(ANSI.sub("", raw).strip())
        if m:
            name = re.sub(r" in tests/\S+\.tcl$", "", m.group(2))
            out[kind[m.group(1)]].append(name)
    return out


SLOTS = (65535 - 21000) // PORTS_PER_SLOT  # port ranges 21000 + k * PORTS_PER_SLOT


class SlotsBusy(Exception):
    pass


def claim_slots(jobs):
    """{slot: its lock file} for `jobs` port ranges no other run on this machine holds (a lock
    under /run/lock per range, held while this process lives): two suites at once would
    otherwise start their servers on the same ports and fail each other's units."""
    os.makedirs("/run/lock", exist_ok=True)
    held = {}
    for slot in range(SLOTS):
        if len(held) == jobs:
            break
        f = open(f"/run/lock/iobench-valkey-ports-{slot}.lock", "a")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        held[slot] = f
    if len(held) < jobs:
        for f in held.values():
            f.close()
        raise SlotsBusy(f"only {len(held)} of the {SLOTS} port ranges are free for {jobs} "
                        "jobs: other Valkey suites are running here")
    return held


class Runner:
    """Runs one unit of the suite for one build over one protocol, in a copy of the suite of its
    own with ports of its own (a slot), killing whatever the unit left running."""

    def __init__(self, suite, stock_server, tmp, timeout, jobs):
        self.suite, self.tmp, self.timeout = suite, tmp, timeout
        self.tools = os.path.dirname(stock_server)  # valkey-cli, valkey-benchmark
        self.slots = queue.Queue()
        self.slot_locks = claim_slots(jobs)
        for s in self.slot_locks:
            self.slots.put(s)
        self.trees = set()
        self.count = 0
        self.lock = threading.Lock()

    def _tree(self, server, proto):
        with self.lock:
            self.count += 1
            tree = os.path.join(self.tmp, f"suite{self.count}")
            self.trees.add(tree)
        shutil.copytree(self.suite, tree, symlinks=True)
        src = os.path.join(tree, "src")
        os.makedirs(src)
        for name in ("valkey-server", "valkey-check-rdb", "valkey-check-aof"):
            os.symlink(server, os.path.join(src, name))
        for name in ("valkey-cli", "valkey-benchmark"):
            os.symlink(os.path.join(self.tools, name), os.path.join(src, name))
        if proto == "tls":
            shutil.copytree(self._certs(), os.path.join(tree, "tests", "tls"))
        return tree

    def _certs(self):
        """The suite's TLS certificates (utils/gen-test-certs.sh), made once per run of the
        command and copied into every TLS unit's suite. The script generates DH parameters
        only where tests/tls/valkey.dh is missing: `openssl dhparam 2048` took 33 CPU-s of a
        CI run, one core for as long. The RFC 7919 group ffdhe2048 put there first is the same
        size, a standard group, and takes no time."""
        with self.lock:
            certs = os.path.join(self.tmp, "certs")
            if not os.path.isdir(os.path.join(certs, "tests", "tls")):
                shutil.copytree(os.path.join(self.suite, "utils"), os.path.join(certs, "utils"))
                os.makedirs(os.path.join(certs, "tests", "tls"))
                subprocess.run(["openssl", "genpkey", "-genparam", "-algorithm", "DH", "-pkeyopt",
                                "group:ffdhe2048", "-out", "tests/tls/valkey.dh"], cwd=certs,
                               check=True, capture_output=True, timeout=60)
                subprocess.run(["bash", "utils/gen-test-certs.sh"], cwd=certs, check=True,
                               capture_output=True, timeout=300)
            return os.path.join(certs, "tests", "tls")

    def run(self, server, proto, unit, extra=()):
        """`extra`: more of runtest's options (--loops N)."""
        slot = self.slots.get()
        tree = None
        try:
            tree = self._tree(server, proto)
            args = ["tclsh", "tests/test_helper.tcl", "--single", unit, "--clients", "1",
                    "--timeout", str(self.timeout + 30), "--baseport",
                    str(21000 + slot * PORTS_PER_SLOT), "--portcount", str(PORTS_PER_SLOT)]
            if proto == "tls":
                args.append("--tls")
            return self._run(args + list(extra), tree)
        finally:
            if tree:
                kill_inside(tree)
                shutil.rmtree(tree, ignore_errors=True)
                self.trees.discard(tree)
            self.slots.put(slot)

    def _run(self, args, tree):
        t0 = time.monotonic()
        env = dict(os.environ, TERM="dumb")
        p = subprocess.Popen(args, cwd=tree, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, errors="replace",
                             start_new_session=True)
        status = None
        try:
            text, _ = p.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            text, _ = p.communicate()
            status = "timeout"
        res = parse_output(text)
        if status is None:
            status = ("exception" if res["exception"] else
                      "failed" if res["failed"] or p.returncode != 0 else "passed")
        res.update(status=status, rc=p.returncode, seconds=round(time.monotonic() - t0, 1),
                   tail=[] if status == "passed" else text.splitlines()[-TAIL_LINES:])
        return res

    def kill_all(self):
        for tree in list(self.trees):
            kill_inside(tree)


def kill_inside(tree):
    """Every process whose working directory is inside the tree: the servers a unit started
    (each runs in its own directory under tests/tmp) and the unit's tclsh."""
    tree = os.path.realpath(tree)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd == tree or cwd.startswith(tree + os.sep):
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


def regressions(stock, patched):
    """What the patched build lost against stock: the tests it failed that stock did not, and
    the unit itself when it timed out or broke off where stock's ran through. By failures, not
    by the names passed: some units name their tests from random draws (psync2's "Set #3 to
    replicate from #1"), so two runs never pass the same names."""
    lost = sorted(set(patched["failed"]) - set(stock["failed"]))
    if patched["status"] in ("timeout", "exception") and stock["status"] not in ("timeout",
                                                                                 "exception"):
        lost.append(f"(the unit: {patched['status']})")
    return lost


def retry_regressions(runs, runner, servers, builds):
    """Each unit where a patched build lost a test stock passed, run again on both builds: a
    test the patched build passes on its second run is flaky, not broken."""
    retried = {}
    for (build, proto, unit), res in runs.items():
        if build == "stock":
            continue
        lost = regressions(runs[("stock", proto, unit)], res)
        if not lost:
            continue
        again = runner.run(servers[build], proto, unit)
        stock_again = runner.run(servers["stock"], proto, unit)
        still = [t for t in regressions(stock_again, again) if t in lost]
        retried[(build, proto, unit)] = {"lost": lost, "still_lost": still,
                                         "retry": again, "stock_retry": stock_again}
    return retried


# A test server's output folder is named by its pid and a counter (./tests/tmp/server.28061.69):
# a machine's run, not the result. Kept as the pattern, so reports of two runs compare.
_RUN_FOLDER = re.compile(r"tests/tmp/([A-Za-z_-]+)\.\d+\.\d+")


def without_run_folders(lines):
    """The lines with each test server's output folder named by its pattern, not its pid."""
    return [_RUN_FOLDER.sub(r"tests/tmp/\1.PID.N", line) for line in lines]


def _counts(res):
    return {k: len(res[k]) for k in ("passed", "failed", "skipped")}


def document(a, runs, retried, seconds, servers, command):
    version = {b: subprocess.run([s, "--version"], capture_output=True, text=True).stdout.strip()
               for b, s in servers.items()}
    doc = {"tool": "iobench", "kind": "valkey-tests", "command": command,
           "base": getattr(a, "base", "8.1.1"),
           "suite": ("Valkey 9.1.2's tests/ with the new tests of the series "
                     "(patches/upstream/*/)" if getattr(a, "base", "8.1.1") == "9.1.2" else
                     "Valkey 8.1.1's tests/ (Debian's source tarball, unpatched)"),
           "patches": getattr(a, "patches", {}),
           "builds": a.builds, "versions": version, "proto": a.proto, "units": a.units,
           "jobs": a.jobs, "unit_timeout_s": a.unit_timeout, "seconds": round(seconds),
           "runs": [], "retries": [], "verdicts": {}}
    for (build, proto, unit), res in runs.items():
        doc["runs"].append({"build": build, "proto": proto, "unit": unit,
                            "status": res["status"], "seconds": res["seconds"], **_counts(res),
                            "failed_tests": without_run_folders(res["failed"]),
                            "skipped_tests": res["skipped"],
                            "tail": without_run_folders(res["tail"])})
    for (build, proto, unit), r in retried.items():
        doc["retries"].append({"build": build, "proto": proto, "unit": unit, "lost": r["lost"],
                               "still_lost": r["still_lost"],
                               "retry_status": r["retry"]["status"],
                               "stock_retry_status": r["stock_retry"]["status"]})
    for build in (b for b in a.builds if b != "stock"):
        for proto in a.proto:
            lost = {unit: retried[(build, proto, unit)]["still_lost"]
                    for unit in a.units if (build, proto, unit) in retried
                    and retried[(build, proto, unit)]["still_lost"]}
            flaky = {unit: retried[(build, proto, unit)]["lost"]
                     for unit in a.units if (build, proto, unit) in retried
                     and not retried[(build, proto, unit)]["still_lost"]}
            stock_passed = sum(len(runs[("stock", proto, u)]["passed"]) for u in a.units)
            doc["verdicts"][f"{build}/{proto}"] = {
                "build": build, "proto": proto, "stock_passed": stock_passed,
                "passed": sum(len(runs[(build, proto, u)]["passed"]) for u in a.units),
                "passes_stock": not lost, "lost": lost, "flaky": flaky}
    return doc


def verdict_lines(doc):
    lines = []
    for v in doc["verdicts"].values():
        head = (f"{v['build']} over {v['proto'].upper()}: {v['passed']} tests passed (stock "
                f"{v['stock_passed']}; some units draw their tests at random)")
        if v["passes_stock"]:
            lines.append(f"{head}; no test failed that stock passed"
                         + (f" (failed on a first run, passed again: {_names(v['flaky'])})"
                            if v["flaky"] else ""))
        else:
            lines.append(f"{head}; FAILS, twice, what stock passes: {_names(v['lost'])}")
    return lines


def _names(by_unit):
    return "; ".join(f"{u}: {', '.join(n)}" for u, n in by_unit.items())


def report_md(doc):
    cols = [(b, p) for p in doc["proto"] for b in doc["builds"]]
    by = {(r["build"], r["proto"], r["unit"]): r for r in doc["runs"]}
    out = ["# Valkey's own replication tests: stock beside the upstream patches", "",
           f"- command: `{doc['command']}`",
           f"- suite: {doc['suite']}; builds: " + ", ".join(
               f"{b} (`build/valkey/9.1/{b}`)" if doc.get("base") == "9.1.2" else
               f"{b} (`scripts/build-valkey-source --upstream {b}`)" for b in doc["builds"]),
           f"- {len(doc['runs'])} unit runs, {doc['jobs']} at a time, in {doc['seconds']} s "
           f"({doc['seconds'] / 60:.1f} min); each cell is passed / failed / skipped", "",
           "## Verdicts", ""]
    out += [f"- {line}" for line in verdict_lines(doc)]
    out += ["", "## Per unit", "",
            "| unit | " + " | ".join(f"{b} {p.upper()}" for b, p in cols) + " |",
            "|---|" + "---|" * len(cols)]
    for unit in doc["units"]:
        cells = []
        for b, p in cols:
            r = by[(b, p, unit)]
            mark = "" if r["status"] == "passed" else f" **{r['status']}**"
            cells.append(f"{r['passed']} / {r['failed']} / {r['skipped']}{mark}")
        out.append(f"| {unit} | " + " | ".join(cells) + " |")
    seconds = {}
    for r in doc["runs"]:
        seconds[(r["build"], r["proto"])] = seconds.get((r["build"], r["proto"]), 0) + r["seconds"]
    out.append("| unit time, summed (s) | " + " | ".join(f"{seconds[c]:.0f}" for c in cols) + " |")
    failed = [r for r in doc["runs"] if r["failed_tests"]]
    if failed or doc["retries"]:
        out += ["", "## Failures and re-runs", ""]
        out += [f"- {r['build']} {r['proto'].upper()} {r['unit']}: {', '.join(r['failed_tests'])}"
                for r in failed]
        out += [f"- re-run {r['build']} {r['proto'].upper()} {r['unit']}: it {r['retry_status']}, "
                f"stock {r['stock_retry_status']}; still lost: "
                f"{', '.join(r['still_lost']) or 'none'}" for r in doc["retries"]]
    if doc.get("gtest"):
        out += ["", "## Valkey's GoogleTest suite (src/unit)", "",
                "| build | status | passed | failed | seconds |", "|---|---|---|---|---|"]
        out += [f"| {b} | {g['status']} | {g['passed']} | {', '.join(g['failed']) or 'none'} | "
                f"{g['seconds']} |" for b, g in doc["gtest"].items()]
    if doc.get("patches"):
        out += ["", "## The patches of each build (SHA-256)", ""]
        out += [f"- {b}: " + (", ".join(f"`{os.path.basename(p)}` {h[:12]}" for p, h in ps.items())
                              or "none (stock)") for b, ps in doc["patches"].items()]
    return "\n".join(out) + "\n"
