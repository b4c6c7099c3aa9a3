"""The measuring scripts behind the README's tables, on tiny runs: they run, print the table's
shape with numbers in it, and refuse bad arguments."""
import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
BIN = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))


def script(name, *args):
    return subprocess.run([str(SCRIPTS / name), "--iobench", BIN, *args], capture_output=True,
                          text=True, timeout=300)


def test_counting_overhead_prints_on_off_per_size():
    # task I/O accounting needs no privilege, so this runs anywhere.
    p = script("counting-overhead", "--pairs", "1", "--bytes", "1M", "--sizes", "4k,16k",
               "--counter", "taskio")
    assert p.returncode == 0, p.stderr
    assert "counter taskio" in p.stdout
    rows = [l for l in p.stdout.splitlines() if re.match(r"\s+(4k|16k) ", l)]
    assert len(rows) == 2, p.stdout
    for row in rows:
        nums = [float(x) for x in re.findall(r"\d+\.\d+", row)]
        assert len(nums) == 7 and all(n > 0 for n in nums), row  # 2 x (median, min, max), ratio


def test_counting_overhead_refuses_an_unknown_counter():
    p = script("counting-overhead", "--counter", "ebpf")
    assert p.returncode == 2 and "invalid choice: 'ebpf'" in p.stderr


def test_engines_compare_prints_a_row_per_size_and_setup(tmp_path):
    p = script("engines-compare", "--rounds", "1", "--bufs", "4k,16k", "--bytes", "1M",
               "--out", str(tmp_path), "blocking=--engine blocking", "epoll=--engine epoll")
    assert p.returncode == 0, p.stderr
    rows = [l for l in p.stdout.splitlines() if l.startswith("| 4K") or l.startswith("| 16K")]
    assert [r.split("|")[2].strip() for r in rows] == ["blocking", "epoll", "blocking", "epoll"]
    # syscalls/GiB: the kernel's (or iobench's) counts, never empty: 4K is >= 2 x 256 K calls/GiB.
    assert float(rows[0].split("|")[4].strip().removesuffix(" k")) >= 500, rows[0]
    assert sorted(f.name for f in tmp_path.iterdir()) == ["blocking-round0.json",
                                                          "epoll-round0.json"]


def test_engines_compare_refuses_a_setup_without_label():
    p = script("engines-compare", "--rounds", "1", "--engine uring")
    assert p.returncode != 0 and "invalid set-up '--engine uring'" in p.stderr
