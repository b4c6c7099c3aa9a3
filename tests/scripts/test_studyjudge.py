"""The one judge of one study (iobench_tools/lib/judging/studyjudge.py, issue #66 item 6): rule
v2's sequence on a study's paired rounds. A size is taken only by its own step (a gain past 10%,
its cost below x1.10); a step short of 10% settles the statement at the size before it; a step
the rounds cannot yet call is open, with the rounds that would likely settle it; a step among
the real server's sizes is refused for want of its harms, saying what gain it had shown."""
import random

from iobench_tools.lib.judging import studyjudge

K = 1024


def study(levels, spread=0.01, rounds=6, seed=1):
    """{size: {round: cost}}: each size at its level, every round's costs moved together by the
    round's drift (what interleaving pairs away) and apart by `spread`."""
    rng = random.Random(seed)
    drift = [rng.uniform(0.8, 1.2) for _ in range(rounds)]
    return {size: {r: level * drift[r] * rng.uniform(1 - spread, 1 + spread)
                   for r in range(rounds)} for size, level in levels.items()}


def test_a_step_short_of_ten_percent_settles_the_size_before_it():
    v = studyjudge.judge({"tcp": study({4 * K: 3.0, 8 * K: 2.0, 32 * K: 1.94})})
    assert v.size == 8 * K and v.state == "ended" and v.settled, v
    assert [s[2] for s in v.steps] == ["passed", "failed"], v.steps
    assert "no test shows 32K cheaper than 8K by more than 10%" in v.words()


def test_every_size_passing_names_the_largest_and_says_larger_may_be_cheaper():
    v = studyjudge.judge({"tcp": study({4 * K: 3.0, 8 * K: 2.0, 32 * K: 1.0})})
    assert v.size == 32 * K and v.state == "all" and v.settled
    assert "a larger size may be cheaper still" in v.words()


def test_a_step_the_rounds_cannot_call_is_open_with_the_rounds_it_needs():
    # 8K about 12% cheaper than 4K, the rounds spread +-15% apart: neither shown nor refuted.
    noisy = {"tcp": {4 * K: {r: 1.0 for r in range(5)},
                     8 * K: dict(enumerate([0.75, 1.0, 0.8, 0.95, 0.9]))}}
    v = studyjudge.judge(noisy)
    assert v.size == 4 * K and v.state == "open" and not v.settled, v
    assert v.more is not None and v.more > 5, v
    # Twice the rounds at the same spread: the open step passes.
    doubled = {"tcp": {s: {r + 5 * k: c for k in range(8) for r, c in costs.items()}
                       for s, costs in noisy["tcp"].items()}}
    assert studyjudge.judge(doubled).size == 8 * K


def test_a_step_among_the_real_server_s_sizes_is_refused_and_says_what_it_had_shown():
    v = studyjudge.judge({"tcp": study({4 * K: 3.0, 16 * K: 1.5, 64 * K: 1.0})})
    assert v.size == 16 * K and v.state == "ended", v
    small, large, state, why = v.steps[-1]
    assert (small, large, state) == (16 * K, 64 * K, "failed")
    assert "the real server's harms are not measured" in why and "its gain was shown: TCP CPU " \
        "x0.6" in why, why


def test_both_protocols_read_together_take_a_gain_in_either_and_no_harm_in_both():
    tcp = study({4 * K: 3.0, 8 * K: 1.0}, seed=2)
    tls = study({4 * K: 2.0, 8 * K: 2.02}, seed=3)  # no gain, no harm past 10%
    assert studyjudge.judge({"tcp": tcp, "tls": tls}).size == 8 * K
    worse = study({4 * K: 2.0, 8 * K: 2.5}, seed=3)  # 25% dearer: a harm
    assert studyjudge.judge({"tcp": tcp, "tls": worse}).size == 4 * K


def test_a_study_without_two_paired_rounds_is_not_read():
    one = {"tcp": {4 * K: {0: 3.0}, 8 * K: {0: 1.0}}}
    v = studyjudge.judge(one)
    assert v.size is None and v.state == "unread" and "not read" in v.words()
    rows = [{"buf": 4 * K, "rounds": None, "total_cpu_runs": [3.0, 3.1]},
            {"buf": 8 * K, "rounds": [1, 2], "total_cpu_runs": [1.0, 1.1]}]
    assert studyjudge.of_rows(rows) == {8 * K: {1: 1.0, 2: 1.1}}
    assert studyjudge.of_runs([(4 * K, [3.0, 3.1]), (8 * K, [1.0])]) == {}  # cannot pair
    assert studyjudge.of_runs([(4 * K, [3.0, 3.1]), (8 * K, [1.0, 1.1])]) == {
        4 * K: {0: 3.0, 1: 3.1}, 8 * K: {0: 1.0, 1: 1.1}}
