"""Output a person reads at a glance (issue #77): a one-size run prints about ten lines (the
context behind -v, everything in --json), min..max beside the medians when runs repeat, a note
when the runs are too short to trust, and -t for a run sized by time."""
import json
import re

from conftest import run


def test_a_one_size_run_is_short_and_v_adds_the_context(cache_dir):
    short = run("--bytes", "2M", cache=cache_dir, check=0).stdout.splitlines()
    assert len(short) <= 10, short
    assert not any("socket: SO_SNDBUF" in l or l.startswith(("regime ", "softirqs "))
                   for l in short), short
    assert any(l.startswith("process CPU: client ") for l in short), short
    full = run("--bytes", "2M", "-v", cache=cache_dir, check=0).stdout
    assert full.splitlines()[1].startswith("host: "), full  # what the CPU is, -v's second line
    for needle in ("sender   socket: SO_SNDBUF", "receiver placement:", "regime 16K:",
                   "softirqs 16K", "process CPU (whole processes, reaped"):
        assert needle in full, needle


def test_repeated_runs_show_min_and_max_beside_the_median(cache_dir):
    p = run("--bytes", "2M", "--buf", "16k", "--repeat", "3", "--json", "/dev/null",
            cache=cache_dir, check=0)
    m = re.search(r"^\s+16K min\.\.max of 3 runs: sender ([\d.]+)\.\.([\d.]+) s, "
                  r"([\d.]+)\.\.([\d.]+) Gbit/s, ([\d.]+)\.\.([\d.]+) cpu_s/GiB; receiver "
                  r"([\d.]+)\.\.([\d.]+) cpu_s/GiB$", p.stdout, re.M)
    assert m, p.stdout
    row = next(l for l in p.stdout.splitlines() if l.split()[:2] == ["16K", "sender"])
    median_time = float(row.split()[5])
    assert float(m.group(1)) <= median_time <= float(m.group(2)), (row, m.group(0))


def test_a_short_run_says_so_and_t_sizes_the_runs_by_time(cache_dir):
    p = run("--bytes", "1M", cache=cache_dir, check=0)
    assert "too short to trust" in p.stdout and "use -t 10s" in p.stdout, p.stdout
    p = run("--bytes", "4M", "-t", "1s", "--json", "-", cache=cache_dir, check=0)
    doc = json.loads(p.stdout)
    runs = doc["results"][0]["runs"]
    phases = sum(r["sender"]["duration_ns"] for r in runs) / 1e9
    assert len(runs) >= 3 and phases >= 1.0, (len(runs), phases)
    # Not one run more than the time needed (the last one crossed it).
    assert phases - runs[-1]["sender"]["duration_ns"] / 1e9 < 1.0
    assert doc["options"]["time_s"] == 1
    table = run("--bytes", "4M", "-t", "1s", cache=cache_dir, check=0).stdout
    assert "runs until 1 s of data per size" in table and "too short" not in table
    p = run("-t", "1s", "--repeat", "3", cache=cache_dir, check=2)
    assert "--time sizes the runs by time: give it or --repeat, not both" in p.stderr
