"""A client that trusts no server (issue #88, docs/hardening.md "A client against a hostile
server"): what a server sends is escaped before it is printed, a RESP reply is bounded before it
is buffered, and neither PROGRESS nor a frame dripped a byte at a time keeps a client past its
deadlines."""
import socket
import struct
import subprocess
import threading
import time

from conftest import BIN, pack_fields, proto_version, run

MiB = 1 << 20
TYPES = {"ACK": 2, "RESULT": 3, "ERROR": 4, "PROGRESS": 6}


def frame(kind, **fields):
    body = pack_fields(kind, fields)
    return b"IOBC" + struct.pack("<HHI", proto_version(), TYPES[kind], len(body)) + body


class FakeServer:
    """Accepts one connection, reads the HELLO, then runs `act(conn)`."""

    def __init__(self, act):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.act = act
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        self.sock.settimeout(30)
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(60)
            try:
                header = conn.recv(12, socket.MSG_WAITALL)
                (length,) = struct.unpack("<I", header[8:12])
                conn.recv(length, socket.MSG_WAITALL)
                self.act(conn, self.done)
            except OSError:
                pass
        self.sock.close()

    def stop(self):
        self.done.set()
        self.thread.join(10)


def client(port, *extra, timeout=60):
    t0 = time.monotonic()
    p = run("client", "--connect", f"127.0.0.1:{port}", "--bytes", "1M", *extra, timeout=timeout)
    return p, time.monotonic() - t0


def client_against(act, *extra):
    """A client run against a FakeServer doing `act`: (CompletedProcess, seconds), printed."""
    s = FakeServer(act)
    try:
        p, took = client(s.port, *extra)
    finally:
        s.stop()
    print(f"gave up after {took:.1f} s: {p.stderr.strip()}")
    return p, took


def test_a_servers_error_text_is_escaped_not_printed_raw():
    # Before #88 an ERROR's text reached the terminal as sent: ESC and OSC sequences, and a
    # newline that forged a line of figures.
    forged = "busy\n\x1b]0;owned\x07\x1b[2Jok 100 Gbit/s \u202e\x9b"
    s = FakeServer(lambda conn, done: conn.sendall(frame("ERROR", message=forged)))
    try:
        p, _ = client(s.port)
    finally:
        s.stop()
    assert p.returncode != 0
    err = p.stderr
    print(err)
    assert "\x1b" not in err and "\x07" not in err and "\u202e" not in err and "\x9b" not in err
    assert "busy\\n\\x1b]0;owned\\x07" in err, err
    assert len([l for l in err.splitlines() if "Gbit/s" in l]) == 1  # the one escaped line


def test_progress_forever_does_not_keep_the_client_past_its_build_timeout():
    # Before #88 every PROGRESS renewed the client's wait: a server that reported forever kept
    # it forever.
    def report(conn, done):
        while not done.is_set():
            conn.sendall(frame("PROGRESS", done_bytes=0, total_bytes=MiB, elapsed_ns=1))
            time.sleep(0.2)

    p, took = client_against(report, "--build-timeout", "3", "--timeout", "2", "-q")
    assert p.returncode != 0 and "--build-timeout 3" in p.stderr, p.stderr
    assert took < 10, took


def test_a_frame_dripped_a_byte_at_a_time_is_cut_at_the_timeout():
    # Each byte inside --timeout 2, the ACK's bytes a second apart: before #88 the client waited
    # them all out (and a server could drip a longer frame for as long as it liked).
    ack = frame("ACK", server_version="0.1.0")

    def drip(conn, done):  # a PROGRESS first: past the --hello-timeout's first answer
        conn.sendall(frame("PROGRESS", done_bytes=0, total_bytes=MiB, elapsed_ns=1))
        for b in ack:
            if done.wait(1.0):
                return
            conn.sendall(bytes([b]))

    p, took = client_against(drip, "--timeout", "2", "--hello-timeout", "2", "-q")
    assert p.returncode != 0 and "incomplete at its deadline" in p.stderr, p.stderr
    assert took < 8, took


def test_load_refuses_a_resp_reply_longer_than_max_reply():
    # `$9223372036854775000`: before #88 the load buffered what followed until the OOM killer
    # ended it (4 GiB RSS).
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    stop = threading.Event()

    def serve():
        sock.settimeout(30)
        conn, _ = sock.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(b"$9223372036854775000\r\n")
            chunk = b"x" * 65536
            try:
                while not stop.is_set():
                    conn.sendall(chunk)
            except OSError:
                pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        p = subprocess.run([BIN, "load", "--connect", f"127.0.0.1:{port}", "--rate", "100",
                            "--conns", "1", "--duration", "2"], capture_output=True, text=True,
                           timeout=60)
    finally:
        stop.set()
        t.join(10)
        sock.close()
    print(p.stderr.strip())
    assert p.returncode != 0 and "above --max-reply 1.0 MiB" in p.stderr, p.stderr
