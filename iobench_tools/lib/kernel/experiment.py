"""The experiment kernel: a scenario's cells run in interleaved rounds, each (cell, round) once,
retried after a failure, and every outcome saved in the scenario folder's progress file the
moment it lands — so a scenario stopped by Ctrl-C, a crash or a lost host, started again with the
same command, runs only what is missing and ends with the rounds it had.

A scenario gives its cells (each with a unique `id`: a dataclass, or a dict with an "id" key),
how many rounds, the order, and `run_one(cell, round, attempt)`, which returns the run's figures
(a JSON-able dict) or raises RunFailed. The kernel owns the loop over rounds; nothing else does.
A scenario that stops when its answer is decided gives `after_round(rounds_done)` (True: stop);
one that keeps its progress in a record of its own (the sweep's manifest) subclasses Experiment
and overrides load() and save().
"""
import datetime
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, is_dataclass

from iobench_tools.lib.kernel import hostlock

PROGRESS = "progress.json"
ORDERS = ("balanced", "round-robin", "shuffle", "cell")


class RunFailed(Exception):
    """One run of a cell did not give figures; `refused` when the command line itself was
    refused (running it again would be refused again: no retry, and none of the cell's later
    rounds); `detail`: what else the attempt's record keeps (an exit status, a partial file)."""

    def __init__(self, message, refused=False, detail=None):
        super().__init__(message)
        self.refused = refused
        self.detail = detail or {}


def failed_run(why, exit_status, detail=None):
    """A run that failed, as the kernel takes it: refused (not retried) when the command line
    was (exit status 2); `detail` goes into the attempt's record."""
    return RunFailed(why, refused=exit_status == 2, detail=detail)


def cell_id(cell):
    return cell["id"] if isinstance(cell, dict) else cell.id


def cell_record(cell):
    return asdict(cell) if is_dataclass(cell) else dict(cell)


def williams_rows(n):
    """A Williams Latin square over n cells: n rows (2n when n is odd), in which every cell
    takes every place equally often and follows every other cell equally often (first-order
    carry-over balanced: what ran just before a cell, and where it ran in its round, land on
    every cell alike). Row r is the first row shifted by r: 0, 1, n-1, 2, n-2, ...; an odd n
    adds each row reversed."""
    if n <= 1:
        return [list(range(n))]
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        first.append(lo if len(first) % 2 else hi)
        lo, hi = (lo + 1, hi) if len(first) % 2 == 0 else (lo, hi - 1)
    rows = [[(x + r) % n for x in first] for r in range(n)]
    return rows + ([row[::-1] for row in rows] if n % 2 else [])


def rounds_order(n_cells, n_rounds, order, seed):
    """The schedule: a list of rounds, each a list of cell indexes.
    - balanced (the default): round k is row k of a Williams square (williams_rows) over the
      cells, relabelled by a permutation drawn from `seed`; over a whole square (n rounds, 2n
      for odd n) every cell takes every place and follows every other cell equally often;
    - round-robin: every cell once per round in the same order (whatever carries over from one
      place or predecessor to the next lands on the same cell every round: a bias);
    - shuffle: each round's order drawn from `seed` (balanced only on average);
    - cell: a cell's rounds back to back (one "round" holding each index n_rounds times)."""
    if order not in ORDERS:
        raise ValueError(f"invalid order '{order}': expected one of {', '.join(ORDERS)}")
    if order == "cell":
        return [[i for i in range(n_cells) for _ in range(n_rounds)]]
    rng = random.Random(seed)
    if order == "balanced":
        label = list(range(n_cells))
        rng.shuffle(label)
        rows = williams_rows(n_cells)
        return [[label[x] for x in rows[k % len(rows)]] for k in range(n_rounds)]
    out = []
    for _ in range(n_rounds):
        one = list(range(n_cells))
        if order == "shuffle":
            rng.shuffle(one)
        out.append(one)
    return out


@dataclass
class Experiment:
    """What a scenario asks of the kernel. `out_dir` holds progress.json; `prog` names the
    scenario in its messages."""
    prog: str
    out_dir: str
    cells: list
    rounds: int
    run_one: object  # (cell, round, attempt) -> dict of figures; raises RunFailed
    order: str = "balanced"
    seed: int = 1
    retries: int = 1
    backoff_s: float = 2.0
    identity: dict = field(default_factory=dict)  # what must match for a resume (the cells' axes)
    quiet: bool = False
    resumable: bool = True  # False: out_dir is a temporary folder, removed when the run ends
    after_round: object = None  # (rounds done) -> True to stop before the next round
    on_interrupt: str = "exit"  # "exit": save, say how to resume, exit 130; "raise": save, re-raise
    # () -> (seconds, quiet): waited out before each attempt, outside its measured span
    # (hostlock.settle); its figures join the attempt's record.
    before_each: object = None

    def path(self):
        return os.path.join(self.out_dir, PROGRESS)

    def load(self):
        """The runs already done, when progress.json is this scenario's (same identity and
        cells); a different one is refused rather than mixed in."""
        try:
            with open(self.path()) as f:
                old = json.load(f)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            sys.exit(f"{self.prog}: error: cannot read {self.path()}: {e}")
        ids = sorted(cell_id(c) for c in self.cells)
        if old.get("identity") != self.identity or sorted(old.get("cells", {})) != ids:
            sys.exit(f"{self.prog}: error: {self.path()} is another scenario's progress (other "
                     "cells or options): give another name, or remove it to start over")
        return old["cells"]

    def save(self, done, state):
        doc = {"identity": self.identity, "rounds": self.rounds, "order": self.order,
               "seed": self.seed, "state": state,
               "cells": {cell_id(c): done.get(cell_id(c), {}) for c in self.cells}}
        os.makedirs(self.out_dir, exist_ok=True)
        tmp = self.path() + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, self.path())

    def attempt(self, cell, rnd):
        """One (cell, round): its figures and attempts, retried after a failure."""
        attempts, refused = [], False
        for k in range(1, self.retries + 2):
            if k > 1:
                time.sleep(self.backoff_s * 2 ** (k - 2))
            settled = {}
            if self.before_each:
                waited, quiet = self.before_each()
                settled = {"settle_s": round(waited, 2), "settled_quiet": quiet}
            t0 = time.monotonic()
            outside = hostlock.OutsideCpu()
            try:
                figures = self.run_one(cell, rnd, k)
                return {"status": "ok", "figures": figures, "attempts": attempts,
                        "seconds": round(time.monotonic() - t0, 2), "ended": round(time.time(), 6),
                        "outside_cpu_s": round(outside.seconds(), 3), **settled}
            except RunFailed as e:
                attempts.append({"error": str(e), "seconds": round(time.monotonic() - t0, 2),
                                 **e.detail})
                if not self.quiet:
                    print(f"{self.prog}: {cell_id(cell)} round {rnd + 1} attempt {k} failed: {e}",
                          file=sys.stderr)
                if e.refused:
                    refused = True
                    break
        return {"status": "failed", "error": attempts[-1]["error"], "attempts": attempts,
                **({"refused": True} if refused else {}), "ended": round(time.time(), 6)}

    def run(self):
        """Runs what is missing; returns {cell id: {round: record}} over every round. Ctrl-C or
        SIGTERM saves what ran and exits 130 with the command that resumes."""
        with hostlock.measurement(self.prog):
            return self._run()

    def _run(self):
        done = {k: {int(r): v for r, v in rounds.items()} for k, rounds in self.load().items()}
        kept = _ok_runs(done)
        if kept and not self.quiet:
            print(f"{self.prog}: resuming: {kept} run(s) already done in {self.path()}",
                  file=sys.stderr)
        schedule = rounds_order(len(self.cells), self.rounds, self.order, self.seed)
        seen = {}
        previous = signal.signal(signal.SIGTERM, raise_interrupt)
        try:
            for k, order in enumerate(schedule, 1):
                for idx in order:
                    cell = self.cells[idx]
                    cid = cell_id(cell)
                    rnd = seen[cid] = seen.get(cid, -1) + 1  # cell order: its rounds in turn
                    mine = done.setdefault(cid, {})
                    if mine.get(rnd, {}).get("status") == "ok" or _refused(mine):
                        continue
                    mine[rnd] = self.attempt(cell, rnd)
                    self.save(done, "running")
                if not self.quiet and self.order != "cell":
                    print(f"{self.prog}: round {max(seen.values()) + 1}/{self.rounds} done",
                          file=sys.stderr)
                if self.after_round and self.order != "cell" and self.after_round(k):
                    break
        except KeyboardInterrupt:
            self.save(done, "interrupted")
            if self.on_interrupt == "raise":
                raise
            kept = (f"kept in {self.path()}; the same command resumes" if self.resumable else
                    "not kept (give --out DIR to make a scenario resumable)")
            sys.stderr.write(f"\n{self.prog}: interrupted: {_ok_runs(done)} of "
                             f"{len(self.cells) * self.rounds} runs done, {kept}\n")
            sys.exit(130)
        finally:
            signal.signal(signal.SIGTERM, previous)
        self.save(done, "finished")
        return done


def first_started(done):
    """When the first run of a scenario began (UTC, ISO 8601; None before any ran): what a plan
    committed before the runs is checked against, whatever resumes came between."""
    starts = [r["ended"] - r.get("seconds", 0) for rounds in done.values()
              for r in rounds.values() if r.get("ended")]
    if not starts:
        return None
    return datetime.datetime.fromtimestamp(min(starts), datetime.timezone.utc).isoformat(
        timespec="seconds")


def run_scenario(prog, cells, rounds, run_one, out_dir=None, **options):
    """The kernel for a scenario whose folder is optional: ({cell id: [figures, ...]}, failures).
    With `out_dir` it resumes as any scenario does; without, its progress lives in a temporary
    folder removed when it ends (stopped, it starts over). `options`: Experiment's fields."""
    tmp = None if out_dir else tempfile.mkdtemp(prefix=f"{prog}-")
    try:
        done = Experiment(prog, out_dir or tmp, cells, rounds, run_one, resumable=tmp is None,
                          **options).run()
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return figures_by_cell(done), failures(done)


def _refused(rounds):
    """Did a round of this cell have its command line refused? Every later round would be too."""
    return any(rec.get("refused") for rec in rounds.values())


def _ok_runs(done):
    return sum(1 for rounds in done.values() for rec in rounds.values() if rec["status"] == "ok")


def raise_interrupt(signum, frame):
    """A SIGTERM handler: a supervisor's kill ends a scenario as Ctrl-C does (saved, resumable)."""
    raise KeyboardInterrupt


def default_sigint():
    """A Popen preexec_fn: the child takes SIGINT as Ctrl-C even when this process was started
    with SIGINT ignored (a background job of a non-interactive shell, `nohup ... &`). The child
    inherits that disposition, and a bash child cannot trap a signal ignored at its start, so
    the SIGINT that stops it cleanly would be lost and it would leave its namespaces behind."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_child(cmd, env=None, timeout=600, grace_s=15):
    """subprocess.run(cmd, capture_output=True, text=True) that stops its child cleanly when this
    process is interrupted: SIGINT first, as Ctrl-C would (scripts/netns-link removes its
    namespaces and server, iobench writes its partial report), SIGKILL only after `grace_s`.
    subprocess.run SIGKILLs at once, and a child killed so leaves what it built behind."""
    child = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, preexec_fn=default_sigint)
    try:
        out, err = child.communicate(timeout=timeout)
    except BaseException:  # an interrupt, or the timeout
        child.send_signal(signal.SIGINT)
        try:
            child.communicate(timeout=grace_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
        raise
    return subprocess.CompletedProcess(cmd, child.returncode, out, err)


def figures_by_cell(done, key="round", with_host=False):
    """{cell id: [figures, ...]} of the runs that gave figures, each tagged with its round under
    `key` (two cells of one round share the host's drift: compared paired); `with_host`: with
    the host's CPU outside the run and the wait for a quiet host before it where they were
    recorded (for figures that are one dict of named values, not keyed by size)."""
    host = ("outside_cpu_s", "settle_s", "settled_quiet") if with_host else ()
    return {cid: [dict(rec["figures"], **{key: rnd}, **{k: rec[k] for k in host if k in rec})
                  for rnd, rec in sorted(rounds.items()) if rec["status"] == "ok"]
            for cid, rounds in done.items()}


def failures(done):
    """'CELL round N: error' for every run that failed all its attempts."""
    return [f"{cid} round {rnd}: {rec['error']}" for cid, rounds in done.items()
            for rnd, rec in sorted(rounds.items()) if rec["status"] != "ok"]
