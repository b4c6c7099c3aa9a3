"""iobench watch --event-loop on a process whose event loop is known: it times each iteration
itself (from its epoll wait's return to its next wait), so the watch's histogram is held against
the program's own clock; its large writes, small writes and a forked child's writes are counted
exactly."""
import json
import subprocess
import sys

import pytest

from conftest import BIN
from test_watch import attached

# Iterations of a known busy time (busy-waiting on the clock, 100 x 0.2 ms, 60 x 2 ms, 20 x 8 ms),
# each after an epoll wait with no timeout; every 4th writes 4096 bytes to a socket pair (a large
# write), every other one 100 bytes (not large). Then a forked child writes 3 x 8192 to a pipe
# and the parent waits once more on epoll, which ends the last iteration. Prints its own times,
# padded to one write of 6001 bytes: each iteration bracketed by its clock read just before and
# just after each wait, so the watch's span (the wait's return to the next wait's entry) lies
# between `own_s` (after one wait to before the next) and `outer_s` (before one to after the
# next) even when the host preempts the program beside a wait (a loaded CI: +34 ms once).
LOOP = r"""
import json, os, select, socket, sys, time
a, b = socket.socketpair()
b.setblocking(False)
ep = select.epoll()
ep.register(b.fileno(), select.EPOLLIN)
plan = [0.2] * 100 + [2.0] * 60 + [8.0] * 20
print("ready", flush=True)
sys.stdin.readline()
own, outer, large = [], [], 0
before = time.perf_counter()
ep.poll(0)
after = time.perf_counter()
for i, busy_ms in enumerate(plan):
    start = after
    while True:
        try:
            if not b.recv(1 << 20): break
        except BlockingIOError:
            break
    while time.perf_counter() - start < busy_ms / 1e3:
        pass
    if i % 4 == 0:
        a.send(b"x" * 4096)
        large += 1
    elif i % 2 == 0:
        a.send(b"y" * 100)
    end = time.perf_counter()
    ep.poll(0)
    after = time.perf_counter()
    own.append(round(end - start, 9))
    outer.append(round(after - before, 9))
    before = end
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    for _ in range(3):
        os.write(w, b"z" * 8192)
    os._exit(0)
os.waitpid(pid, 0)
line = json.dumps({"own_s": own, "outer_s": outer, "large": large})
assert len(line) <= 6000
print(line.ljust(6000), flush=True)  # one 6001-byte write
sys.stdin.readline()
"""


def quantile(values, q):
    """The ceil(q x n)-th smallest, as HdrHistogram ranks it."""
    s = sorted(values)
    return s[max(0, -(-int(q * len(s) * 1000) // 1000) - 1)]


def watch_loop(tmp_path, *args):
    out = tmp_path / "watch.json"
    prog = subprocess.Popen([sys.executable, "-c", LOOP], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert prog.stdout.readline().strip() == "ready"
        w = subprocess.Popen([BIN, "watch", "--pid", str(prog.pid), "--event-loop", *args,
                              "--json", str(out)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        attached(w)
        prog.stdin.write("go\n")
        prog.stdin.flush()
        own = json.loads(prog.stdout.readline())
        w.send_signal(2)
        table, err = w.communicate(timeout=30)
        assert w.returncode == 0, err
        assert "iterations with a large write" in table
        return own, json.loads(out.read_text())["watch"]
    finally:
        prog.kill()
        prog.wait()


def test_the_loop_histogram_matches_the_programs_own_clock(tmp_path):
    own, report = watch_loop(tmp_path)
    loop = report["event_loop"]
    assert loop["large_write_bytes"] == 1024
    without, with_large = loop["iterations"], loop["iterations_with_large_write"]
    assert with_large["count"] == own["large"] == 45
    assert without["count"] + with_large["count"] == len(own["own_s"]) == 180
    # Its own report is one more (its 6001-byte line to stdout, after its last wait).
    assert loop["large_writes_in_loop"]["count"] == own["large"] + 1
    assert loop["large_writes_elsewhere"]["count"] == 3  # the forked child's, to its pipe
    # Pooled, the two classes are the program's iterations: each lies between its two brackets
    # (own_s, outer_s), so their total, maximum and each class's median lie between the
    # brackets' (an order statistic is monotone), within the histogram's resolution (1%) plus
    # the few µs between the program's clock reads and the syscall's edges.
    inner, outer = own["own_s"], own["outer_s"]
    total_s = without["total_s"] + with_large["total_s"]
    assert sum(inner) * 0.98 - 180 * 50e-6 <= total_s <= sum(outer) * 1.02 + 180 * 50e-6, \
        (total_s, sum(inner), sum(outer))
    big = max(without["max"], with_large["max"])
    assert max(inner) * 1e6 * 0.99 - 100 <= big <= max(outer) * 1e6 * 1.01 + 100, \
        (big, max(inner), max(outer))
    for cls, picks in ((with_large, lambda i: i % 4 == 0), (without, lambda i: i % 4 != 0)):
        low = quantile([t for i, t in enumerate(inner) if picks(i)], 0.5) * 1e6
        high = quantile([t for i, t in enumerate(outer) if picks(i)], 0.5) * 1e6
        assert low * 0.98 - 50 <= cls["p50"] <= high * 1.02 + 50, (cls["p50"], low, high)
    # On a quiet host the brackets are µs apart: the check is as tight as it was.
    assert sum(outer) < 2 * sum(inner), (sum(inner), sum(outer))
    writes = loop["large_writes_in_loop"]
    assert 0 < writes["p50"] < 1000 and writes["total_s"] < total_s


def test_a_larger_threshold_leaves_the_4096_byte_writes_out(tmp_path):
    own, report = watch_loop(tmp_path, "--large-write", "5k")  # a size, as --buf takes one
    loop = report["event_loop"]
    assert loop["large_write_bytes"] == 5120
    assert loop["iterations_with_large_write"]["count"] == 0
    assert loop["iterations"]["count"] == len(own["own_s"])
    assert loop["large_writes_in_loop"]["count"] == 1  # its 6001-byte report
    assert loop["large_writes_elsewhere"]["count"] == 3


def test_without_the_flag_there_is_no_event_loop_block():
    p = subprocess.run([BIN, "watch", "--pid", "1", "--duration", "0.2s", "--json", "-", "-q"],
                       capture_output=True, text=True, timeout=30)
    if p.returncode == 1 and "needs root" in p.stderr:
        pytest.skip(p.stderr.strip())
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["watch"]["event_loop"] is None


@pytest.mark.parametrize("value", ["0", "2G", "lots"])
def test_a_bad_large_write_is_refused(value):
    p = subprocess.run([BIN, "watch", "--pid", "1", "--event-loop", "--large-write", value],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "--large-write" in p.stderr and value in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
