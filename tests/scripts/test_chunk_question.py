"""scripts/chunk-question: the chunk question's rule (docs/chunk-question.md) on planted runs: the
gates read first, a harm found where it was planted and nowhere else, one hiccup round moving a
bound by a rank only, and the power a pilot's spread gives."""
import json
import math
import random
import subprocess
from pathlib import Path

from iobench_tools.lib.judging import chunkrule

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "chunk-question"
BUILDS = ["series~16k", "series~16k#2", "series~32k", "series~64k"]
CONDS = [("dual", 1), ("diskless", 1), ("disk", 1)]


def planted(rounds=30, sd=0.03, harm=None, idle_gap=1.0, twin_gap=1.0, hiccup=None, seed=1):
    """A valkey-evidence results.json whose p99s are 5 ms x the planted ratios x noise."""
    rng = random.Random(seed)
    cells = []
    for b in BUILDS:
        for mode, n in CONDS + [("idle", None)]:
            ratio = 1.0
            if harm and (b, mode) == harm[:2]:
                ratio = harm[2]
            if mode == "idle" and b != "series~16k":
                ratio = idle_gap
            if b == "series~16k#2" and mode != "idle":
                ratio = twin_gap
            runs = []
            for r in range(rounds):
                v = 5.0 * ratio * math.exp(rng.gauss(0, sd))
                if hiccup and (b, mode, r) == hiccup:
                    v *= 20
                runs.append({"round": r, "sync_p99_ms": v, "p99_ms": v})
            cid = (f"tcp-idle-{b}" if mode == "idle" else f"tcp-{mode}-n{n}-{b}")
            cells.append({"id": cid, "build": b, "proto": "tcp", "mode": mode, "replicas": n,
                          "runs": runs})
    return {"kind": "valkey-evidence", "builds": BUILDS, "cells": cells, "command": "x",
            "host": None}


def test_a_medians_bounds_are_its_order_statistics():
    x = list(range(1, 21))  # 20 rounds at the rule's level for 12 judgements
    assert chunkrule.median_bounds(x, 1 - 0.05 / 12) == (4, 17)
    assert chunkrule.median_bounds(x, 1 - 0.05 / 6) == (5, 16)
    assert chunkrule.median_bounds([1, 2, 3], 0.99) == (None, None)  # too few to bound


def read(doc):
    return chunkrule.read(doc, ["series~32k", "series~64k"], "series~16k", "series~16k#2")


def test_no_harm_takes_the_largest_size_and_a_planted_one_is_found_where_it_was():
    r = read(planted())
    assert all(g["ok"] for g in r["gates"]) and r["answer"]["size"] == "series~64k"
    r = read(planted(harm=("series~64k", "disk", 1.3)))
    bad = [j for j in r["judgements"] if j["verdict"] != "within 10%"]
    assert [(j["build"], j["condition"][0], j["verdict"]) for j in bad] == [
        ("series~64k", "disk", "harm above 10%")]
    assert r["answer"]["size"] == "series~32k"
    # 32K harmed: 64K is not taken either, whatever it shows.
    assert read(planted(harm=("series~32k", "dual", 1.3)))["answer"]["size"] == "series~16k"


def test_one_hiccup_round_moves_a_bound_by_a_rank_not_by_its_size():
    calm, hiccup = read(planted()), read(planted(hiccup=("series~64k", "dual", 3)))
    j0, j1 = (next(j for j in r["judgements"] if j["build"] == "series~64k"
                   and j["condition"][0] == "dual") for r in (calm, hiccup))
    assert j1["verdict"] == "within 10%" and j1["high"] < 1.10
    assert abs(math.log(j1["high"] / j0["high"])) < 0.05


def test_a_gate_that_does_not_cover_1_voids_the_reading():
    r = read(planted(idle_gap=1.35))
    assert not all(g["ok"] for g in r["gates"] if g["gate"] == "idle")
    assert r["answer"]["size"] is None and "does not resolve" in r["answer"]["why"]
    r = read(planted(twin_gap=1.2))
    assert r["answer"]["size"] is None and "A/A series~16k#2" in r["answer"]["why"]


def test_the_power_a_spread_gives():
    assert chunkrule.power(0.02, 20, 1.0, 6, draws=200) > 0.95
    assert chunkrule.power(0.5, 20, 1.0, 6, draws=200) < 0.05


def test_the_command_reports_and_refuses_bad_input(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(planted(rounds=12)))
    p = subprocess.run([str(SCRIPT), str(path), "--power"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert "**Answer**: series~64k" in p.stdout and "## Power" in p.stdout
    for args, said in (([str(tmp_path / "none.json")], "invalid RESULTS.json"),
                       ([str(path), "--larger", "series~128k"], "invalid builds series~128k")):
        p = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and said in p.stderr and "Traceback" not in p.stderr, p.stderr
