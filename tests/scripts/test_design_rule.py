"""Rule v1 (docs/design-rule.md, issue #56) is retired (issue #77): its decision code is gone,
its record stays as committed. The record's report and answer are frozen byte for byte (their
SHA-256 taken when the code that rendered them was removed), their banner names today's answer,
and `scripts/design-answer --rule 1` is refused in one line naming the record. The statistics
rule v2 shares with it live on in lib/judging/pooling.py, tested here."""
import hashlib
import json
import math
import pathlib
import random
import subprocess

import pytest

from iobench_tools.lib.judging import pooling

# Shares no namespace name, netns lock, package or host-wide check with the other script tests:
# a lane apart (scripts/test).
pytestmark = pytest.mark.apart

ROOT = pathlib.Path(__file__).resolve().parents[2]
ANSWER = ROOT / "results" / "design-answer"
EVIDENCE = ROOT / "results" / "upstream-9.1" / "evidence-chunk" / "results.json"
FROZEN = {"report.md": "0eea8bf332716d300d1dd1a5b7a4132b980f917e3977d10c96b18029566dbdc4",
          "results.json": "c2b4c6831aa8c2cf383784ec24277ac1dab8ae286081c322151a854c3318e0eb"}


def test_the_record_is_frozen_as_committed():
    for name, digest in FROZEN.items():
        assert hashlib.sha256((ANSWER / name).read_bytes()).hexdigest() == digest, name
    head = "\n".join((ANSWER / "report.md").read_text().splitlines()[:5])
    assert "Record of the rule of 2026-11-28 (v1); today's answer:" in head
    assert json.loads((ANSWER / "results.json").read_text())["rule"] == "docs/design-rule.md"


def test_rule_1_is_refused_naming_the_record(tmp_path):
    p = subprocess.run([str(ROOT / "scripts" / "design-answer"), str(tmp_path), str(tmp_path),
                        "--evidence", str(EVIDENCE), "--rule", "1"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2
    assert "rule v1 is retired; its record is results/design-answer/report.md" in p.stderr
    assert not (ROOT / "iobench_tools" / "lib" / "judging" / "designrule.py").exists()


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


def sweep(costs, rounds=20, sd=0.05, seed=1):
    """One sweep's series {size: {round: cost}}: each size's cost times lognormal noise, plus a
    round level every size of that round shares (the host's drift). The other design tests
    build their sweeps with it."""
    rng = random.Random(seed)
    out = {s: {} for s in costs}
    for r in range(rounds):
        level = math.exp(rng.gauss(0, 0.1))
        for s, c in costs.items():
            out[s][r] = c * level * math.exp(rng.gauss(0, sd))
    return out


def test_pooling_widens_for_a_between_sweep_term():
    same = [(0.1, 0.02, 20)] * 4
    spread = [(0.0, 0.02, 20), (0.2, 0.02, 20), (0.05, 0.02, 20), (0.15, 0.02, 20)]
    a, b = pooling.pool(same), pooling.pool(spread)
    assert a["tau"] == 0 and abs(a["log"] - 0.1) < 1e-12
    assert b["tau"] > 0.05 and (b["hi"] - b["lo"]) > 3 * (a["hi"] - a["lo"])
    assert a["df"] == 3 and pooling.t_quantile(3) == 2.353
    # One sweep's pair of sizes, pooled: its paired rounds' mean log ratio.
    one = sweep({1: 1.0, 2: 0.8}, sd=0.01)
    p = pooling.pooled_pair([one], 1, 2)
    assert abs(math.exp(p["log"]) - 0.8) < 0.01 and p["k"] == 1 and p["df"] == 19
