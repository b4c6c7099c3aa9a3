"""scripts/fair-share-attack at a small size (docs/hardening.md, issue #88): the package server
under every attack at once still serves the valid clients, and the report names the host and
what each attack was answered."""
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))


@pytest.mark.slow
def test_a_short_attack_run_serves_its_valid_clients(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the attackers are another user's sockets: needs root")
    out = tmp_path / "attack.json"
    p = subprocess.run([str(ROOT / "scripts" / "fair-share-attack"), "--tries", "4", "--budget",
                        "64M", "--iobench", BIN, "--json", str(out)],
                       capture_output=True, text=True, timeout=300)
    print(p.stdout[-600:])
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(out.read_text())
    assert doc["tries"] == 4 and doc["served"] == 4, doc["runs"]
    assert {r["proto"] for r in doc["runs"]} == {"tcp", "tls"}
    assert doc["host"]["cpu"] and doc["host"]["kernel"]
    # Every attack ran and was answered: the sqpoll asks refused by name.
    assert all(n > 0 for n in doc["attacks"].values()), doc["attacks"]
    assert any("--sqpoll refused" in k for k in doc["outcomes"]["sqpoll trickler"]), doc["outcomes"]


def test_fair_share_attack_refuses_a_bad_count():
    p = subprocess.run([str(ROOT / "scripts" / "fair-share-attack"), "--tries", "0"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "invalid --tries '0'" in p.stderr, p.stderr
