"""Bad input and faults: each error is one line naming the bad value; the server survives
any client and serves the next one."""
import os
import random
import signal
import socket
import struct
import subprocess
import time

import pytest

from conftest import BIN, Server, hello_frame, proto_version, run

MiB = 1 << 20


@pytest.mark.parametrize("args,needle", [
    (["--bogus"], "--bogus"),
    (["--buf", "16q"], "16q"),
    (["--buf", "0"], "'0'"),
    (["--buf", "-1"], "-1"),
    (["--buf", "1e9"], "1e9"),
    (["--buf", "17m"], "17m"),
    (["--bytes", "1q"], "1q"),
    (["--send-buf", "1k,2k", "--buf", "1k,2k,4k"], "lists must match"),
    (["--proto", "sctp"], "sctp"),
    (["--repeat", "-3"], "-3"),
    (["--repeat", "often"], "invalid --repeat 'often': expected 1..100000 or auto"),
    (["--max-repeat", "9"], "--max-repeat needs --repeat auto"),
    (["--repeat", "auto", "--max-repeat", "4"], "invalid --max-repeat '4': expected 5..100000"),
    (["--repeat", "auto", "--target-ci", "0%"], "invalid --target-ci '0%'"),
    (["--zstd-level", "99"], "99"),
    (["client", "--connect", "127.0.0.1:70000"], "70000"),
    (["client", "--connect", "bad host:1"], "bad host"),
    (["server", "--listen", "127.0.0.1:x"], "'x'"),
    (["--payload", "/nonexistent/dump.rdb", "--bytes", "1M"], "/nonexistent/dump.rdb"),
])
def test_bad_input_is_one_line_and_nonzero(args, needle, cache_dir):
    p = run(*args, cache=None, timeout=30)
    assert p.returncode != 0
    err = p.stderr.strip()
    assert err.count("\n") == 0, err
    assert needle in err, err
    assert err.startswith("iobench: error:")


def test_unresolvable_host(cache_dir):
    p = run("client", "--connect", "no-such-host.invalid:5210", "--bytes", "1M", cache=cache_dir)
    assert p.returncode == 1
    assert "no-such-host.invalid" in p.stderr


def test_connection_refused(cache_dir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = run("client", "--connect", f"127.0.0.1:{port}", "--bytes", "1M", cache=cache_dir)
    assert p.returncode == 1
    assert "Connection refused" in p.stderr and str(port) in p.stderr


def test_port_already_in_use(server):
    p = run("server", "--listen", server.addr, timeout=10)
    assert p.returncode == 1
    assert "Address already in use" in p.stderr and server.addr in p.stderr


def start_slow_client(server, cache_dir, *extra):
    """A client moving 64 MiB in 64-byte writes (about a million syscalls), in its data phase."""
    run("payload", "--bytes", "64M", "--out", os.devnull, cache=cache_dir, check=0)
    p = subprocess.Popen([BIN, "client", "--connect", server.addr, "--bytes", "64M", "--buf", "64",
                          "--cache-dir", cache_dir, "--timeout", "5", *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    server.wait_for_data_phase(p)
    return p


@pytest.mark.parametrize("reverse", [False, True])
def test_server_killed_mid_transfer(server, cache_dir, reverse):
    client = start_slow_client(server, cache_dir, *(["--reverse"] if reverse else []))
    server.proc.send_signal(signal.SIGKILL)
    t0 = time.monotonic()
    out, err = client.communicate(timeout=20)
    assert time.monotonic() - t0 < 8, "client must notice within a few seconds"
    assert client.returncode == 1, out + err
    assert "of 67108864 bytes" in err, err
    moved = int(err.split("client ")[1].split(":")[1].split(" of")[0])
    assert 0 < moved < 64 * MiB, err
    # Reported like an interrupted run: this side's figures up to the failure, the server's n/a.
    assert f"PARTIAL: buf 64 run 0 failed (" in out and f"after {moved} of 67108864 bytes" in out
    assert "n/a   not reported: failed before the server sent its figures" in out, out


def test_client_killed_mid_transfer_server_serves_next(server, cache_dir):
    client = start_slow_client(server, cache_dir)
    client.kill()
    client.wait()
    line = server.read_line()
    assert "failed:" in line and "peer closed" in line, line
    p = run("client", "--connect", server.addr, "--bytes", "1M", "-q", cache=cache_dir, check=0)
    assert "ok: received 1.0 MiB" in server.read_line()
    assert server.alive()


@pytest.mark.concurrency  # a stall case: runs under ThreadSanitizer too (docs/hardening.md)
def test_silent_client_does_not_block_the_next(server, cache_dir):
    silent = socket.create_connection(("127.0.0.1", server.port))
    try:
        # --syscalls off: one session (auto adds a counting run, a session of its own).
        run("client", "--connect", server.addr, "--bytes", "1M", "-q", "--syscalls", "off",
            cache=cache_dir, check=0)
        # Sessions are concurrent: the valid client is served while the silent one waits, so its
        # line comes first (served behind the silent one, it would follow the 1 s cut). The
        # order, not a time: a loaded CI's TSan client can take a second of its own.
        assert "ok:" in server.read_line()
        assert "no hello within 1 s" in server.read_line()
    finally:
        silent.close()


def talk(port, data, shut=True):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
        c.sendall(data)
        if shut:
            try:
                c.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # the server may already have rejected and closed
        reply = b""
        try:
            while chunk := c.recv(4096):
                reply += chunk
        except (ConnectionResetError, socket.timeout):
            pass
        return reply


@pytest.mark.parametrize("data,logged", [
    # Random bytes, but never 0x16 first (the server takes that for a TLS ClientHello) nor 'I'.
    (bytes([0x17]) + random.Random(4).randbytes(63), "not an iobench peer"),
    (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "not an iobench peer (first bytes 'GET / HTTP/1"),
    (hello_frame(body_len=0xFFFFFFF0), "exceeds limit"),
    # A version from the future: one past this build's.
    (hello_frame(version=proto_version() + 1), f"protocol version {proto_version() + 1}"),
    (hello_frame(send_buf=0), "send_buf_bytes 0 outside 64..16777216"),
    (hello_frame(nbytes=1 << 40), "bytes 1099511627776 outside"),
    (hello_frame(proto="quic"), "HELLO asks for proto 'quic' on a tcp connection"),
    (hello_frame(engine="magic"), "unknown engine 'magic'"),
    # Bounds from the field lists (src/engine/tuning.h, src/proto/fields.h).
    (hello_frame(fields={"tuning.queue_depth": 0}), "queue_depth 0 outside 1..4096"),
    (hello_frame(fields={"tuning.uring_recv": "many"}), "uring_recv many outside auto, multishot or batch"),
    (hello_frame(fields={"cpu": 5000}), "cpu 5000 outside -1..1023"),
    # The command line's bounds, shared through one constant (payload/spec.h, engine/tuning.h).
    (hello_frame(fields={"zstd_level": 99}), "zstd_level 99 outside 1..19"),
    (hello_frame(fields={"conns": 0}), "conns 0 outside 1..1024"),
    (hello_frame(fields={"adaptive": True, "budget": 32}), "budget 32 outside 64..1073741824"),
    # A sending server maps the window only in whole pages (payload/window.h).
    (hello_frame(client_sends=False, fields={"source_window": 65537}),
     "source window of 65537 bytes: a multiple of 4096"),
    (hello_frame()[:20], "peer closed"),
])
def test_misbehaving_client_is_rejected_and_server_survives(server, cache_dir, data, logged):
    reply = talk(server.port, data)
    line = server.read_line()
    assert "rejected:" in line and logged in line, line
    if "peer closed" not in logged:
        assert reply.startswith(b"IOBC") and logged.encode() in reply
    run("client", "--connect", server.addr, "--bytes", "1M", "-q", cache=cache_dir, check=0)
    assert "ok:" in server.read_line()


def test_hand_built_hello_is_served(server, cache_dir):
    """The Python encoder above matches the C++ codec: a well-formed hello gets an ACK."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as c:
        c.sendall(hello_frame(nbytes=4096))
        head = c.recv(12, socket.MSG_WAITALL)
        assert head[:4] == b"IOBC" and struct.unpack("<H", head[6:8])[0] == 2  # ACK
    assert "failed:" in server.read_line()  # then we hung up without sending data


def test_doctor_reports_every_check():
    p = run("doctor", timeout=30, check=0)
    for name in ("kernel", "bpf syscall counter", "perf tracepoints", "hardware counters", "io_uring", "strace", "perf",
                 "route MTU", "kTLS", "OpenSSL", "perf_event_paranoid"):
        assert any(line.startswith(name) for line in p.stdout.splitlines()), name


@pytest.mark.concurrency  # a stall case: runs under ThreadSanitizer too (docs/hardening.md)
def test_trickled_hello_is_cut_at_the_handshake_timeout(server, cache_dir):
    # One byte every 0.4 s stays inside the per-read timeout (1 s) but not the hello's deadline.
    frame = hello_frame(nbytes=4096)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as c:
        t0 = time.monotonic()
        try:
            for b in frame:
                c.sendall(bytes([b]))
                time.sleep(0.4)
        except OSError:
            pass
        line = server.read_line(timeout=10)
        assert "rejected: no hello within 1 s" in line, line
        assert time.monotonic() - t0 < 4
    # Meanwhile, and after, others are served.
    run("client", "--connect", server.addr, "--bytes", "1M", "-q", cache=cache_dir, check=0)


@pytest.mark.parametrize("engine", ["epoll", "uring"])
@pytest.mark.parametrize("reverse", [False, True])
def test_each_engine_fails_cleanly_when_the_peer_dies(server, cache_dir, engine, reverse):
    # Client killed: the server's engine (chosen by the HELLO) sees EOF, a reset or EPIPE,
    # logs it and serves the next run on the same engine.
    direction = ["--reverse"] if reverse else []
    client = start_slow_client(server, cache_dir, "--engine", engine, *direction)
    client.kill()
    client.wait()
    line = server.read_line()
    assert "failed:" in line and "of 67108864 bytes" in line, line
    run("client", "--connect", server.addr, "--engine", engine, "--bytes", "1M", "-q",
        *direction, cache=cache_dir, check=0)
    assert "ok:" in server.read_line()
    # Server killed: the client's engine notices within seconds and says how far it got.
    client = start_slow_client(server, cache_dir, "--engine", engine, *direction)
    server.proc.send_signal(signal.SIGKILL)
    out, err = client.communicate(timeout=20)
    assert client.returncode == 1 and "of 67108864 bytes" in err, out + err
