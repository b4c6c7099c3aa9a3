"""Whole-process cost: the loopback client reaps its server, so a measurement from outside sees
every process; the report says what the processes cost outside the data phases; a payload
being built reports progress (also over the control channel) and stops on Ctrl-C."""
import json
import os
import resource
import signal
import socket
import struct
import subprocess
import time

from conftest import BIN, Server, hello_frame, run

MiB = 1 << 20


def children_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def test_outside_measurement_includes_the_loopback_server(cache_dir):
    # RUSAGE_CHILDREN counts a grandchild only once its parent reaped it: before the loopback
    # client reaped its server, this saw the client alone (about half the data phases' CPU).
    run("payload", "--bytes", "16M", "--out", os.devnull, cache=cache_dir, check=0)
    before = children_cpu_s()
    p = run("--bytes", "16M", "--repeat", "3", "--syscalls", "off", "--json", "-", "-q",
            cache=cache_dir, check=0)
    outside = children_cpu_s() - before
    doc = json.loads(p.stdout)
    runs = doc["results"][0]["runs"]
    data = sum(r["sender"]["cpu_s"] + r["receiver"]["cpu_s"] for r in runs)
    assert outside >= data - 0.005, (outside, data)
    procs = doc["processes"]
    assert set(procs) == {"client", "server"}, procs
    # The client sends: its data phases are the senders', the server's the receivers'.
    assert abs(procs["client"]["data_phases_cpu_s"] - sum(r["sender"]["cpu_s"] for r in runs)) < 1e-6
    assert abs(procs["server"]["data_phases_cpu_s"] - sum(r["receiver"]["cpu_s"] for r in runs)) < 1e-6
    for side in procs.values():
        assert side["cpu_s"] >= side["data_phases_cpu_s"] - 0.005, side
        assert abs(side["cpu_s"] - side["data_phases_cpu_s"] - side["other_runs_cpu_s"]
                   - side["payload_cpu_s"] - side["rest_cpu_s"]) < 1e-6, side
    assert outside >= procs["server"]["cpu_s"] + procs["client"]["cpu_s"] - 0.05
    assert "processes" in doc["sources"]


def test_table_shows_process_cpu_and_counting_run_cost(cache_dir):
    p = run("--bytes", "4M", "-v", cache=cache_dir, check=0)
    assert "process CPU (whole processes, reaped" in p.stdout
    lines = [l for l in p.stdout.splitlines() if l.strip().startswith(("client ", "server ", "all "))]
    assert [l.split()[0] for l in lines] == ["client", "server", "all"], p.stdout
    assert "warm-up/counting runs" in lines[0]


def test_two_host_client_reports_only_its_own_process(server, cache_dir):
    p = run("client", "--connect", server.addr, "--bytes", "2M", "--json", "-", "-q",
            cache=cache_dir, check=0)
    assert set(json.loads(p.stdout)["processes"]) == {"client"}


def frames_until_ack(sock):
    """Frame types the server sends before (and including) its ACK or ERROR, with bodies."""
    out = []
    while True:
        head = sock.recv(12, socket.MSG_WAITALL)
        assert len(head) == 12 and head[:4] == b"IOBC", head
        kind, n = struct.unpack("<HI", head[6:12])
        body = sock.recv(n, socket.MSG_WAITALL) if n else b""
        out.append((kind, body))
        if kind in (2, 4):
            return out


def test_server_reports_payload_progress_before_its_ack(tmp_path):
    # An empty cache: the server builds the payload it sends (--reverse) and says how far it got
    # in PROGRESS frames, at least the final one (done == total), before the ACK.
    srv = Server(cache=str(tmp_path))
    try:
        nbytes = 3 * MiB
        with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as c:
            c.sendall(hello_frame(client_sends=False, nbytes=nbytes))
            frames = frames_until_ack(c)
        assert frames[-1][0] == 2, frames
        progress = [struct.unpack("<QQq", body) for kind, body in frames[:-1]]
        assert progress and all(kind == 6 for kind, _ in frames[:-1]), frames
        assert progress[-1][:2] == (nbytes, nbytes), progress
        assert [d for d, _, _ in progress] == sorted(d for d, _, _ in progress)
        srv.read_line()  # the session ends: we hung up
        # Now it is built: the next session gets its ACK at once.
        with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as c:
            c.sendall(hello_frame(client_sends=False, nbytes=nbytes))
            assert [k for k, _ in frames_until_ack(c)] == [2]
        srv.read_line()
        # And a real client over the same path moves and verifies it.
        run("client", "--connect", srv.addr, "--reverse", "--bytes", "3M", "-q",
            cache=str(tmp_path / "client"), check=0)
        assert "ok:" in srv.read_line()
    finally:
        srv.stop()


def test_ctrl_c_stops_payload_generation_and_leaves_no_cache_file(tmp_path):
    cache = tmp_path / "cache"
    p = subprocess.Popen([BIN, "payload", "--bytes", "1G", "--out", str(tmp_path / "out.zst"),
                          "--cache-dir", str(cache)], stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)  # 1 GiB takes far longer than this to build
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 130, err
    assert "payload generation interrupted" in err
    assert not any(cache.glob("*.zst")) and not (tmp_path / "out.zst").exists()


def test_payload_quiet_prints_only_the_result(tmp_path):
    p = run("payload", "-q", "--bytes", "2M", "--out", str(tmp_path / "p.zst"),
            cache=str(tmp_path / "c"), check=0)
    assert p.stderr == "" and p.stdout.startswith("wrote 2097152 bytes")


def threads_of(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(l.split()[1] for l in f if l.startswith("Threads:")))


def server_child(client_pid):
    try:
        with open(f"/proc/{client_pid}/task/{client_pid}/children") as f:
            kids = f.read().split()
    except FileNotFoundError:
        return None
    return int(kids[0]) if kids else None


def test_the_loopback_server_of_one_connection_is_single_threaded(cache_dir):
    # A thread that shares its file table pays a reference on the socket's file for every read
    # and write: the loopback server serves one connection on its accepting thread. Seen from
    # /proc while the data phase runs (a stream long enough to be caught; stopped once seen).
    run("payload", "--bytes", "1M", "--out", os.devnull, cache=cache_dir, check=0)
    for conns, want in ((1, lambda n: n == 1), (2, lambda n: n >= 2)):
        p = subprocess.Popen([BIN, "--bytes", "4G", "--buf", "4k", "--source-window", "256K",
                              "--conns", str(conns), "--syscalls", "off", "-q",
                              "--cache-dir", cache_dir],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        seen = []
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and p.poll() is None:
                child = server_child(p.pid)
                if child:
                    try:
                        seen.append(threads_of(child))
                    except (FileNotFoundError, StopIteration):
                        pass
                # Two threads or more once a session runs (--conns 2), or enough samples.
                if len(seen) >= 50 or (conns == 2 and seen and max(seen) >= 2):
                    break
                time.sleep(0.02)
        finally:
            p.send_signal(signal.SIGINT)
            p.communicate(timeout=30)
        assert seen, "the loopback server was never seen"
        assert want(max(seen)), (conns, seen)
