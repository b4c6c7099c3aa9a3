"""tests/conftest.py's --lane K/N, with which scripts/test runs one suite as pytest processes side
by side: the lanes of a suite are disjoint, together they are the whole suite, each is within
one test of the others, and a bad K/N is refused in one line."""
import subprocess
import sys
from pathlib import Path

import pytest

# Shares no namespace name, netns lock, package or host-wide check with the other script tests:
# a lane apart (scripts/test).
pytestmark = pytest.mark.apart

TESTS = Path(__file__).resolve().parents[1]
SUITE = "e2e/test_link_faults.py"  # parametrized: about 40 tests, collected without running any


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
