"""scripts/watch-overhead at a small size: an iobench run with and without a watch on it,
interleaved, each side's CPU per GiB compared (the figures themselves are for the README, not
for a timed test)."""
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "scripts" / "watch-overhead")


@pytest.mark.skipif(os.geteuid() != 0, reason="iobench watch needs root (eBPF)")
def test_a_round_with_and_without_a_watch(tmp_path):
    out = tmp_path / "overhead.json"
    cmd = [SCRIPT, "--rounds", "1", "--bytes", "8M", "--json", str(out), "--out",
           str(tmp_path / "runs")]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    # Run through the experiment kernel: the same command resumes, with nothing left to run.
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "resuming: 2 run(s) already done" in again.stderr
    assert again.stdout == p.stdout
    doc = json.loads(out.read_text())
    for side in ("sender", "receiver"):
        d = doc[side]
        assert d["unwatched"]["median"] > 0 and d["watched"]["median"] > 0, d
        assert d["verdict"] in ("apart", "parity within noise") and d["ratio"] > 0
    assert "interleaved rounds" in p.stdout


def test_bad_rounds_are_refused():
    p = subprocess.run([SCRIPT, "--rounds", "0"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "invalid --rounds 0" in p.stderr, p.stderr
