"""scripts/compression-model: stock 9.1.2's slices of an LZ4 block, the A/A twin read before the
pair, a real (small) run whose write counts follow the modelled patterns, and bad input."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from iobench_tools.commands import compression_model as cm

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "compression-model"
IOBENCH = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))


def test_stock_slices_a_block_and_keeps_its_tail_a_write_of_its_own():
    assert cm.stock_pattern(65536 + 4, 16384) == [16384] * 4 + [4]
    assert cm.stock_pattern(20000 + 4, 16384) == [16384, 3620]
    assert cm.stock_pattern(16384, 16384) == [16384]


def row(ratio, aa):
    return {"ratio_04_stock": {"median": ratio[1], "min": ratio[0], "max": ratio[2]},
            "ratio_aa": {"median": aa[1], "min": aa[0], "max": aa[2]}}


def test_the_twin_is_read_first_then_the_pair():
    assert cm.verdict(row((0.7, 0.8, 0.85), (1.05, 1.1, 1.2))).startswith("not read")
    assert cm.verdict(row((0.9, 0.97, 1.02), (0.98, 1.0, 1.03))).startswith("parity")
    assert cm.verdict(row((0.95, 0.96, 0.98), (0.97, 1.0, 1.03))).startswith("not told apart")
    assert cm.verdict(row((0.75, 0.8, 0.85), (0.98, 1.0, 1.03))) == "04 cheaper"
    assert cm.verdict(row((1.2, 1.3, 1.4), (0.98, 1.0, 1.03))) == "04 dearer"


@pytest.mark.skipif(not os.access(IOBENCH, os.X_OK), reason=f"no iobench at {IOBENCH}")
def test_a_small_run_writes_what_each_arm_models(tmp_path):
    env = dict(os.environ, IOBENCH_HOST_LOCK="off")
    p = subprocess.run([sys.executable, str(SCRIPT), "--proto", "tcp", "--blocks", "64k,20000",
                        "--bytes", "4M", "--rounds", "1", "--cpus", "none", "--iobench", IOBENCH,
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=300,
                       env=env)
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "results.json").read_text())
    rows = {r["block"]: r for r in doc["rows"]}
    # Writes per GiB, iobench's own count: 5 per 65540 bytes against 4 per 65536, and 2 per
    # 20004 bytes against one a chunk.
    w = lambda r, arm: r[arm]["writes_per_gib"]["median"]  # noqa: E731
    assert w(rows[65536], "stock") / w(rows[65536], "04") == pytest.approx(1.25, rel=0.01)
    assert w(rows[20000], "stock") / w(rows[20000], "04") == pytest.approx(2 * 16384 / 20004,
                                                                         rel=0.01)
    assert doc["host"] and doc["sources"]["stock_pattern"]
    report = (tmp_path / "report.md").read_text()
    assert "a model, not a Valkey run" in report and "--write-pattern 16384,3620" in report


@pytest.mark.parametrize("args, said", [(["--blocks", "0"], "--blocks"),
                                        (["--blocks", "64q"], "64q"),
                                        (["--chunk", "x"], "'x'")])
def test_bad_input_is_one_line_naming_it(args, said):
    p = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and said in p.stderr.strip().splitlines()[-1]


def test_a_round_failed_in_one_arm_is_left_out_of_its_pairs():
    stock = [{"round": 1, "cpu_s_per_gib": 2.0}, {"round": 3, "cpu_s_per_gib": 4.0}]
    whole = [{"round": 1, "cpu_s_per_gib": 1.0}, {"round": 2, "cpu_s_per_gib": 9.0},
             {"round": 3, "cpu_s_per_gib": 3.0}]
    # By position the second pair would be round 2's 9.0 over round 3's 4.0.
    assert cm.paired_ratios(whole, stock) == [0.5, 0.75]
