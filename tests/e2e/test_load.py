"""`iobench load` (issue #76): an open-loop RESP load whose latency runs from each request's
intended send time. Against a real server: every request counted and answered, the slices'
buckets merge back to the whole (iobench_tools/lib/valkey/openload.py), and a DEBUG SLEEP stall
shows in every request due during it, where the closed-loop valkey-benchmark --rps shows one a
connection."""
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import ROOT, run
from test_payload_redis import free_port

sys.path.insert(0, str(ROOT))
from iobench_tools.lib.valkey import openload  # noqa: E402

VALKEY = os.environ.get("IOBENCH_VALKEY", str(ROOT / "build" / "valkey" / "valkey-server"))


def server_binary():
    if os.access(VALKEY, os.X_OK):
        return VALKEY
    return shutil.which("valkey-server") or shutil.which("redis-server")


def benchmark_binary():
    """A valkey-benchmark that has --rps (Valkey 8.1 and later), or None."""
    found = [str(p) for p in sorted((ROOT / "build" / "valkey-src").glob("*/valkey-benchmark"))]
    for b in [*found, shutil.which("valkey-benchmark")]:
        if b and "--rps" in subprocess.run([b, "--help"], capture_output=True, text=True).stdout:
            return b
    return None


def command(port, *words):
    """One RESP command on its own connection; the reply's first line."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(f"*{len(words)}\r\n".encode() +
                  b"".join(f"${len(w)}\r\n{w}\r\n".encode() for w in words))
        return s.recv(4096).split(b"\r\n")[0].decode()


@pytest.fixture
def resp_server(tmp_path):
    binary = server_binary()
    if not binary:
        pytest.skip("no valkey-server or redis-server (scripts/setup installs both)")
    port = free_port()
    p = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "no", "--dir", str(tmp_path),
                          "--enable-debug-command", "yes"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                if command(port, "PING") == "+PONG":
                    break
            except OSError:
                time.sleep(0.1)
        yield port
    finally:
        p.kill()
        p.wait()


def load(port, *args, timeout=60):
    p = run("load", "--connect", f"127.0.0.1:{port}", "--json", "-", *args, timeout=timeout)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_every_request_is_counted_and_the_slices_merge_to_the_whole(resp_server):
    r = load(resp_server, "--rate", "1000", "--duration", "1s", "--conns", "3", "--command",
             "set")
    req = r["requests"]
    assert req == {"scheduled": 1000, "sent": 1000, "answered": 1000, "errors": 0,
                   "unanswered": 0}, req
    assert 9 <= len(r["slices"]) <= 11, len(r["slices"])
    whole, top = openload.window(r), openload.window_max_us(r)
    assert sum(whole.values()) == 1000 and top == r["latency_us"]["max"]
    for q, name in ((0.5, "p50"), (0.99, "p99"), (0.999, "p999"), (1.0, "max")):
        assert openload.quantile_us(whole, q, result=r, max_us=top) == pytest.approx(
            r["latency_us"][name], rel=1e-9), name
    # Each request in the slice of its intended time: 100 a slice at 1000/s.
    assert all(s["latency_us"]["count"] == 100 for s in r["slices"][1:-1]), r["slices"]
    assert command(resp_server, "DBSIZE").startswith(":")


def test_a_stall_shows_in_every_request_due_during_it(resp_server):
    stall_s, rate = 0.3, 1000
    out = {}

    def stall():
        time.sleep(0.6)
        out["stalled_at"] = time.time_ns()
        command(resp_server, "DEBUG", "SLEEP", str(stall_s))

    t = threading.Thread(target=stall)
    t.start()
    r = load(resp_server, "--rate", str(rate), "--duration", "1.5s")
    t.join()
    whole = openload.window(r)
    slow = openload.at_least(whole, 100_000)  # 100 ms and more
    print(f"open loop, {rate}/s, a {stall_s * 1000:.0f} ms DEBUG SLEEP: {slow} requests took "
          f"100 ms or more, p99 {r['latency_us']['p99'] / 1000:.1f} ms, max "
          f"{r['latency_us']['max'] / 1000:.1f} ms")
    # The requests due in the stall's first 200 ms waited 100 ms or more: about 200 of them.
    assert slow >= 0.5 * rate * (stall_s - 0.1), slow
    assert r["latency_us"]["max"] >= 0.8 * stall_s * 1e6, r["latency_us"]
    # The slices hold the stall where it happened: cut a window around it.
    during = openload.window(r, out["stalled_at"] - 100_000_000, out["stalled_at"] + 400_000_000)
    assert openload.at_least(during, 100_000) == slow
    bench = benchmark_binary()
    if bench:
        t = threading.Thread(target=stall)
        t.start()
        b = subprocess.run([bench, "-p", str(resp_server), "-t", "get", "-c", "4", "--rps",
                            str(rate), "-n", str(int(1.5 * rate)), "--precision", "3"],
                           capture_output=True, text=True, timeout=60)
        t.join()
        from iobench_tools.lib.valkey.syncload import parse_benchmark
        closed = parse_benchmark(b.stdout)
        print(f"closed loop (valkey-benchmark --rps {rate} -c 4), the same stall: p99 "
              f"{closed['p99_ms']:.3f} ms, max {closed['max_ms']:.1f} ms")
        # One slow request a connection: its p99 does not see the stall.
        assert closed["p99_ms"] < 100, closed


def test_bad_targets_and_rates_are_one_line_errors():
    port = free_port()
    p = run("load", "--connect", f"127.0.0.1:{port}", "--rate", "10", "--duration", "1s")
    assert p.returncode == 1
    assert len(p.stderr.strip().splitlines()) == 1 and "--connect" in p.stderr, p.stderr
    p = run("load", "--connect", "127.0.0.1:6379", "--rate", "0")
    assert p.returncode == 2 and "--rate" in p.stderr, p.stderr
    p = run("load", "--connect", "nohost:abc", "--rate", "10")
    assert p.returncode == 2 and "nohost:abc" in p.stderr, p.stderr


def test_a_quantile_in_the_maximums_bucket_is_the_maximum():
    """As LogLinearHistogram::at_quantile clips: a CI run's p99.9 shared the bucket of its
    maximum (two requests of a 1.4 s stall) and read the bucket's top, above every request."""
    i = 2000  # a bucket of 16 µs at 3.4 ms
    low, high = openload.lowest_at(i), openload.highest_at(i)
    assert high - low == 16383
    doc = {"slices": [
        {"start_unix_ns": 0, "buckets": [[i, 2]],
         "latency_us": {"count": 2, "max": (low + 100) / 1000}},
        {"start_unix_ns": 100, "buckets": [[i + 1, 1]],
         "latency_us": {"count": 1, "max": (high + 200) / 1000}},
        {"start_unix_ns": 200, "buckets": [], "latency_us": {"count": 0, "max": 0.0}}]}
    first = openload.window(doc, 0, 100)
    top = openload.window_max_us(doc, 0, 100)
    assert top == (low + 100) / 1000 and openload.window_max_us(doc) == (high + 200) / 1000
    assert openload.quantile_us(first, 0.999) == high / 1000  # unclipped: above both requests
    assert openload.quantile_us(first, 0.999, max_us=top) == top
    assert openload.quantile_us(first, 1.0, max_us=top) == top
    assert openload.window_max_us(doc, 200, None) is None
