"""tests/conftest.py's --lane K/N, with which scripts/test runs one suite as pytest processes side
by side: the lanes of a suite are disjoint, together they are the whole suite, each is within
one test of the others, and a bad K/N is refused in one line; the e2e lanes share the payloads
they build, whole."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Shares no namespace name, netns lock, package or host-wide check with the other script tests:
# a lane apart (scripts/test).
pytestmark = pytest.mark.apart

TESTS = Path(__file__).resolve().parents[1]
SUITE = "e2e/test_link_faults.py"  # parametrized: about 40 tests, collected without running any
BIN = os.environ.get("IOBENCH_BIN", str(TESTS.parent / "build" / "release" / "iobench"))


def collected(*args):
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "--collect-only", SUITE, *args], cwd=TESTS, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return [line for line in p.stdout.splitlines() if "::" in line]


@pytest.mark.parametrize("n", [2, 3])
def test_lanes_deal_the_suite_out_whole_and_even(n):
    everything = collected()
    lanes = [collected("--lane", f"{k}/{n}") for k in range(1, n + 1)]
    assert len(everything) > 2 * n
    assert sorted(sum(lanes, [])) == sorted(everything)
    assert len(set(sum(lanes, []))) == len(everything), "a test in two lanes"
    assert max(map(len, lanes)) - min(map(len, lanes)) <= 1
    # Dealt out one by one in collection order: a file's alike tests spread over every lane.
    assert lanes[0][0] == everything[0] and lanes[1][0] == everything[1]


@pytest.mark.parametrize("bad", ["0/2", "3/2", "1/0", "x", "1/2/3", ""])
def test_a_bad_lane_is_refused_in_one_line(bad):
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "--collect-only", SUITE, "--lane", bad], cwd=TESTS, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 4, p.stdout + p.stderr  # pytest's usage error
    errors = [line for line in p.stderr.splitlines() if line.startswith("ERROR:")]
    assert errors == [f"ERROR: invalid --lane '{bad}' (expected K/N with 1 <= K <= N)"], p.stderr


def e2e_conftest():
    spec = importlib.util.spec_from_file_location("e2e_conftest", TESTS / "e2e" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lanes_share_only_whole_payloads_and_iobench_reads_them_as_its_own(tmp_path):
    share = e2e_conftest().share_payloads
    built, lane = tmp_path / "built", tmp_path / "lane"
    built.mkdir(mode=0o700)
    lane.mkdir(mode=0o700)
    subprocess.run([BIN, "payload", "--bytes", "1M", "--cache-dir", built, "-o", os.devnull, "-q"],
                   check=True, timeout=60)
    (built / "resp-v2-seed1-l3-2048.zst.tmp.99").write_bytes(b"half")  # another lane's, mid-copy
    (lane / "resp-v2-seed9-l3-4096.zst").write_bytes(b"mine")
    (built / "resp-v2-seed9-l3-4096.zst").write_bytes(b"theirs")
    share(built, lane)
    assert sorted(f.name for f in lane.iterdir()) == ["resp-v2-seed1-l3-1048576.zst",
                                                      "resp-v2-seed9-l3-4096.zst"]
    assert (lane / "resp-v2-seed9-l3-4096.zst").read_bytes() == b"mine", "a lane's own replaced"
    copied = lane / "resp-v2-seed1-l3-1048576.zst"
    assert copied.read_bytes() == (built / copied.name).read_bytes()
    # iobench takes the copy as its cache's own: read, not built again (a build renames a new file
    # in, a new inode).
    inode = copied.stat().st_ino
    p = subprocess.run([BIN, "payload", "--bytes", "1M", "--cache-dir", lane, "-o", os.devnull,
                        "-q"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert copied.stat().st_ino == inode
