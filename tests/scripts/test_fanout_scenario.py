"""scripts/fanout-scenario and its recommendation: a tiny scenario on loopback (and on the
emulated fleet when root), and the verdict logic on synthetic runs whose answer is known."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
BIN = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))
from iobench_tools.lib.kernel import experiment
from iobench_tools.lib.sweeps import fanoutlib
from kernel_progress import finished, wait_for_first_run

ENV = dict(os.environ, IOBENCH_BIN=BIN)


def scenario(tmp_path, name, *args):
    p = subprocess.run([str(SCRIPTS / "fanout-scenario"), name, "--results", str(tmp_path),
                        "--bytes", "2M", "--rounds", "2", *args],
                       capture_output=True, text=True, timeout=600, env=ENV)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads((tmp_path / name / "fanout.json").read_text())


def test_tiny_scenario_answers_and_recommends(tmp_path):
    doc = scenario(tmp_path, "fan", "--replicas", "1,3", "--bufs", "16k,adaptive",
                   "--proto", "tcp")
    assert doc["kind"] == "fanout-scenario" and doc["rounds"] == 2
    # Beside each shape and N, the A/A control's twin of 16K (--control auto).
    assert doc["control"] == "16k"
    assert sorted(doc["cells"]) == sorted(
        f"{s}-tcp-n{n}-{b}" for s in ("connset", "event-loop") for n in (1, 3)
        for b in ("16k", "adaptive", "16k-twin"))
    for runs in doc["cells"].values():
        assert len(runs) == 2
        for r in runs:
            assert r["writer_cpu_s_per_gib"] > 0 and r["chunks"] > 0
    n3 = doc["cells"]["connset-tcp-n3-16k"][0]
    assert n3["peak_buffer_bytes"] == 3 * 16 * 1024 and n3["chunks"] == 2 * 1024 // 16
    assert [(v["shape"], v["proto"]) for v in doc["verdicts"]] == [("connset", "tcp"),
                                                                    ("event-loop", "tcp")]
    assert [f["replicas"] for f in doc["verdicts"][0]["noise_floor"]] == [1, 3]
    # Every run's JSON is kept: 12 cells x 2 rounds.
    assert len(list((tmp_path / "fan" / "raw").iterdir())) == 24
    md = (tmp_path / "fan" / "fanout.md").read_text()
    assert "## The answer" in md and "**connset, tcp.**" in md
    assert "A/A control (16k run twice per round under two names" in md
    subprocess.run([str(SCRIPTS / "recommend"), str(tmp_path / "fan")], check=True,
                   capture_output=True)
    rec = (tmp_path / "fan" / "recommendation.md").read_text()
    assert "## Recommendation" in rec and "- connset, tcp: " in rec
    subprocess.run([str(SCRIPTS / "plot"), str(tmp_path / "fan")], check=True, capture_output=True)
    for png in ("fanout_writer_cpu.png", "fanout_last_done.png"):
        assert (tmp_path / "fan" / "plots" / png).read_bytes()[:4] == b"\x89PNG"


def runs_of(table):
    """{(n, buf): [cpu, ...]} -> the scenario's cells, memory = n x size (adaptive: 16K each)."""
    out = {}
    for (n, buf), cpus in table.items():
        size = 16384 if buf == "adaptive" else fanoutlib.size_bytes(buf.removesuffix("-twin"))
        out[f"connset-tcp-n{n}-{buf}"] = [
            {"writer_cpu_s_per_gib": c, "peak_buffer_bytes": n * size} for c in cpus]
    return out


def test_the_best_size_moving_with_n_is_named_with_the_size_that_loses_least():
    runs = runs_of({(1, "16k"): [1.0] * 5, (1, "64k"): [1.2] * 5,
                    (8, "16k"): [1.5] * 5, (8, "64k"): [1.0] * 5,
                    (1, "adaptive"): [1.0, 1.01, 0.99, 1.0, 1.0],
                    (8, "adaptive"): [1.0, 1.01, 0.99, 1.0, 1.0]})
    v = fanoutlib.verdict(runs, [1, 8], ["16k", "64k", "adaptive"], "connset", "tcp", 0.05)
    assert [r["best"] for r in v["per_n"]] == ["16k", "64k"]
    assert v["one_size_for_every_n"] == []
    assert v["minimax"] == "64k" and abs(v["minimax_worst_ratio"] - 1.2) < 1e-9
    assert all(r["adaptive"]["within"] for r in v["per_n"])
    # Adaptive's 8 x 16K is less than 8 x 64K; at N=1 it equals the best's 16K.
    assert all(r["adaptive"]["no_more_memory"] for r in v["per_n"])
    assert "size the chunk by the number of replicas (adaptive)" in fanoutlib.recommendation(v)
    assert "No one size is within 5% of the best at every N" in fanoutlib.answer_text(v)


def test_one_size_for_every_n_and_an_adaptive_that_costs_more():
    runs = runs_of({(1, "16k"): [1.0] * 5, (1, "64k"): [1.02] * 5,
                    (8, "16k"): [1.0] * 5, (8, "64k"): [1.3] * 5,
                    (1, "adaptive"): [1.3] * 5, (8, "adaptive"): [1.3] * 5})
    v = fanoutlib.verdict(runs, [1, 8], ["16k", "64k", "adaptive"], "connset", "tcp", 0.05)
    assert v["one_size_for_every_n"] == ["16k"]
    assert all(r["adaptive"]["outside"] for r in v["per_n"])
    assert "a fixed 16k chunk" in fanoutlib.recommendation(v)
    assert "Adaptive is not within 5%" in fanoutlib.answer_text(v)


def conns_row(conns, label, cpus, memory):
    """One cell of a many-connections sweep as sweeplib.load reads it."""
    size = 0 if label == "adaptive" else fanoutlib.size_bytes(label)
    group = {"peak_buffer_bytes": {"sender": memory, "receiver": memory}}
    return {"proto": "tcp", "engine": "blocking", "conns": conns, "buf": size or 65536,
            "label": label, "total_cpu_runs": cpus, "group": group if conns > 1 or not size
            else None}


def test_many_connections_get_the_same_verdicts_with_their_memory():
    # Independent connections: a budget that binds at N=16 costs CPU for a quarter of the memory.
    rows = [conns_row(1, "16K", [1.3] * 5, 16 << 10), conns_row(1, "64K", [1.0] * 5, 64 << 10),
            conns_row(1, "adaptive", [1.0, 1.01, 0.99, 1.0, 1.0], 64 << 10),
            conns_row(16, "16K", [1.3] * 5, 256 << 10), conns_row(16, "64K", [1.0] * 5, 1 << 20),
            conns_row(16, "adaptive", [1.3, 1.31, 1.29, 1.3, 1.3], 256 << 10)]
    [v] = fanoutlib.conns_verdicts(rows, 0.05)
    assert v["shape"] == "independent" and [r["best"] for r in v["per_n"]] == ["64k", "64k"]
    one, sixteen = (r["adaptive"] for r in v["per_n"])
    assert one["within"] and one["no_more_memory"]
    assert sixteen["outside"] and sixteen["memory_bytes"] == 256 << 10
    text = fanoutlib.answer_text(v)
    assert "Adaptive is not within 5%" in text and "N=16 x1.300" in text, text
    assert fanoutlib.recommendation(v) == (
        "independent, tcp: a fixed 64k buffer (the smallest size within 5% of the best at every "
        "N measured).")


def test_adaptive_is_judged_against_the_best_fixed_size_in_its_memory():
    # N=16: adaptive holds 256K and costs what 16K (also 256K) costs; 64K is 23% cheaper with 4x
    # the memory. Against the best size overall adaptive is short; against the memory frontier
    # (the best fixed size in no more memory) it is within 5%, and the 768K it saves is stated.
    # N=64: adaptive (336K) uses less than any fixed size: no frontier, its saving stated.
    rows = [conns_row(16, "16K", [1.3] * 5, 256 << 10), conns_row(16, "64K", [1.0] * 5, 1 << 20),
            conns_row(16, "adaptive", [1.3, 1.31, 1.29, 1.3, 1.3], 256 << 10),
            conns_row(64, "16K", [1.4] * 5, 1 << 20), conns_row(64, "64K", [1.0] * 5, 4 << 20),
            conns_row(64, "adaptive", [1.7] * 5, 336 << 10)]
    [v] = fanoutlib.conns_verdicts(rows, 0.05)
    n16, n64 = (r["adaptive"] for r in v["per_n"])
    assert n16["outside"] and n16["frontier"] == "16k" and n16["within_frontier"]
    assert n16["memory_saved_bytes"] == 768 << 10
    assert n64["frontier"] is None and n64["memory_saved_bytes"] == (4 << 20) - (336 << 10)
    text = fanoutlib.answer_text(v)
    assert "Against the memory frontier (the best fixed size that used no more memory than " \
           "adaptive did): within 5% at 1 of 1 N; N=16: x1.000 [" in text, text
    assert "of 16k (256K against 256K, 768K less than the best fixed size)" in text
    assert "N=64: less memory than any fixed size (336K, 3760K less" in text
    # Where a fixed size fits in adaptive's memory and costs clearly less, adaptive misses.
    rows[2] = conns_row(16, "adaptive", [1.6] * 5, 256 << 10)
    [v] = fanoutlib.conns_verdicts(rows, 0.05)
    assert v["per_n"][0]["adaptive"]["outside_frontier"]
    assert "above it by more than 5%" in fanoutlib.answer_text(v)


def test_an_aa_control_that_excludes_one_leaves_that_n_undecided():
    # The twin of 16K runs at 0.8x its original in every round (a place in the round, say): at
    # N=8 the A/A interval excludes 1, so adaptive's clear-looking win there is not stated; at
    # N=1 the twin matches and adaptive's verdict stands.
    runs = runs_of({(1, "16k"): [1.0, 1.1, 0.9, 1.0, 1.05], (1, "16k-twin"): [1.0, 1.1, 0.9, 1.0, 1.05],
                    (1, "64k"): [2.0] * 5, (1, "adaptive"): [1.0, 1.1, 0.9, 1.0, 1.05],
                    (8, "16k"): [1.0, 1.1, 0.9, 1.0, 1.05], (8, "64k"): [2.0] * 5,
                    (8, "16k-twin"): [0.8, 0.88, 0.72, 0.8, 0.84],
                    (8, "adaptive"): [1.0, 1.1, 0.9, 1.0, 1.05]})
    for cell in runs.values():
        for k, run in enumerate(cell):
            run["round"] = k
    v = fanoutlib.verdict(runs, [1, 8], ["16k", "64k", "adaptive"], "connset", "tcp", 0.05,
                          control="16k")
    one, eight = v["noise_floor"]
    assert not one["excludes_one"] and eight["excludes_one"] and eight["ratio"] < 0.85
    assert v["per_n"][0]["adaptive"]["within"]
    assert not v["per_n"][1]["adaptive"]["within"] and not v["per_n"][1]["adaptive"]["outside"]
    text = fanoutlib.answer_text(v)
    assert "its interval covers 1 at 1 of 2 N" in text and "(N=8)" in text, text
    assert "1 undecided by the A/A control" in text
    # Without the control the same runs state N=8 as decided.
    plain = fanoutlib.verdict(runs, [1, 8], ["16k", "64k", "adaptive"], "connset", "tcp", 0.05)
    assert plain["per_n"][1]["adaptive"]["within"] and plain["noise_floor"] == []


def test_a_miss_of_the_frontier_names_the_rules_size_as_its_cause():
    # Adaptive's chunks are 64K's at N=2 (same_as), and 16K, in no more memory, is clearly
    # cheaper: the miss is the size the rule picks, and the text says so.
    runs = runs_of({(2, "16k"): [1.0, 1.02, 0.98, 1.0, 1.01], (2, "64k"): [1.3, 1.32, 1.28, 1.3, 1.31],
                    (2, "adaptive"): [1.3, 1.31, 1.29, 1.3, 1.3]})
    v = fanoutlib.verdict(runs, [2], ["16k", "64k", "adaptive"], "connset", "tcp", 0.05,
                          same_as={2: "64k"})
    a = v["per_n"][0]["adaptive"]
    assert a["frontier"] == "16k" and a["outside_frontier"]
    assert "the rule's chunk here is 64k (the same chunks), and 64k costs more than 16k" in \
        fanoutlib.answer_text(v)


def test_a_control_size_not_swept_is_refused(tmp_path):
    p = subprocess.run([str(SCRIPTS / "fanout-scenario"), "x", "--results", str(tmp_path),
                        "--bufs", "16k,64k", "--control", "4k"], capture_output=True, text=True,
                       timeout=60, env=ENV)
    assert p.returncode == 2 and "invalid --control '4k'" in p.stderr, p.stderr


needs_root = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"),
                                reason="network namespaces need root, ip and tc")


@needs_root
def test_fleet_scenario_runs_each_replica_on_its_own_link(tmp_path):
    doc = scenario(tmp_path, "fleet", "--where", "fleet", "--replicas", "2", "--bufs", "16k",
                   "--shapes", "connset", "--proto", "tcp,tls")
    assert doc["where"] == "fleet" and doc["rate"] == "5gbit"
    run = json.loads(next((tmp_path / "fleet" / "raw").glob("connset-tls-n2-16k.round0.json"))
                     .read_text())
    assert run["options"]["server"] == "10.232.1.2:5210,10.232.2.2:5210"
    g = run["results"][0]["runs"][0]["group"]
    assert all(c["ok"] for c in g["conns"]) and g["fanout"]["replicas"] == 2
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "iobnet-" not in names, "the fleet's namespaces are torn down"


def test_rounds_recorded_are_compared_round_by_round():
    # 64K costs 1.1x 16K in every round, under a drift of 1x..3x: by medians the drift hides
    # it (within 5%), round by round it is shown above the tolerance.
    drift = [1.0, 3.0, 1.5, 2.5, 1.2, 2.8, 1.1, 2.0]
    table = {(1, "16k"): drift, (1, "64k"): [1.1 * d for d in drift]}
    unpaired = fanoutlib.verdict(runs_of(table), [1], ["16k", "64k"], "connset", "tcp", 0.05)
    assert unpaired["per_n"][0]["within_tolerance"] == ["16k", "64k"]
    paired_runs = runs_of(table)
    for cell in paired_runs.values():
        for k, run in enumerate(cell):
            run["round"] = k
    paired = fanoutlib.verdict(paired_runs, [1], ["16k", "64k"], "connset", "tcp", 0.05)
    assert paired["per_n"][0]["within_tolerance"] == ["16k"]


def test_a_scenario_stopped_mid_run_resumes_with_the_rounds_it_had(tmp_path):
    """Ctrl-C once the first runs have landed: exit 130, what ran kept in progress.json; the same
    command again runs only what was missing and ends with every round."""
    cmd = [str(SCRIPTS / "fanout-scenario"), "fan", "--results", str(tmp_path), "--bytes", "8M",
           "--rounds", "4", "--replicas", "1,2", "--bufs", "16k", "--proto", "tcp",
           "--shapes", "connset"]
    progress = tmp_path / "fan" / "progress.json"
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                         preexec_fn=experiment.default_sigint)  # Ctrl-C reaches it
    kept = wait_for_first_run(progress, p, 120)
    assert kept, "no run landed in progress.json"
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "interrupted:" in err and "the same command resumes" in err
    state = json.loads(progress.read_text())
    assert state["state"] == "interrupted"
    ran_before = finished(progress)
    assert len(ran_before) < 8, "the interrupt came after the last run"

    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=ENV)
    assert again.returncode == 0, again.stderr
    assert f"resuming: {len(ran_before)} run(s) already done" in again.stderr
    after = json.loads(progress.read_text())
    assert after["state"] == "finished"
    for (c, r), ended in ran_before.items():
        assert after["cells"][c][r]["ended"] == ended, f"{c} round {r} ran again"
    doc = json.loads((tmp_path / "fan" / "fanout.json").read_text())
    assert all(len(runs) == 4 for runs in doc["cells"].values())


def test_a_resume_with_other_options_is_refused(tmp_path):
    base = [str(SCRIPTS / "fanout-scenario"), "fan", "--results", str(tmp_path), "--rounds", "1",
            "--replicas", "1", "--bufs", "16k", "--proto", "tcp", "--shapes", "connset"]
    first = subprocess.run([*base, "--bytes", "1M"], capture_output=True, text=True, timeout=300,
                           env=ENV)
    assert first.returncode == 0, first.stderr
    other = subprocess.run([*base, "--bytes", "2M"], capture_output=True, text=True, timeout=300,
                           env=ENV)
    assert other.returncode != 0
    assert "is another scenario's progress" in other.stderr.strip().splitlines()[-1]


def test_a_token_goes_by_file_never_by_argv(tmp_path):
    """--auth-token after -- would sit in argv and three times in fanout.json (issue #58):
    refused in one line, and --auth-token-file is checked before anything runs."""
    script = str(ROOT / "scripts" / "fanout-scenario")
    p = subprocess.run([script, "tok", "--connect", "127.0.0.1:5210", "--", "--auth-token",
                        "s3cret"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "give --auth-token-file FILE" in p.stderr
    assert "s3cret" not in p.stderr
    p = subprocess.run([script, "tok", "--connect", "127.0.0.1:5210", "--auth-token-file",
                        str(tmp_path / "missing")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "invalid --auth-token-file" in p.stderr
    token = tmp_path / "token"
    token.write_text("a-long-enough-test-token\n")
    p = subprocess.run([script, "tok", "--auth-token-file", str(token)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and "--auth-token-file is for --connect" in p.stderr
