"""scripts/soak at a small size: one server (TCP and TLS ports) serving clients of every kind
and misbehaving ones at once stays flat and logs every session."""
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))


@pytest.mark.slow
def test_a_small_soak_is_flat_and_accounts_for_every_session(tmp_path):
    out = tmp_path / "soak.json"
    p = subprocess.run([str(ROOT / "scripts" / "soak"), "--sessions", "120", "--clients", "3",
                        "--per-client", "10", "--bytes", "64k", "--iobench", BIN,
                        "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(out.read_text())
    assert doc["flat"] and doc["accounted"] and doc["client_failures"] == 0, doc
    # 4 warm-up runs + 12 runs of 10 sessions, and a misbehaving connection after each run.
    assert doc["valid"] == 160 and doc["misbehaving"] == 12 and doc["sessions"] == 172, doc
    assert doc["log_ok"] == 160 and doc["log_refused"] == 12, doc
    assert doc["end"]["fds"] == doc["baseline"]["fds"], doc
    assert "every session accounted for" in p.stdout


def test_soak_refuses_a_bad_count():
    p = subprocess.run([str(ROOT / "scripts" / "soak"), "--sessions", "0"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "invalid --sessions '0'" in p.stderr, p.stderr
