"""--write-pattern: the client writes what a real primary writes (16K then a tail, sizes in turn,
or a watch report's sizes), every byte still verified; the segments each side's socket moved are
in the report beside the calls; refusals name the option."""
import json

import pytest

from conftest import run

MiB = 1 << 20


def sender_of(cache_dir, *args):
    p = run("--bytes", "4M", "--json", "-", "-q", *args, cache=cache_dir, timeout=60)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    r = doc["results"][0]["runs"][0]
    assert r["sender"]["xxh3"] == r["receiver"]["xxh3"] and r["receiver"]["bytes"] == 4 * MiB
    return doc, r["sender"]


@pytest.mark.parametrize("engine", ["blocking", "epoll"])
def test_sizes_in_turn_are_the_writes(cache_dir, engine):
    doc, s = sender_of(cache_dir, "--engine", engine, "--write-pattern", "16384,1000")
    # 241 pairs of 17384 bytes, then the last 4760 bytes in one write; a short write (epoll)
    # goes on with the pattern's next size, shifting the count by at most two.
    assert abs(s["io_calls"] - 483) <= 2 * s["short_writes"], s
    assert doc["options"]["write_pattern"] == "16384,1000"
    assert s["segments"]["out"] > 0 and "TCP_INFO" in s["segments"]["how"]


def test_a_tail_pattern_costs_calls_and_reports_segments(cache_dir):
    _, whole = sender_of(cache_dir, "--buf", "16k")
    _, tails = sender_of(cache_dir, "--write-pattern", "16384+tail:1-17")
    assert whole["io_calls"] == 256 and tails["io_calls"] >= 2 * 255, (whole, tails)
    # Both sides' segments are reported. How many writes leave as segments of their own depends
    # on load (a busy sender's queued writes coalesce), so their ratio is a benchmark's figure
    # (docs/replication.md), not this test's.
    for s in (whole, tails):
        assert 0 < s["segments"]["out"] <= s["io_calls"] + 64, s["segments"]


def test_a_watch_report_is_a_pattern(cache_dir, tmp_path):
    report = tmp_path / "watch.json"
    report.write_text(json.dumps({"watch": {"processes": [{"io": [
        {"fd_kind": "tcp", "family": "write", "bytes": 3 * 16384 + 3 * 836,
         "sizes": [{"result": 16384, "calls": 3}, {"result": 836, "calls": 3}]}]}]}}))
    _, s = sender_of(cache_dir, "--write-pattern", f"@{report}")
    assert 4000 < s["bytes_per_call"] < 12000, s


@pytest.mark.parametrize("args, message", [
    (["--write-pattern", "16k+tail:9-2"], "invalid --write-pattern '16k+tail:9-2': tail range 9-2 is reversed"),
    (["--write-pattern", "lots"], "invalid --write-pattern 'lots': 'lots' is not a size"),
    (["--write-pattern", "@/nonexistent.json"], "cannot read it"),
    (["--write-pattern", "16k", "--reverse"], "not with --reverse"),
    (["--write-pattern", "16k", "--engine", "uring"], "--engine blocking or epoll"),
    (["--write-pattern", "16k", "--conns", "2"], "not with --conns or adaptive"),
    (["--write-pattern", "16k", "--buf", "4k,16k"], "give at most one --buf"),
])
def test_write_pattern_refusals(args, message):
    p = run(*args, timeout=30)
    assert p.returncode == 2 and message in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
