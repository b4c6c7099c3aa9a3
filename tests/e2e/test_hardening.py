"""A server no client can stall, crash, bloat or misuse: the shared token, and 200+ misbehaving
clients (random bytes, HTTP, huge lengths, broken ClientHellos, disconnects at every protocol
step, trickled hellos) thrown at a TCP and a TLS server while valid runs go through both."""
import os
import random
import socket
import ssl
import struct
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import BIN, Server, hello_frame, proto_version, run

pytestmark = [pytest.mark.concurrency]

MiB = 1 << 20


# --- --auth-token ---------------------------------------------------------------------------

def test_token_is_required_and_compared(cache_dir):
    s = Server("--auth-token", "s3cret-of-16-bytes", cache=cache_dir)
    try:
        assert s.banner.rstrip().endswith("; clients must present the auth token"), s.banner
        p = run("client", "--connect", s.addr, "--bytes", "1M", cache=cache_dir)
        assert p.returncode == 1 and "this server requires --auth-token" in p.stderr
        assert "rejected: this server requires --auth-token" in s.read_line()
        p = run("client", "--connect", s.addr, "--bytes", "1M", "--auth-token", "s3creT-of-16-bytes",
                cache=cache_dir)
        assert p.returncode == 1 and "wrong --auth-token" in p.stderr
        assert "rejected: wrong --auth-token" in s.read_line()
        env = dict(os.environ, IOBENCH_AUTH_TOKEN="s3cret-of-16-bytes")
        p = subprocess.run([BIN, "client", "--connect", s.addr, "--bytes", "1M", "-q",
                            "--cache-dir", cache_dir], capture_output=True, text=True, env=env,
                           timeout=60)
        assert p.returncode == 0, p.stderr
        assert "ok:" in s.read_line()
    finally:
        s.stop()


def test_token_from_the_environment_on_the_server(cache_dir):
    env = dict(os.environ, IOBENCH_AUTH_TOKEN="tok-of-sixteen-bytes")
    proc = subprocess.Popen([BIN, "server", "--listen", "127.0.0.1:0", "--cache-dir", cache_dir],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        port = proc.stdout.readline().split(":")[-1].split()[0]
        p = run("client", "--connect", f"127.0.0.1:{port}", "--bytes", "1M", cache=cache_dir)
        assert p.returncode == 1 and "requires --auth-token" in p.stderr
        p = run("client", "--connect", f"127.0.0.1:{port}", "--bytes", "1M", "--auth-token",
                "tok-of-sixteen-bytes",
                "-q", cache=cache_dir)
        assert p.returncode == 0, p.stderr
    finally:
        proc.kill()
        proc.wait()


def test_non_loopback_listen_warns():
    proc = subprocess.Popen([BIN, "server", "--listen", "0.0.0.0:0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        proc.stdout.readline()
        proc.kill()
        err = proc.communicate(timeout=5)[1]
        assert "warning: listening on 0.0.0.0" in err and "no authentication" in err
    finally:
        proc.kill()


@pytest.mark.parametrize("listen", ["127.0.0.1:0", "localhost:0"])
def test_loopback_listen_does_not_warn(listen):
    # Judged from the bound socket's address (the same check as a socket systemd hands over).
    proc = subprocess.Popen([BIN, "server", "--listen", listen], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert "listening on " in proc.stdout.readline()
        proc.kill()
        err = proc.communicate(timeout=5)[1]
        assert "warning" not in err, err
    finally:
        proc.kill()


def test_overlong_token_is_refused():
    # A client's (the token is checked last, so loopback's own refusal would come first).
    p = run("client", "--connect", "127.0.0.1:1", "--auth-token", "x" * 300, "--bytes", "1M")
    assert p.returncode == 2 and "--auth-token of 300 bytes: at most 256" in p.stderr


# --- 200 misbehaving clients ----------------------------------------------------------------

def read_frame(sock):
    head = b""
    while len(head) < 12:
        chunk = sock.recv(12 - len(head))
        if not chunk:
            return None
        head += chunk
    body_len = struct.unpack("<I", head[8:12])[0]
    body = b""
    while len(body) < body_len:
        chunk = sock.recv(body_len - len(body))
        if not chunk:
            return None
        body += chunk
    return head, body


def misbehave(kind, port, tls_port, rng):
    """One misbehaving client; any outcome is fine except hanging (timeouts bound it)."""
    try:
        target = tls_port if kind.startswith("tls") else port
        with socket.create_connection(("127.0.0.1", target), timeout=5) as c:
            if kind == "connect-close":
                return
            if kind == "random":
                c.sendall(rng.randbytes(rng.randint(1, 4096)))
            elif kind == "http":
                c.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            elif kind == "huge-length":
                c.sendall(hello_frame(body_len=0xFFFFFFF0)[:12])
            elif kind == "half-header":
                c.sendall(b"IOBC\x01")
            elif kind == "partial-body":
                c.sendall(hello_frame()[:30])
            elif kind == "bad-type":
                c.sendall(b"IOBC" + struct.pack("<HHI", 1, 77, 0))
            elif kind == "result-first":
                c.sendall(b"IOBC" + struct.pack("<HHI", 1, 3, 4) + b"\0\0\0\0")
            elif kind == "hello-then-close":
                c.sendall(hello_frame(nbytes=MiB))
            elif kind in ("mid-data", "short-sender", "no-result"):
                c.sendall(hello_frame(nbytes=MiB))
                if read_frame(c) is None:
                    return
                if kind == "mid-data":
                    c.sendall(b"\0" * rng.randint(1, 500000))
                elif kind == "short-sender":
                    c.sendall(b"\0" * 1000)  # announced 1 MiB, sends 1000 bytes, then waits
                    time.sleep(0.3)
                else:
                    c.sendall(b"\0" * MiB)
                    read_frame(c)  # the receiver's RESULT; we never send ours
            elif kind == "trickle":
                for b in hello_frame()[:8]:
                    c.sendall(bytes([b]))
                    time.sleep(0.05)
            elif kind == "silent":
                time.sleep(0.3)
            elif kind == "tls-broken-hello":
                c.sendall(b"\x16\x03\x01\x02\x00" + rng.randbytes(rng.randint(0, 600)))
            elif kind == "tls-truncated-hello":
                c.sendall(b"\x16\x03\x01\x00")
            elif kind == "tls-then-close":
                ctx = ssl.create_default_context()
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
                with ctx.wrap_socket(c, server_hostname="localhost") as s:
                    s.sendall(hello_frame(nbytes=MiB, proto="tls", tls_io="socket")[:20])
            try:
                c.recv(65536)
            except OSError:
                pass
    except OSError:
        pass


KINDS = ["connect-close", "random", "http", "huge-length", "half-header", "partial-body",
         "bad-type", "result-first", "hello-then-close", "mid-data", "short-sender", "no-result",
         "trickle", "silent", "tls-broken-hello", "tls-truncated-hello", "tls-then-close"]


def server_footprint(pid):
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) * 1024
    threads = len(os.listdir(f"/proc/{pid}/task"))
    return fds, rss, threads


def resting_threads(pid, seconds=3):
    """The fewest threads the server ran over `seconds` with no client."""
    fewest = server_footprint(pid)[2]
    for _ in range(int(seconds / 0.1)):
        time.sleep(0.1)
        fewest = min(fewest, server_footprint(pid)[2])
    return fewest


def settle(pid, baseline_fds, rest_threads, timeout=15):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        fds, rss, threads = server_footprint(pid)
        if fds <= baseline_fds and threads <= rest_threads:
            return fds, rss, threads
        time.sleep(0.2)
    return server_footprint(pid)


def server_log(s):
    """The server's log lines so far that are not a rejected misbehaving client's."""
    while not s.queue.empty():
        line = s.queue.get()
        if line is not None:
            s.lines.append(line)
    return [line.rstrip() for line in s.lines if " rejected: " not in line and " ok: " not in line]


@pytest.mark.slow
def test_two_hundred_misbehaving_clients_do_not_hurt_valid_runs(cache_dir, certs):
    # The property: no misbehaving client delays or breaks a valid one. The bounds say so: a
    # valid client must finish its handshake and hello within 5 s of its accept (milliseconds
    # unloaded) and may go 10 s without progress, so only another client's interference could
    # drop it — not this host's CPU starvation, which under ASan, two busy loops and 24 client
    # processes kept a client from its first write for over 2 s after its ACK (the old
    # --idle-timeout 2 dropped it: 1 run in ~40). Misbehaving sessions end within those bounds.
    # Logging: a valid run that fails shows the servers' side of every session that did not
    # end ok (the pumped log; read after the runs), and their stderr.
    tcp = Server("--handshake-timeout", "5", "--idle-timeout", "10", cache=cache_dir)
    tls = Server("--handshake-timeout", "5", "--idle-timeout", "10", "--tls-cert",
                 certs / "server.crt", "--tls-key", certs / "server.key", cache=cache_dir)
    ca = str(certs / "ca.crt")

    def valid(i):
        args = ["client", "--connect", (tls if i % 2 else tcp).addr, "--bytes", "2M", "-q",
                "--buf", ["1k", "16k", "64k"][i % 3]]
        if i % 2:
            args += ["--proto", "tls", "--tls-ca", ca]
        if i % 4 >= 2:
            args.append("--reverse")
        return run(*args, cache=cache_dir)

    try:
        # Warm both servers (payload cache, TLS context) before the baseline.
        for i in range(4):
            assert valid(i).returncode == 0
        # Threads at rest once the warm-up's sessions ended: the main one and the pre-auth
        # watchdog (and a sanitizer's own); every session's thread must be gone again at the end.
        rest = {s: resting_threads(s.proc.pid) for s in (tcp, tls)}
        base = {s: settle(s.proc.pid, 10**6, rest[s]) for s in (tcp, tls)}
        rng = random.Random(7)
        jobs = [("bad", KINDS[i % len(KINDS)]) for i in range(221)]
        jobs += [("valid", i) for i in range(16)]
        rng.shuffle(jobs)
        results = []
        with ThreadPoolExecutor(max_workers=24) as pool:
            futs = []
            for what, arg in jobs:
                if what == "bad":
                    futs.append(pool.submit(misbehave, arg, tcp.port, tls.port,
                                            random.Random(rng.random())))
                else:
                    futs.append(pool.submit(valid, arg))
            for f in futs:
                results.append(f.result(timeout=120))
        valid_runs = [r for r in results if r is not None]
        assert len(valid_runs) == 16
        for r in valid_runs:
            assert r.returncode == 0, "\n".join(
                [r.stderr, "TCP server:", *server_log(tcp), tcp.stderr_text(), "TLS server:",
                 *server_log(tls), tls.stderr_text()])
        for s in (tcp, tls):
            assert s.alive(), s.stderr_text()
            assert "Sanitizer" not in s.stderr_text() and "runtime error" not in s.stderr_text(), \
                s.stderr_text()
            fds, rss, threads = settle(s.proc.pid, base[s][0], rest[s])
            assert fds <= base[s][0], (fds, base[s])
            assert threads <= rest[s], (threads, rest[s])
            assert rss <= base[s][1] + 32 * MiB, (rss, base[s])
        # And both still serve.
        assert valid(0).returncode == 0 and valid(1).returncode == 0
    finally:
        tcp.stop()
        tls.stop()


def test_a_slow_reader_is_not_dropped_while_it_reads(cache_dir):
    """The sender's no-progress timeout counts from the receiver's last sign of reading, not from
    its own last write: the server sends 6 MiB to a client that reads 64 KiB every 0.1 s (about
    10 s in all) against --idle-timeout 1. Megabytes still sit in the server's send buffer when
    its last write returns; the server waits for the RESULT while the client drains them, and
    the client gets every byte (the server's verdict on its made-up RESULT does not matter)."""
    s = Server("--idle-timeout", "1", cache=cache_dir)
    total = 6 * MiB
    try:
        with socket.socket() as c:
            c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            c.settimeout(10)
            c.connect(("127.0.0.1", s.port))
            c.sendall(hello_frame(client_sends=False, nbytes=total, send_buf=65536,
                                  recv_buf=65536))
            head, _ = read_frame(c)
            while struct.unpack("<H", head[6:8])[0] == 6:  # PROGRESS while it builds
                head, _ = read_frame(c)
            assert struct.unpack("<H", head[6:8])[0] == 2, head  # ACK
            got = 0
            while got < total:
                chunk = c.recv(min(65536, total - got))
                assert chunk, f"the server closed after {got} of {total} bytes"
                got += len(chunk)
                time.sleep(0.1)
            c.sendall(b"IOBC" + struct.pack("<HHI", proto_version(), 3, 0))  # a bad RESULT
            read_frame(c)
        line = s.read_line(timeout=15)
        # It waited for the RESULT and judged the one sent (empty: truncated), no timeout.
        assert "timed out" not in line and "truncated message" in line, line
    finally:
        s.stop()


def test_token_from_a_file_on_both_sides(cache_dir, tmp_path):
    """@FILE: the token is FILE's first line (the package's /etc/iobench/auth-token); a file
    that cannot be read, or whose first line is empty, stops with one line naming it."""
    token = tmp_path / "token"
    token.write_text("from-a-file-of-16-bytes\n")
    env = dict(os.environ, IOBENCH_AUTH_TOKEN=f"@{token}")
    proc = subprocess.Popen([BIN, "server", "--listen", "127.0.0.1:0", "--cache-dir", cache_dir],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        port = proc.stdout.readline().split(":")[-1].split()[0]
        p = run("client", "--connect", f"127.0.0.1:{port}", "--bytes", "1M", "--auth-token",
                "from-a-file-of-16-bytes", "-q", cache=cache_dir)
        assert p.returncode == 0, p.stderr
        p = run("client", "--connect", f"127.0.0.1:{port}", "--bytes", "1M", "--auth-token",
                f"@{token}", "-q", cache=cache_dir)
        assert p.returncode == 0, p.stderr
    finally:
        proc.kill()
        proc.wait()
    (tmp_path / "empty").write_text("\n")
    for arg, said in ((f"@{tmp_path}/missing", "cannot read"), (f"@{tmp_path}/empty", "empty")):
        p = run("client", "--connect", "127.0.0.1:1", "--auth-token", arg)
        assert p.returncode == 2 and said in p.stderr and arg in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1
