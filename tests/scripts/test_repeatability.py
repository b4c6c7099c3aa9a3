"""scripts/repeatability: many sweeps of one command read together — each sweep's statement, how
often it came out, the A/A control's coverage of 1 across sweeps and the between-sweep term."""
import io
import json
import math
import pathlib
import subprocess
import tarfile

from iobench_tools.lib.sweeps import repeatability as rep
from test_sweep import fake_sweep

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "repeatability"


def floor(ratio, half):
    return {"ratio": ratio, "low": ratio * (1 - half), "high": ratio * (1 + half)}


def test_sweeps_that_agree_within_their_intervals_show_no_sweep_level_term():
    cal = rep.aa_calibration([(f"s{i}", floor(r, 0.10))
                              for i, r in enumerate((0.98, 1.01, 1.00, 1.03, 0.99))])
    assert cal["covered"] == 5 and cal["n"] == 5
    assert cal["pooled"]["tau"] == 0 and cal["widened_half"] == cal["stated_half"]
    assert 0.98 < cal["pooled"]["mean"] < 1.02
    low, high = cal["rate"]
    assert high == 1.0 and 0.5 < low < 0.6, "five of five cannot show a 95% rate"


def test_sweeps_further_apart_than_their_intervals_get_a_sweep_level_term():
    # The six round-robin reference sweeps of issue #48: x0.710 .. x1.131, each ±~10%.
    ratios = (0.710, 0.910, 0.929, 1.096, 1.126, 1.131)
    cal = rep.aa_calibration([(f"s{i}", floor(r, 0.10)) for i, r in enumerate(ratios)])
    spread = math.log(1.131 / 0.710)
    assert 0.05 < cal["pooled"]["tau"] < spread
    assert cal["widened_half"] > cal["stated_half"]
    assert cal["covered"] < cal["n"]


def test_random_effects_pools_to_the_common_ratio_and_the_needed_sweeps_follow_the_gap():
    pooled = rep.random_effects([(math.log(1.2), 0.05)] * 4)
    assert abs(pooled["mean"] - 1.2) < 1e-9 and pooled["tau"] == 0
    assert abs(pooled["se"] - 0.025) < 1e-9
    # 20% above against a 5% line: one sweep of ±10% decides; 6% above needs many.
    assert rep.sweeps_needed(math.log(1.2), 0.05, 0.0, 0.05) == 1
    assert rep.sweeps_needed(math.log(1.06), 0.05, 0.02, 0.05) > 50
    assert rep.sweeps_needed(math.log(1.05), 0.05, 0.0, 0.05) is None


def test_wilson_interval_of_a_rate():
    assert rep.wilson(10, 10)[1] > 0.999999 and 0.70 < rep.wilson(10, 10)[0] < 0.73
    low, high = rep.wilson(5, 10)
    assert low < 0.5 < high


def sweep_dir(tmp_path, name, cells, seed, aa):
    d = fake_sweep(tmp_path / name, cells)
    m = json.loads((d / "manifest.json").read_text())
    m.update(name=name, command=f"scripts/sweep {name} --proto tcp", seed=seed, rounds_run=5,
             stopped="every statement settled", started="2026-11-27T08:00:00+00:00",
             finished="2026-11-27T08:04:00+00:00", noise_floor=floor(aa, 0.05))
    (d / "manifest.json").write_text(json.dumps(m))
    return d


def test_the_report_counts_each_sweeps_statement_and_reads_archives(tmp_path):
    cells = [("tcp", 4096, 0, 3.0), ("tcp", 16384, 0, 1.0), ("tcp", 65536, 0, 0.99)]
    a = sweep_dir(tmp_path, "a", cells, 11, 1.0)
    b = sweep_dir(tmp_path, "b", cells, 12, 1.02)
    archive = tmp_path / "b.tar.xz"
    with tarfile.open(archive, "w:xz") as t:
        t.add(b, arcname="b")
    p = subprocess.run([str(SCRIPT), str(a), str(archive)], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "# Repeatability of 2 sweeps" in out
    assert "Command: `scripts/sweep NAME --proto tcp`" in out
    assert "| a | 240 s | 1M | 5 (every statement settled) | 11 | x1.000 [0.950..1.050] | 16K (settled) |" in out
    assert "| b | 240 s | 1M | 5 (every statement settled) | 12 | x1.020" in out  # from its archive
    assert "- TCP: 16K (settled) in 2 of 2" in out
    assert "covered 1 in **2 of 2** sweeps" in out
    assert "| TCP (--cpus 0) | 4K / 64K | 2 | x3.0" in out
    assert "| above x1.05 |" in out and "| within x1.05 |" in out  # 4K and 16K against 64K


def test_bad_inputs_are_refused_with_one_line(tmp_path):
    a = sweep_dir(tmp_path, "a", [("tcp", 4096, 0, 3.0), ("tcp", 16384, 0, 1.0)], 1, 1.0)
    evil = tmp_path / "evil.tar.xz"
    with tarfile.open(evil, "w:xz") as t:
        info = tarfile.TarInfo("../outside")
        info.size = 1
        t.addfile(info, io.BytesIO(b"x"))
    for args, why in (([str(a)], "give two sweeps or more"),
                      ([str(a), str(evil)], f"'{evil}' is not one sweep folder's archive"),
                      ([str(a), str(tmp_path / "none")], "is not a sweep (no such directory"),
                      ([str(a), str(a), "--tolerance", "2"], "invalid --tolerance '2.0'")):
        p = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and why in p.stderr, p.stderr
        assert "Traceback" not in p.stderr
