"""iobench watch on live processes: a program whose I/O is known (descriptor kinds, a child it
forks) and a real Redis full sync, disk-based and diskless; bad input and refusals."""
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from conftest import BIN, ROOT, run
from test_loopback import without_caps
from test_payload_redis import free_port

MiB = 1 << 20

# Opens a TCP connection to itself and a pipe, waits for the watch's first samples, writes 10 x
# 1000 bytes to the socket, forks a child that writes 3 x 4096 bytes to the pipe, and lingers.
KNOWN = r"""
import os, socket, sys, time
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
cli = socket.create_connection(srv.getsockname()); peer, _ = srv.accept()
r, w = os.pipe()
print("ready", flush=True)
sys.stdin.readline()
time.sleep(0.3)
for _ in range(10):
    os.write(cli.fileno(), b"x" * 1000)
pid = os.fork()
if pid == 0:
    for _ in range(3):
        os.write(w, b"y" * 4096)
    time.sleep(0.3)
    os._exit(0)
os.waitpid(pid, 0)
time.sleep(0.3)
"""


def watch(*args, timeout=60):
    return subprocess.run([BIN, "watch", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def io_of(proc, kind, family):
    return next((io for io in proc["io"] if io["fd_kind"] == kind and io["family"] == family), None)


@pytest.fixture
def known_program():
    p = subprocess.Popen([sys.executable, "-c", KNOWN], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    yield p
    p.kill()
    p.wait()


def attached(watch):
    """Waits for the watch's start line: its programs are attached from then on."""
    line = watch.stderr.readline()
    if "needs root" in line:
        pytest.skip(f"eBPF refused here: {line.strip()}")
    assert "iobench: watching" in line, line + watch.stderr.read()


def watch_known(program, *args):
    """Watches the known program with `args` while it runs; returns the watch's stdout."""
    p = subprocess.Popen([BIN, "watch", "--pid", str(program.pid), *map(str, args)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    attached(p)
    time.sleep(0.3)  # /proc sampled at least once
    program.stdin.write("go\n")
    program.stdin.flush()
    out, err = p.communicate(timeout=30)
    if p.returncode == 1 and "needs root" in err:
        pytest.skip(f"eBPF refused here: {err.strip()}")
    assert p.returncode == 0, err
    return out


def test_watch_counts_a_known_program_and_its_child(known_program):
    doc = json.loads(watch_known(known_program, "--until-exit", known_program.pid, "--json", "-"))
    assert doc["kind"] == "watch" and "context" in doc and "cpu" in doc["sources"]
    w = doc["watch"]
    assert w["ended_by"] == f"pid {known_program.pid} exited", w["ended_by"]
    root, child = w["processes"][0], w["processes"][1]
    assert root["pid"] == known_program.pid and root["origin"] == "--pid"
    tcp = io_of(root, "tcp", "write")
    assert tcp and tcp["calls"] == 10 and tcp["bytes"] == 10_000, root["io"]
    assert tcp["sizes"] == [{"result": 1000, "calls": 10}]
    assert child["root"] == root["pid"] and child["origin"] == "forked"
    pipe = io_of(child, "pipe", "write")
    assert pipe and pipe["calls"] == 3 and pipe["bytes"] == 3 * 4096, child["io"]
    assert root["syscalls"]["write"] >= 10 and child["syscalls"]["write"] == 3
    assert root["cpu_s"] > 0


def test_watch_writes_csv_and_a_table(known_program, tmp_path):
    csv = tmp_path / "w.csv"
    out = watch_known(known_program, "--duration", "3s", "--csv", csv)
    assert "ended by every watched process exited" in out or "ended by --duration" in out, out
    assert "tcp    write        10 calls" in out, out
    rows = csv.read_text().splitlines()
    assert rows[0].startswith("pid,root,comm,cpu_s")
    assert any(",tcp,write,10,10000," in r for r in rows), rows


@pytest.mark.parametrize("args, message", [
    ([], "--pid is required"),
    (["--pid", "0"], "invalid --pid 0: no such process"),
    (["--pid", "4194999"], "invalid --pid 4194999: no such process"),
    (["--pid", "self", "--duration", "soon"], "invalid --duration 'soon'"),
    (["--pid", "self", "--until-exit", "x1"], "--until-exit: 'x1' is not a whole number"),
    (["--pid", "self", "--interval", "1ms"], "invalid --interval '1ms': at least 10ms"),
])
def test_watch_refuses_bad_input_in_one_line(args, message):
    args = [str(os.getpid()) if a == "self" else a for a in args]
    p = watch(*args)
    assert p.returncode == 2, p.stderr
    assert message in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_watch_without_privilege_says_what_it_needs():
    p = subprocess.run([*without_caps("bpf", "sys_admin", "perfmon"), BIN, "watch", "--pid",
                        str(os.getpid()), "--duration", "1s"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 1, p.stderr
    assert "needs root, or CAP_BPF and CAP_PERFMON" in p.stderr, p.stderr


VALKEY = os.environ.get("IOBENCH_VALKEY", str(ROOT / "build" / "valkey" / "valkey-server"))


def server_ready(port):
    for _ in range(100):
        r = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True)
        if r.stdout.strip() == "PONG":
            return
        time.sleep(0.1)
    raise AssertionError(f"the server on {port} did not answer")


def start_server(binary, port, directory, *extra):
    directory.mkdir()
    p = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "no", "--dir", str(directory), *extra],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server_ready(port)
    return p


def watched_full_sync(tmp_path, binary, primary_args, replica_args):
    """A primary with 16,000 keys of 1,000 bytes syncs a new replica under `iobench watch`;
    returns (the watch's processes, primary pid, replica pid)."""
    pport, rport = free_port(), free_port()
    primary = start_server(binary, pport, tmp_path / "primary", "--repl-diskless-sync-delay", "0",
                           "--rdbcompression", "no", "--enable-debug-command", "yes",
                           *primary_args)
    replica = start_server(binary, rport, tmp_path / "replica", *replica_args)
    w = None
    try:
        subprocess.run(["redis-cli", "-p", str(pport), "DEBUG", "POPULATE", "16000", "key", "1000"],
                       check=True, capture_output=True)
        w = subprocess.Popen([BIN, "watch", "--pid", str(primary.pid), "--pid", str(replica.pid),
                              "--duration", "60s", "--json", "-"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        attached(w)
        subprocess.run(["redis-cli", "-p", str(rport), "REPLICAOF", "127.0.0.1", str(pport)],
                       check=True, capture_output=True)
        for _ in range(300):
            info = subprocess.run(["redis-cli", "-p", str(rport), "INFO", "replication"],
                                  capture_output=True, text=True).stdout
            if "master_link_status:up" in info:
                break
            time.sleep(0.1)
        assert "master_link_status:up" in info, info
        w.send_signal(2)
        out, err = w.communicate(timeout=30)
    finally:
        if w and w.poll() is None:
            w.kill()
        for p in (primary, replica):
            p.kill()
            p.wait()
    if w.returncode == 1 and "needs root" in err:
        pytest.skip(f"eBPF refused here: {err.strip()}")
    assert w.returncode == 0, err
    return json.loads(out)["watch"]["processes"], primary.pid, replica.pid


def check_sync(procs, primary, replica, writer_kind, writer_is_child):
    """The dataset (16,000 x 1,000 bytes, uncompressed) crossed the socket in 16K writes, from
    the main thread or from the save child; the child wrote `writer_kind` (file, pipe, tcp)."""
    by_pid = {p["pid"]: p for p in procs}
    main, rep = by_pid[primary], by_pid[replica]
    children = [p for p in procs if p["root"] == primary and p["pid"] != primary]
    assert children, "the primary's save child was not followed"
    socket_writer = children[0] if writer_is_child else main
    # A connection accepted during the watch is a `socket` until a /proc sample names it `tcp`
    # (Valkey's RDB channel may live between two samples).
    sent = io_of(socket_writer, "tcp", "write") or io_of(socket_writer, "socket", "write")
    assert sent and sent["bytes"] >= 15 * MiB, socket_writer["io"]
    top = max(sent["sizes"], key=lambda s: s["calls"])
    assert top["result"] == 16384, sent["sizes"]
    got = io_of(rep, "tcp", "read") or io_of(rep, "socket", "read")
    assert got and got["bytes"] >= sent["bytes"] - 4096, rep["io"]
    # A descriptor opened and closed between two /proc samples keeps the kind `unknown` (seen
    # here: Redis's diskless pipe, 16 MB written in under a sample interval, while the child's
    # 80-byte info pipe to its parent was sampled as `pipe`): the larger of the two is the RDB.
    kinds = [io_of(children[0], kind, "write") for kind in (writer_kind, "unknown")]
    written = max((io for io in kinds if io), key=lambda io: io["bytes"], default=None)
    if writer_kind == "tcp":
        written = sent
    assert written and written["bytes"] >= 15 * MiB, [
        (io["fd_kind"], io["family"], io["bytes"]) for io in children[0]["io"]]
    assert main["reaped_children_cpu_s"] is not None
    return sent


@pytest.mark.real_server
@pytest.mark.root
@pytest.mark.skipif(not shutil.which("redis-server") or not shutil.which("redis-cli"),
                    reason="redis-server or redis-cli not installed (scripts/setup --studies installs them)")
@pytest.mark.parametrize("diskless", ["no", "yes"])
def test_watch_sees_a_real_redis_full_sync(tmp_path, diskless):
    procs, primary, replica = watched_full_sync(
        tmp_path, "redis-server", ["--repl-diskless-sync", diskless], [])
    # Disk-based: the child writes the RDB file; diskless: the pipe its parent forwards.
    check_sync(procs, primary, replica, "pipe" if diskless == "yes" else "file", False)


@pytest.mark.real_server
@pytest.mark.root
@pytest.mark.skipif(not os.access(VALKEY, os.X_OK) or not shutil.which("redis-cli"),
                    reason=f"{VALKEY} or redis-cli missing (scripts/setup --studies runs scripts/install-valkey)")
def test_watch_sees_a_real_valkey_dual_channel_sync(tmp_path):
    # Dual-channel: the save child writes the RDB to the replica's socket itself.
    dual = ["--dual-channel-replication-enabled", "yes", "--repl-diskless-sync", "yes"]
    procs, primary, replica = watched_full_sync(tmp_path, VALKEY, dual, dual[:2])
    sent = check_sync(procs, primary, replica, "tcp", True)
    # Each 16K write is followed by a short one: the pattern `iobench watch` was built to see.
    short = sum(s["calls"] for s in sent["sizes"] if 0 < s["result"] < 4096)
    full = next(s["calls"] for s in sent["sizes"] if s["result"] == 16384)
    assert short >= full // 2, sent["sizes"]
