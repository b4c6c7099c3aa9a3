"""The design rule (docs/design-rule.md, issue #56): its page and its code say the same numbers;
the burden is on the larger size; a flat curve names the smallest size and its agreement does
not survive the null; a step under the resolution is not taken; memory or p99 shown worse
stops a larger size; scripts/design-answer reads sweeps and the real server's evidence."""
import json
import math
import pathlib
import random
import re
import subprocess

import pytest

from iobench_tools.commands import design_answer
from iobench_tools.lib.judging import designrule as rule

# Shares no namespace name, netns lock, package or host-wide check with the other script tests:
# a lane apart (scripts/test).
pytestmark = pytest.mark.apart

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "design-rule.md").read_text()
SIZES = [1024, 4096, 8192, 16384, 65536, 262144]
K = 1 << 10


def test_the_page_and_the_code_state_the_same_rule():
    assert f"δ = {rule.DELTA:.0%}" in PAGE
    assert f"K = {rule.SWEEPS} sweeps" in PAGE
    assert f"--repeat {rule.ROUNDS}`" in PAGE and f"**{rule.ROUNDS} rounds" in PAGE
    assert f"{rule.SWEEPS * rule.ROUNDS} paired rounds" in PAGE
    assert f"{rule.DRAWS} draws" in PAGE
    assert f"planned x{rule.WIDTH_SLACK}" in PAGE
    # The planned half-widths are the pilot's sd at K x rounds, with t on K-1 df.
    t = rule.t_quantile(rule.SWEEPS - 1)
    assert f"t on {rule.SWEEPS - 1} degrees of freedom, {t}" in PAGE
    for proto, sd in (("tcp", 0.269), ("tls", 0.082)):
        planned = t * sd / math.sqrt(rule.SWEEPS * rule.ROUNDS)
        assert abs(planned - rule.PLANNED_HALF[proto]) < 0.001, proto


def sweep(costs, rounds=20, sd=0.05, seed=1):
    """One sweep's series {size: {round: cost}}: each size's cost times lognormal noise, plus a
    round level every size of that round shares (the host's drift)."""
    rng = random.Random(seed)
    out = {s: {} for s in costs}
    for r in range(rounds):
        level = math.exp(rng.gauss(0, 0.1))
        for s, c in costs.items():
            out[s][r] = c * level * math.exp(rng.gauss(0, sd))
    return out


def sweeps(costs, k=8, **kw):
    return [sweep(costs, seed=i + 1, **kw) for i in range(k)]


def decide(cpu, real=None, protos=("tcp",)):
    table = rule.table_of(cpu, real or {}, SIZES)
    return rule.answer(table, SIZES, protos)[0]


def test_a_flat_curve_names_the_smallest_size_and_its_agreement_is_the_rule_s():
    cpu = {"tcp": sweeps({s: 1.0 for s in SIZES})}
    assert decide(cpu) == 1024
    agree = rule.agreement(cpu, {}, SIZES, {"tcp": ("tcp",)})
    assert agree["resampled"]["tcp"].get(1024, 0) > 0.9 * rule.DRAWS
    # The null names it as often: the rule, not the runs, makes this agreement.
    assert not design_answer.survives_null(agree, "tcp")


def test_a_step_past_the_resolution_is_taken_and_survives_the_null():
    costs = {1024: 5.0, 4096: 2.2, 8192: 2.1, 16384: 1.3, 65536: 1.0, 262144: 0.96}
    cpu = {"tcp": sweeps(costs)}
    assert decide(cpu) == 65536, "256K's 4% is under the resolution: 64K is not beaten"
    agree = rule.agreement(cpu, {}, SIZES, {"tcp": ("tcp",)})
    assert agree["answers"]["tcp"] == 65536
    assert design_answer.survives_null(agree, "tcp")
    assert agree["null"]["tcp"].get(65536, 0) == 0


def test_the_old_tie_break_s_pick_is_not_made_without_evidence():
    # 64K and 256K 6% apart with one sweep's noise: the recommender's tie-break on the fewest
    # calls took 256K; the rule keeps 64K unless 256K is shown better by more than 10%.
    costs = {1024: 5.0, 4096: 2.2, 8192: 2.1, 16384: 1.3, 65536: 1.06, 262144: 1.0}
    assert decide({"tcp": sweeps(costs, sd=0.25)}) == 65536


def test_memory_shown_worse_stops_a_larger_size_that_saves_cpu():
    costs = {1024: 5.0, 4096: 2.2, 8192: 2.1, 16384: 1.3, 65536: 1.0, 262144: 0.7}
    cpu = {"tcp": sweeps(costs)}
    assert decide(cpu) == 262144
    heavy = {"tcp": {"memory": sweeps({16384: 1.0, 65536: 1.02, 262144: 1.5}, k=6, rounds=5)}}
    assert decide(cpu, heavy) == 65536
    # Memory not shown worse (within the resolution) does not stop it.
    light = {"tcp": {"memory": sweeps({16384: 1.0, 65536: 1.02, 262144: 1.04}, k=6, rounds=5)}}
    assert decide(cpu, light) == 262144


def test_the_design_s_chunk_weighs_both_protocols():
    tcp = sweeps({1024: 5.0, 4096: 2.2, 8192: 2.1, 16384: 1.3, 65536: 1.0, 262144: 0.98})
    tls = sweeps({1024: 3.0, 4096: 1.2, 8192: 1.06, 16384: 1.0, 65536: 1.0, 262144: 1.0})
    table = rule.table_of({"tcp": tcp, "tls": tls}, {}, SIZES)
    assert rule.answer(table, SIZES, ("tls",))[0] == 8192
    assert rule.answer(table, SIZES, ("tcp", "tls"))[0] == 65536


def test_pooling_widens_for_a_between_sweep_term():
    same = [(0.1, 0.02, 20)] * 4
    spread = [(0.0, 0.02, 20), (0.2, 0.02, 20), (0.05, 0.02, 20), (0.15, 0.02, 20)]
    a, b = rule.pool(same), rule.pool(spread)
    assert a["tau"] == 0 and abs(a["log"] - 0.1) < 1e-12
    assert b["tau"] > 0.05 and (b["hi"] - b["lo"]) > 3 * (a["hi"] - a["lo"])
    assert a["df"] == 3 and rule.t_quantile(3) == 2.353


def test_an_interval_wider_than_planned_and_on_a_line_misses_the_resolution():
    line = math.log(1 + rule.DELTA)
    wide = {"log": line, "lo": line - 0.2, "hi": line + 0.2}
    narrow = {"log": line, "lo": line - 0.01, "hi": line + 0.01}
    clear = {"log": 1.0, "lo": 0.5, "hi": 1.5}
    assert rule.reached({("tcp", "cpu", 1, 2): wide}) == [("tcp", 1, 2, 0.2)]
    assert rule.reached({("tcp", "cpu", 1, 2): narrow}) == []
    assert rule.reached({("tcp", "cpu", 1, 2): clear}) == []


PILOT = sorted((ROOT / "results" / "reference-repeat").glob("rr*.tar.xz"))
EVIDENCE = ROOT / "results" / "upstream-9.1" / "evidence-chunk" / "results.json"


@pytest.mark.skipif(len(PILOT) < 2, reason="the pilot's archives are not in this checkout")
def test_the_command_reads_archived_sweeps_and_the_real_server(tmp_path):
    out = tmp_path / "answer"
    p = subprocess.run([str(ROOT / "scripts" / "design-answer"), *map(str, PILOT[:3]),
                        "--evidence", str(EVIDENCE), "--rule", "1", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "results.json").read_text())
    text = (out / "report.md").read_text()
    assert doc["kind"] == "design-answer" and doc["delta"] == rule.DELTA
    assert set(doc["answers"]) == {"design", "tcp", "tls"}
    assert "| 64K |" in text and "05-chunk-size" in text and "#817" in text
    # The pilot ran before the rule: the report says so.
    assert "the runs came first" in text
    assert re.search(r"each sweep's own 95% interval at its last round covers 1 in \d of 3", text)


def test_the_command_refuses_bad_input(tmp_path):
    bad = tmp_path / "e.json"
    bad.write_text(json.dumps({"kind": "sweep"}))
    p = subprocess.run([str(ROOT / "scripts" / "design-answer"), str(tmp_path), str(tmp_path),
                        "--evidence", str(bad)], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "is not a valkey-evidence results.json" in p.stderr
    p = subprocess.run([str(ROOT / "scripts" / "design-answer"), str(tmp_path),
                        "--evidence", str(EVIDENCE)], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "cannot be pooled" in p.stderr


ANSWER = ROOT / "results" / "design-answer"


@pytest.mark.skipif(not (ANSWER / "results.json").is_file(), reason="no committed design answer")
def test_the_committed_design_answer_is_what_its_sweeps_say(tmp_path):
    """results/design-answer re-renders from its archived sweeps and the evidence it names (the
    rule's line aside: it reads git history, which a shallow clone may not hold; and the
    command's, which names this test's folder)."""
    doc = json.loads((ANSWER / "results.json").read_text())
    args = doc["command"].split()[1:]
    if "--rule" not in args:  # made before --rule: the record of rule v1
        args += ["--rule", "1"]
    out = args.index("--out")
    args[out + 1] = str(tmp_path / "again")
    p = subprocess.run([str(ROOT / "scripts" / "design-answer"), *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr

    def body(path):
        return [line for line in path.read_text().splitlines()
                if not line.startswith(("- rule:", "- command:"))]
    assert body(tmp_path / "again" / "report.md") == body(ANSWER / "report.md")
    again = json.loads((tmp_path / "again" / "results.json").read_text())
    assert again["answers"] == doc["answers"] and again["answer"] == doc["answer"]
