"""A newcomer's first hour (issue #19): habits from iperf3, mistyped inputs and options that
would change nothing are refused before any run, with one line that names the fix."""
import json

import pytest

from conftest import run


@pytest.mark.parametrize("args,needle", [
    (["-v"], "--version (-V) prints the version"),
    (["-c", "localhost", "-l", "16k"], "`iobench client --connect HOST:PORT`"),
    (["-s"], "`iobench server"),
    (["client", "--connect", "127.0.0.1:1", "-l", "16k"], "-l SIZE is --buf SIZE"),
    (["-P", "4"], "-P N is --conns N"),
    (["-A", "0"], "--cpus SENDER[,RECEIVER]"),
    (["-t", "10"], "--bytes SIZE (-n)"),
    (["-u"], "no UDP mode"),
])
def test_iperf3_habits_get_the_iobench_spelling(cache_dir, args, needle):
    p = run(*args, cache=cache_dir, check=2, timeout=10)
    assert needle in p.stderr and p.stdout == "", p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args,needle", [
    (["--seed", "-1"], "--seed: '-1' is negative"),
    (["--conns", "-1"], "--conns: '-1' is negative"),
    (["--engine", "uring", "--qd", "-8"], "--qd: '-8' is negative"),
    (["payload", "--seed", "-2", "-o", "/dev/null"], "--seed: '-2' is negative"),
    (["server", "--max-conns", "-1"], "--max-conns: '-1' is negative"),
    (["--buf", "4k", "--buf", "16k"], "--buf given 2 times: give it once"),
    (["--bytes", "1.3k"], "1.3k is not a whole number of bytes"),
    (["--bytes", "1.k"], "no digits after the decimal point"),
    (["--qd", "16"], "--qd needs uring on a side"),
    (["--auth-token", "x"], "--auth-token is for `iobench client`"),
    (["--stagger", "5ms"], "--stagger needs --conns 2 or more"),
    (["client", "--connect", "127.0.0.1:1", "--verbose"], "`iobench client` has none"),
])
def test_bad_or_idle_inputs_are_refused_naming_the_value(cache_dir, args, needle):
    p = run(*args, cache=cache_dir, check=2, timeout=10)
    assert needle in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_fractional_sizes_that_are_whole_bytes_are_accepted(cache_dir):
    p = run("--bytes", "1.5M", "--buf", "0.5k", "--json", "-", "-q", cache=cache_dir, check=0)
    doc = json.loads(p.stdout)
    r = doc["results"][0]
    assert r["send_buf_bytes"] == 512
    assert r["runs"][0]["receiver"]["bytes"] == 3 << 19
