"""Many connections and the adaptive mode end to end: every connection verified on its own,
buffer sizes that follow the policy as the live count rises and falls, bad input refused
before anything starts, and one dying connection ending only itself."""
import json
import os
import resource
import subprocess

import pytest

from conftest import BIN, Server, run

pytestmark = [pytest.mark.concurrency]

KiB, MiB = 1 << 10, 1 << 20


def run_json(cache, *args, check=0, env=None):
    cmd = [BIN, *map(str, args), "--json", "-", "-q", "--cache-dir", cache]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
    assert p.returncode == check, f"rc={p.returncode}\n{p.stderr}"
    return json.loads(p.stdout), p


def policy(budget, lo, hi, live):
    share = budget // max(live, 1)
    pow2 = 1 << (share.bit_length() - 1) if share else 0
    return min(max(pow2, lo), hi)


def group_of(doc, i=0):
    return doc["results"][i]["runs"][0]["group"]


@pytest.mark.parametrize("proto,engine", [("tcp", "blocking"), ("tcp", "epoll"), ("tcp", "uring"),
                                          ("tls", "blocking"), ("tls", "epoll")])
@pytest.mark.parametrize("reverse", [False, True])
def test_every_connection_moves_its_bytes(cache_dir, proto, engine, reverse):
    doc, _ = run_json(cache_dir, "--conns", 3, "--bytes", "4M", "--buf", "16k", "--proto", proto,
                      "--engine", engine, "--bytes-spread", "0.5",
                      *(["--reverse"] if reverse else []))
    g = group_of(doc)
    assert g["error"] == ""
    assert len(g["conns"]) == 3
    total = 0
    for c in g["conns"]:
        assert c["ok"], c
        assert c["sender"]["bytes"] == c["receiver"]["bytes"] == c["bytes"]
        assert c["sender"]["xxh3"] == c["receiver"]["xxh3"]
        assert 2 * MiB <= c["bytes"] <= 4 * MiB
        total += c["bytes"]
    run0 = doc["results"][0]["runs"][0]
    assert run0["sender"]["bytes"] == run0["receiver"]["bytes"] == total
    for side in ("sender", "receiver"):
        s = g[side]
        assert s["available"] and s["conns"] == 3 and s["conns_failed"] == 0
        assert s["policy"] == "fixed 16K"
        assert s["peak_buffer_bytes"] <= 3 * 16 * KiB
        assert s["live_timeline"][-1]["live"] == 0
    assert len({c["bytes"] for c in g["conns"]}) > 1, "--bytes-spread gives different lengths"


def test_adaptive_sizes_follow_the_live_count(cache_dir):
    # Each side holds its connections until all four have joined (a test hook: without it the
    # overlap depends on scheduling), so the live count rises 1 -> 4 on both sides and falls
    # back through 1 as the (spread) connections finish.
    budget, lo, hi = 4 * KiB, 1 * KiB, 4 * KiB
    env = dict(os.environ, IOBENCH_TEST_HOLD_JOINS="1")
    doc, _ = run_json(cache_dir, "--conns", 4, "--bytes", "8M", "--bytes-spread", "0.6",
                      "--buf", "adaptive", "--budget", "4k", "--buf-min", "1k", "--buf-max", "4k",
                      env=env)
    g = group_of(doc)
    assert g["error"] == ""
    assert all(c["ok"] for c in g["conns"])
    for side in ("sender", "receiver"):
        s = g[side]
        lives = [p["live"] for p in s["live_timeline"]]
        assert lives[0] == 1 and lives[-1] == 0 and lives[-2] == 1, lives
        assert max(lives) == 4 == s["peak_live"], lives
        for p in s["live_timeline"]:
            if p["live"]:
                assert p["buf_bytes"] == policy(budget, lo, hi, p["live"]), p
        # Every size a connection adopted is the policy's target for the count it saw, or less
        # while the budget was still held by others; never below the floor.
        assert s["buffer_changes"], s
        for ch in s["buffer_changes"]:
            assert ch["target_bytes"] == policy(budget, lo, hi, ch["live"]), ch
            assert lo <= ch["to_bytes"] <= ch["target_bytes"], ch
        # The budget holds but for one floor per connection joining at the same moment.
        assert s["peak_buffer_bytes"] <= budget + 4 * lo, s["peak_buffer_bytes"]
        resized = [ch for ch in s["buffer_changes"] if ch["from_bytes"]]
        assert resized, "some connection changed size as others opened or closed"
        assert s["policy"] == "adaptive: budget 4K, 1K..4K"
    # The per-connection results agree with the recorded changes.
    for c in g["conns"]:
        conn_changes = [ch for ch in g["receiver"]["buffer_changes"]
                        if ch["conn"] == c["index"] and ch["from_bytes"]]
        assert c["receiver"]["buf_resizes"] == len(conn_changes)


def test_fixed_and_adaptive_in_one_list(cache_dir):
    doc, p = run_json(cache_dir, "--conns", 2, "--bytes", "2M", "--buf", "4k,adaptive")
    assert [r["label"] for r in doc["results"]] == ["4K", "adaptive"]
    assert group_of(doc, 1)["sender"]["policy"].startswith("adaptive")


def test_a_fixed_size_beside_adaptive_with_one_connection_is_measured_on_both_sides(cache_dir):
    """`--buf 16k,adaptive` with one connection: the 16K run is one session on both sides (each
    decides from the same HELLO). The client used to run it as a group and wait for a GROUP the
    server never sends: the server's figures were lost (time 0, 'did not arrive')."""
    doc, _ = run_json(cache_dir, "--bytes", "2M", "--buf", "16k,adaptive")
    fixed = doc["results"][0]["runs"][0]
    assert doc["results"][0]["label"] == "16K"
    assert fixed["receiver"]["duration_ns"] > 0 and fixed["receiver"]["cpu_scope"] == "process"
    assert "did not arrive" not in json.dumps(fixed)
    assert group_of(doc, 1)["receiver"]["policy"].startswith("adaptive")


def test_table_shows_connections(cache_dir):
    p = run("--conns", 2, "--bytes", "2M", "--buf", "adaptive", cache=cache_dir, check=0)
    assert "2 connections, per-connection Gbit/s" in p.stdout
    assert "adaptive: budget 256K, 4K..64K" in p.stdout
    assert p.stdout.count("ok, xxh3 verified") == 2


def test_one_dying_connection_ends_only_itself(cache_dir):
    env = dict(os.environ, IOBENCH_TEST_BREAK_CONN="1:1000000")
    doc, p = run_json(cache_dir, "--conns", 3, "--bytes", "8M", check=1, env=env)
    assert "1 of 3 connections failed; connection 1:" in p.stderr
    g = group_of(doc)
    ok = [c for c in g["conns"] if c["ok"]]
    assert [c["index"] for c in ok] == [0, 2]
    for c in ok:
        assert c["sender"]["xxh3"] == c["receiver"]["xxh3"]
        assert c["receiver"]["bytes"] == 8 * MiB
    assert "write failed after 1000000" in g["conns"][1]["error"]
    assert g["sender"]["conns_failed"] == 1


def test_server_max_conns_refuses_before_anything_starts(cache_dir):
    s = Server("--max-conns", "2", cache=cache_dir)
    try:
        p = run("client", "--connect", s.addr, "--conns", "3", "--bytes", "1M", cache=cache_dir)
        assert p.returncode == 1
        assert "3 connections asked for, this server's --max-conns is 2" in p.stderr
        assert "every connection failed" in p.stderr
        # The server still serves a run within its limit.
        run("client", "--connect", s.addr, "--conns", "2", "--bytes", "1M", "-q",
            cache=cache_dir, check=0)
    finally:
        s.stop()


def slow_ending_server(monkeypatch, cache_dir, seconds):
    """A --max-conns 2 server whose sessions linger `seconds` after their client's last figures."""
    monkeypatch.setenv("IOBENCH_TEST_SLOW_END", str(seconds))
    try:
        return Server("--max-conns", "2", cache=cache_dir)
    finally:
        monkeypatch.delenv("IOBENCH_TEST_SLOW_END")


def test_the_next_run_waits_for_a_slot_its_last_run_is_giving_back(cache_dir, monkeypatch):
    # The client's next run (each repeat, then the counting run) connects as soon as it has the
    # last run's figures, while that run's sessions still hold their slots: a full server waits
    # for them (CI once saw "server busy" here, a session descheduled while it closed).
    s = slow_ending_server(monkeypatch, cache_dir, 0.4)
    try:
        run("client", "--connect", s.addr, "--conns", "2", "--repeat", "2", "--bytes", "1M", "-q",
            cache=cache_dir, check=0)
    finally:
        s.stop()


def test_a_server_that_stays_full_still_says_busy(cache_dir, monkeypatch):
    # The wait is bounded (2 s): sessions that stay past it are sessions, and the run is refused.
    s = slow_ending_server(monkeypatch, cache_dir, 6)
    try:
        p = run("client", "--connect", s.addr, "--conns", "2", "--bytes", "1M", "-q",
                cache=cache_dir)
        assert p.returncode == 1
        assert "server busy: 2 sessions at once (--max-conns 2)" in p.stderr
    finally:
        s.stop()


def test_conns_above_the_descriptor_limit(cache_dir):
    def low():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    p = subprocess.run([BIN, "--conns", "100", "--bytes", "1M", "--cache-dir", cache_dir],
                       capture_output=True, text=True, timeout=60, preexec_fn=low)
    assert p.returncode == 2
    assert "--conns 100 needs about 232 descriptors, above RLIMIT_NOFILE 64" in p.stderr


@pytest.mark.parametrize("args,needle", [
    (["--buf", "adaptive", "--conns", "8", "--budget", "16k"], "--budget 16K is smaller than --buf-min 4K x --conns 8 = 32K"),
    (["--buf", "adaptive", "--buf-min", "32k", "--buf-max", "8k"], "--buf-min 32K is larger than --buf-max 8K"),
    (["--conns", "0"], "invalid --conns '0'"),
])
def test_bad_group_options(cache_dir, args, needle):
    p = run(*args, "--bytes", "1M", cache=cache_dir)
    assert p.returncode == 2
    assert needle in p.stderr
    assert p.stderr.count("\n") == 1
