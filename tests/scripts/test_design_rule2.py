"""Rule v2 (docs/design-rule-v2.md, issue #66): its page and its code state the same numbers; a
harm not shown below x1.10 stops a larger size however large its gain; a gain shown only through
a third size names nothing; the real server's harms unmeasured stop a step among its sizes; the
targeted null fails on a step that is not there and holds on one that is; two hosts' sweeps are
refused as one host's."""
import math
import pathlib
import random
import subprocess

import pytest

from iobench_tools.commands import design_answer
from iobench_tools.lib.judging import designrule2 as rule
from test_design_rule import sweep

pytestmark = pytest.mark.apart

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "design-rule-v2.md").read_text()
SIZES = [4096, 16384, 65536, 262144]


def test_the_page_and_the_code_state_the_same_rule():
    assert f"δ = {rule.DELTA:.0%}" in PAGE
    assert f"α = {rule.ALPHA}" in PAGE
    assert f"DRAWS = {rule.DRAWS}" in PAGE
    assert "16K, 64K and 256K" in PAGE and rule.REAL_SIZES == (16384, 65536, 262144)
    assert f"at least {1 - rule.ALPHA:.0%} of them" in PAGE


def test_t_quantiles_are_students():
    assert abs(rule.t_upper(0.05, 7) - 1.895) < 0.001
    assert abs(rule.t_upper(0.025, 7) - 2.365) < 0.001
    assert abs(rule.t_upper(0.05, 4) - 2.132) < 0.001


def cpu_of(costs, k=8, sd=0.03):
    """k sweeps of `costs` (test_design_rule's: a round level every size shares, per-size noise)."""
    return {"tcp": [sweep(costs, seed=i + 1, sd=sd) for i in range(k)]}


def real_cells(ratios, rounds=5, sd=0.01, seed=3):
    """One real-server criterion's cells: each {size: {round: value}} with 64K and 256K at the
    given ratio of 16K's."""
    rng = random.Random(seed)
    cells = []
    for ratio64, ratio256 in ratios:
        cell = {16384: {}, 65536: {}, 262144: {}}
        for r in range(rounds):
            base = 100 * math.exp(rng.gauss(0, 0.05))
            cell[16384][r] = base * math.exp(rng.gauss(0, sd))
            cell[65536][r] = base * ratio64 * math.exp(rng.gauss(0, sd))
            cell[262144][r] = base * ratio256 * math.exp(rng.gauss(0, sd))
        cells.append(cell)
    return cells


STEEP = {4096: 4.0, 16384: 2.0, 65536: 1.5, 262144: 1.4}  # every step a clear CPU gain
SMALL_HARMS = {"memory": real_cells([(1.01, 1.02)] * 3), "p99": real_cells([(1.0, 1.01)] * 3)}


def test_small_harms_let_a_clear_gain_through():
    answer, steps = rule.answer(cpu_of(STEEP), {"tcp": SMALL_HARMS}, SIZES, ("tcp",))
    assert [s["ok"] for s in steps] == [True, True, False] and answer == 65536, steps
    # 256K over 64K: x0.933, a gain under 10%: not taken.
    assert not steps[-1]["gains"] and not steps[-1]["failed"]


def test_a_harm_at_8_percent_with_a_wide_interval_stops_a_larger_size():
    # p99 at 64K x1.08 in one cell, from 5 noisy rounds: its bound passes x1.10. v1 sees no
    # harm shown above 10% and takes 64K; v2 asks the harm to be shown below it.
    noisy = real_cells([(1.08, 1.10)], sd=0.06, seed=5)
    real = {"tcp": {"memory": SMALL_HARMS["memory"], "p99": SMALL_HARMS["p99"] + noisy}}
    answer, steps = rule.answer(cpu_of(STEEP), real, SIZES, ("tcp",))
    assert answer == 16384, steps
    failed = steps[-1]["failed"]
    assert [(p, c, cell) for p, c, cell, _, _ in failed] == [("tcp", "p99", 3)], failed
    assert math.exp(failed[0][4]) > 1.10  # rule v1 (retired) took 64K here: no harm shown


def test_a_gain_shown_only_through_a_third_size_names_nothing():
    # 256K is 20% cheaper than 16K, 64K only 9%, and 256K against 64K only 11%... at this
    # noise v1 lets 16K fall to 256K and names 64K (not beaten by 256K); v2's step 16K -> 64K
    # is not shown, so the sequence stops at 16K.
    costs = {4096: 4.0, 16384: 2.0, 65536: 2.0 / 1.09, 262144: 2.0 / 1.20}
    cpu = cpu_of(costs, sd=0.25)
    real = {"tcp": SMALL_HARMS}  # rule v1 (retired) let 16K fall to 256K here and named 64K
    answer, steps = rule.answer(cpu, real, SIZES, ("tcp",))
    assert answer == 16384 and not steps[-1]["ok"], steps


def test_a_step_among_the_real_server_s_sizes_needs_its_harms_measured():
    answer, steps = rule.answer(cpu_of(STEEP), {}, SIZES, ("tcp",))
    assert answer == 16384
    assert steps[-1]["unmeasured"] == [("tcp", "memory"), ("tcp", "p99")]


def test_the_targeted_null_fails_on_a_step_that_is_not_there_and_holds_on_one_that_is():
    flat = {s: 1.0 for s in SIZES}
    agree = rule.agreement(cpu_of(flat, k=4), {}, SIZES, ("tcp",))
    assert agree["answer"] == 4096 and not rule.step_is_real(agree, SIZES)
    # A step of 2x from 4K to 16K is real: exchanged with 4K's costs it fails.
    agree = rule.agreement(cpu_of(STEEP, k=4), {}, SIZES, ("tcp",))
    assert agree["answer"] == 16384
    assert rule.step_is_real(agree, SIZES), agree["null_below"]
    # 16K over 64K is the rule's default here (no harms measured): the null above says so.
    assert agree["null_above"] == {16384: rule.DRAWS}
    assert len(agree["left_out"]) == 4 and sum(agree["rounds"].values()) == rule.DRAWS


def test_two_hosts_sweeps_are_refused_as_one_host_s(capsys):
    sweeps = [("rr01", {"hosts_seen": ["Intel Xeon, 2 CPUs, Linux 6.18.44-fc-v657, x86_64"]}, []),
              ("da01", {"hosts_seen": ["AMD EPYC, 2 CPUs, Linux 6.18.44-fc-v782, x86_64"]}, [])]
    with pytest.raises(SystemExit) as e:
        design_answer.one_host(sweeps, {})
    assert "the sweeps ran on 2 hosts" in str(e.value) and "rr01 on Intel Xeon" in str(e.value)
    one = sweeps[1:]
    assert design_answer.one_host(one, {}).startswith("AMD EPYC")
    with pytest.raises(SystemExit) as e:
        design_answer.one_host(one, {"host": {"cpu_model": "Intel Xeon", "cpus": 2,
                                              "kernel": "Linux 6.18.44-fc-v657",
                                              "machine": "x86_64"}})
    assert "the real server's evidence ran on Intel Xeon" in str(e.value)


PILOT = ROOT / "results" / "reference-repeat" / "rr01.tar.xz"
DESIGN = ROOT / "results" / "design-answer" / "da01.tar.xz"
EVIDENCE = ROOT / "results" / "upstream-9.1" / "evidence-chunk" / "results.json"


@pytest.mark.skipif(not (PILOT.is_file() and DESIGN.is_file()), reason="archives not here")
def test_the_command_refuses_the_pilot_and_the_design_sweeps_together():
    p = subprocess.run([str(ROOT / "scripts" / "design-answer"), str(PILOT), str(DESIGN),
                        "--evidence", str(EVIDENCE)], capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert "the sweeps ran on 2 hosts" in p.stderr and "Intel" in p.stderr and "AMD" in p.stderr
    assert p.stderr.count("\n") == 1, p.stderr


def test_the_real_server_s_run_is_read_against_the_page_that_planned_it(monkeypatch):
    monkeypatch.setattr(design_answer, "rule_commits",
                        lambda page: (("abc1234", "2026-11-29T07:50:00+00:00"),))
    run = {"started": "2026-11-29T08:00:00+00:00", "where": "fleet",
           "link": {"rate": "5gbit", "mtu": 9001}}
    line, = design_answer.harms_plan(run)
    assert "abc1234" in line and "fleet 5gbit MTU 9001" in line
    assert "**the plan came first**" in line
    line, = design_answer.harms_plan(dict(run, started="2026-11-29T07:00:00+00:00"))
    assert "the runs came first" in line
    assert design_answer.harms_plan({"where": "loopback"}) == []  # an older run: no plan


def test_the_idle_control_says_whether_p99_resolves_where_the_chunk_does_no_work():
    from iobench_tools.lib.judging import designreport2
    quiet = {"tcp": {"p99": [sweep({16384: 1.0, 65536: 1.0}, rounds=28, sd=0.02, seed=7)]}}
    loud = {"tcp": {"p99": [sweep({16384: 1.0, 65536: 1.0}, rounds=28, sd=0.6, seed=7)]}}
    (row,) = designreport2.idle_control(quiet)
    assert row[:4] == ("tcp", "p99", 16384, 65536) and row[5] < rule.LINE
    (row,) = designreport2.idle_control(loud)
    assert row[5] > rule.LINE
    text = "\n".join(designreport2.control_lines(designreport2.idle_control(loud)))
    assert "## The idle control and the spread" in text and "| TCP | client p99 | 16K -> 64K |" in text
    assert "**no**" in text
    assert designreport2.control_lines([]) == []


HARMS = ROOT / "results" / "design-answer" / "hosts" / "amd-epyc-2cpu-fc-v657" / "harms"


@pytest.mark.skipif(not (HARMS / "results.json").is_file(), reason="no committed harm run")
def test_the_committed_harm_run_stops_64k_on_its_p99_and_passes_its_memory():
    """docs/design-rule-v2-harms.md's run, read by rule v2's step alone (its harms need no CPU):
    the child's memory is shown below x1.10 in all 12 conditions, the client p99 is not in five,
    so 64K does not replace 16K on that host and link whatever its CPU gain."""
    import json
    from iobench_tools.lib.sweeps.designinputs import real_series
    names = {}
    real = real_series(json.loads((HARMS / "results.json").read_text()), "sync", names)
    s = rule.step({}, real, 16384, 65536, ("tcp", "tls"))
    assert not s["ok"] and not s["unmeasured"]
    failed = sorted((p, c, names[p][cell]) for p, c, cell, _, _ in s["failed"])
    assert all(c == "p99" for _, c, _ in failed), failed
    assert failed == [("tcp", "p99", "disk, 1 replica(s)"), ("tcp", "p99", "disk, 4 replica(s)"),
                      ("tcp", "p99", "diskless, 1 replica(s)"), ("tcp", "p99", "dual, 1 replica(s)"),
                      ("tls", "p99", "dual, 1 replica(s)")]
    assert sum(len(v) for v in names.values()) == 12


def test_the_spread_gives_each_cell_s_sd_and_their_median():
    from iobench_tools.lib.judging import designreport2

    def cell(logs):
        return {16384: {r: 1.0 for r in range(len(logs))},
                65536: {r: math.exp(x) for r, x in enumerate(logs)}}
    ((proto, crit, small, large, sds),) = designreport2.spread(
        {"tcp": {"p99": [cell([0.0, 0.2]), cell([0.0, 0.4])]}})
    assert (proto, crit, small, large) == ("tcp", "p99", 16384, 65536)
    assert [round(x, 4) for x in sds] == [0.1414, 0.2828]
    text = "\n".join(designreport2.control_lines([], [(proto, crit, small, large, sds)]))
    assert "TCP client p99 16K -> 64K 0.141, 0.212, 0.283" in text
