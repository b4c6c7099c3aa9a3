"""The experiment kernel's schedule (iobench_tools/lib/kernel/experiment.py) and what carries over
inside a round (lib/judging/carryover.py): a balanced schedule puts every cell in every place and after
every other cell equally often, and the analysis finds a place or predecessor effect planted in
synthetic runs under it, and says it cannot under round-robin."""
import itertools
import math
import pathlib
import random
import signal
import subprocess
import time

import pytest

from iobench_tools.lib.judging import carryover

from iobench_tools.lib.kernel import experiment

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("n", range(2, 14))
def test_a_williams_square_balances_place_and_predecessor(n):
    rows = experiment.williams_rows(n)
    assert len(rows) == (n if n % 2 == 0 else 2 * n)
    assert all(sorted(r) == list(range(n)) for r in rows)
    places = {(c, p): 0 for c in range(n) for p in range(n)}
    after = {(a, b): 0 for a, b in itertools.permutations(range(n), 2)}
    for r in rows:
        for p, c in enumerate(r):
            places[(c, p)] += 1
        for a, b in zip(r, r[1:]):
            after[(a, b)] += 1
    assert len(set(places.values())) == 1, "a cell holds one place more often than another"
    assert len(set(after.values())) == 1, "a cell follows one cell more often than another"


def test_the_balanced_order_is_relabelled_by_the_seed_and_keeps_its_balance():
    a = experiment.rounds_order(5, 10, "balanced", 1)
    b = experiment.rounds_order(5, 10, "balanced", 2)
    assert a != b and a == experiment.rounds_order(5, 10, "balanced", 1)
    counts = {}
    for r in a:
        for x, y in zip(r, r[1:]):
            counts[(x, y)] = counts.get((x, y), 0) + 1
    assert set(counts.values()) == {2} and len(counts) == 20
    assert experiment.rounds_order(3, 2, "round-robin", 1) == [[0, 1, 2], [0, 1, 2]]
    assert experiment.rounds_order(2, 3, "cell", 1) == [[0, 0, 0, 1, 1, 1]]
    with pytest.raises(ValueError, match="invalid order 'random'"):
        experiment.rounds_order(2, 2, "random", 1)


def synthetic(schedule, cost_of, noise=0.02, seed=3):
    """Rows as sweeplib gives them: each cell's runs over the rounds, costed by
    cost_of(cell, place, predecessor, round)."""
    rng = random.Random(seed)
    runs = {}
    for rnd, order in enumerate(schedule, 1):
        for i, cid in enumerate(order):
            c = cost_of(cid, i + 1, order[i - 1] if i else None, rnd)
            runs.setdefault(cid, []).append((rnd, c * rng.uniform(1 - noise, 1 + noise)))
    return [{"cell_id": cid, "rounds": [r for r, _ in xs], "total_cpu_runs": [c for _, c in xs]}
            for cid, xs in runs.items()]


def ids(n):
    return [f"c{i}" for i in range(n)]


def test_a_planted_last_place_discount_is_found_under_a_balanced_schedule():
    names = ids(6)
    schedule = [[names[i] for i in r] for r in experiment.rounds_order(6, 12, "balanced", 1)]
    level = {c: 1.0 + 0.3 * i for i, c in enumerate(names)}
    rows = synthetic(schedule, lambda c, place, prev, rnd: level[c] * (0.8 if place == 6 else 1.0)
                     * (1 + 0.01 * rnd))
    e = carryover.effects(rows, schedule)
    assert e["estimable"]
    last = e["place"][-1]
    assert last[0] == 6 and 0.75 < last[1] < 0.88 and last[2][1] < 0.95, last
    assert all(0.95 < g[1] < 1.1 for g in e["place"][:-1]), e["place"]
    text = carryover.text(rows, {"schedule": schedule, "order": "balanced"}, 0.05)[0]
    assert "**1 group(s) carry over beyond the floor**: place 6 x0.8" in text, text


def test_a_planted_predecessor_effect_is_found_and_none_when_there_is_none():
    names = ids(5)
    schedule = [[names[i] for i in r] for r in experiment.rounds_order(5, 10, "balanced", 4)]
    rows = synthetic(schedule, lambda c, place, prev, rnd: 2.0 * (1.25 if prev == "c3" else 1.0))
    e = carryover.effects(rows, schedule)
    worst = max(e["after"], key=lambda g: g[1])
    assert worst[0] == "c3" and worst[1] > 1.15 and worst[2][0] > 1.05, e["after"]
    quiet = synthetic(schedule, lambda c, place, prev, rnd: 2.0)
    text = carryover.text(quiet, {"schedule": schedule, "order": "balanced"}, 0.05)[0]
    assert text.endswith("Both effects are within the floor."), text


def test_round_robin_cannot_tell_place_from_cell():
    names = ids(4)
    schedule = [list(names)] * 6
    rows = synthetic(schedule, lambda c, place, prev, rnd: 1.0 if place < 4 else 0.7)
    assert not carryover.effects(rows, schedule)["estimable"]
    text = carryover.text(rows, {"schedule": schedule, "order": "round-robin"}, 0.1)[0]
    assert "not estimated: every cell ran in the same place" in text


def test_a_child_is_stopped_by_sigint_even_when_its_parent_ignores_it(tmp_path):
    # A sweep under `nohup ... &` starts with SIGINT ignored; its netns-link (bash) would inherit
    # that and lose the SIGINT run_child stops it with, leaving its namespaces behind. Without
    # default_sigint the bash child below cannot trap SIGINT and runs on (checked).
    code = ("import signal, subprocess, sys, time\n"
            "from iobench_tools.lib.kernel import experiment\n"
            "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
            "p = subprocess.Popen(['bash', '-c', 'trap \"exit 7\" INT; "
            "sleep 30 >/dev/null 2>&1 & wait'], preexec_fn=experiment.default_sigint)\n"
            "time.sleep(0.5); p.send_signal(signal.SIGINT); sys.exit(p.wait(timeout=10))\n")
    p = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True,
                       timeout=30, cwd=str(tmp_path),
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 7, p.stderr



def test_a_scenario_s_start_is_its_earliest_run_s_whatever_resumed_between():
    done = {"a": {0: {"status": "ok", "ended": 1000.0, "seconds": 10.0},
                  1: {"status": "ok", "ended": 5000.0, "seconds": 10.0}},
            "b": {0: {"status": "failed", "ended": 2000.0}}, "c": {}}
    assert experiment.first_started(done) == "1970-01-01T00:16:30+00:00"
    assert experiment.first_started({"a": {}}) is None


def test_each_attempt_waits_for_a_quiet_host_outside_its_measured_span(tmp_path):
    calls = []

    def before():
        calls.append(time.monotonic())
        time.sleep(0.2)  # a wait the run's seconds must not hold
        return 0.2, len(calls) % 2 == 1

    cells = [{"id": "a"}, {"id": "b"}]
    done = experiment.Experiment("t", str(tmp_path), cells, 2, lambda c, r, k: {"x": 1},
                                 quiet=True, before_each=before).run()
    assert len(calls) == 4
    recs = [rec for rounds in done.values() for rec in rounds.values()]
    assert all(rec["settle_s"] == 0.2 and rec["seconds"] < 0.2 for rec in recs)
    runs = experiment.figures_by_cell(done, with_host=True)["a"]
    assert {r["settled_quiet"] for r in
            [*runs, *experiment.figures_by_cell(done, with_host=True)["b"]]} == {True, False}
    assert all("outside_cpu_s" in r and r["x"] == 1 for r in runs)
    # Figures keyed by size (engines-compare's) stay as they were without it.
    assert experiment.figures_by_cell(done)["a"][0] == {"x": 1, "round": 0}


def test_a_quiet_host_is_waited_for_and_a_busy_one_given_up_on(monkeypatch):
    from iobench_tools.lib.kernel import hostlock
    monkeypatch.setenv("IOBENCH_HOST_LOCK", "shared")  # the suites': nothing to wait for
    assert hostlock.settle(limit_s=5) == (0.0, False)
    monkeypatch.setenv("IOBENCH_HOST_LOCK", "exclusive")
    waited, quiet = hostlock.settle(limit_s=5)
    assert 0.5 <= waited < 6
    spin = subprocess.Popen(["/usr/bin/python3", "-c",
                             "import time\nend = time.monotonic() + 5\n"
                             "while time.monotonic() < end: pass"])
    try:
        time.sleep(0.2)
        waited, quiet = hostlock.settle(limit_s=1)
        assert not quiet and 1 <= waited < 2.5
    finally:
        spin.kill()
        spin.wait()
