"""Before authentication the server reads only what authentication needs, and its log cannot be
forged or flooded (docs/hardening.md): a HELLO and an AUTH of at most 2 KiB, anything else refused
on its header; what a client sent reaches the log escaped; past 20 lines of a kind in a summary
window the rest are counted in one summary line; cuts, timeouts, refused tokens, rejections and
busy closes are counted apart; an empty token is refused wherever it comes from."""
import os
import signal
import socket
import struct
import subprocess

import pytest

from conftest import BIN, Server, hello_frame, proto_version, run
from test_faults import talk

GROUP, RESULT, ERROR, CHALLENGE = 5, 3, 4, 7


def frame_header(kind, body_bytes):
    return b"IOBC" + struct.pack("<HHI", proto_version(), kind, body_bytes)


def reply_of(port, data):
    """What the server answers to `data` until it closes (the socket left open for writing: a
    header alone must be answered without the body it announces)."""
    return talk(port, data, shut=False)


def test_a_group_frame_before_authentication_is_refused_on_its_header(server):
    # The header alone: the server answers (and closes) without waiting for 160 KiB of body.
    reply = reply_of(server.port, frame_header(GROUP, 160 * 1024))
    assert b"expected HELLO, got GROUP" in reply, reply
    assert "expected HELLO, got GROUP" in server.read_line()
    # A HELLO past 2 KiB (a long string in it) is refused on its header too.
    big = hello_frame(fields={"engine": "x" * 3000})
    reply = reply_of(server.port, big[:12])
    assert b"HELLO of 3" in reply and b"at most 2048" in reply, reply
    assert server.alive()


def test_only_an_auth_follows_the_challenge():
    s = Server("--auth-token", "token-of-sixteen-bytes")
    try:
        with socket.create_connection(("127.0.0.1", s.port), timeout=5) as c:
            c.sendall(hello_frame(token="token-of-sixteen-bytes"))
            head = c.recv(12, socket.MSG_WAITALL)
            assert struct.unpack("<H", head[6:8])[0] == CHALLENGE
            c.recv(struct.unpack("<I", head[8:12])[0], socket.MSG_WAITALL)
            c.sendall(frame_header(RESULT, 4000))
            out = c.recv(4096)
        assert b"expected AUTH, got RESULT" in out, out
        line = s.read_line()
        assert "expected AUTH, got RESULT" in line, line
    finally:
        s.stop()


def test_a_newline_in_a_hello_stays_in_one_log_line(server):
    forged = "tcp\n[2026-01-01 00:00:00] 10.0.0.9:1 ok: sent 1.0 GiB buf 16K over tcp"
    reply_of(server.port, hello_frame(proto=forged))
    line = server.read_line()
    assert line.count("\n") == 1 and "rejected:" in line, line
    assert "tcp\\n[2026-01-01 00:00:00] 10.0.0.9:1 ok" in line, line
    # Nothing else was logged: the forged line is not a line.
    with pytest.raises(AssertionError):
        server.read_line(timeout=1)


def test_a_flood_of_rejections_is_summarised_and_counted_apart(cache_dir):
    s = Server(cache=cache_dir)
    try:
        for _ in range(100):
            reply_of(s.port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        p = run("client", "--connect", s.addr, "--bytes", "1M", "-q", cache=cache_dir)
        assert p.returncode == 0, p.stderr
        lines = []
        while not any(" ok: " in l for l in lines):
            lines.append(s.read_line())
        rejected = [l for l in lines if "rejected:" in l]
        summary = [l for l in lines if "pre-auth:" in l]
        # 20 lines of their own, then one summary at once (the next is due in 10 s).
        assert len(rejected) == 20, len(rejected)
        assert len(summary) == 1 and "21 rejected" in summary[0], summary
        assert "(1 not logged one by one)" in summary[0], summary
        s.proc.send_signal(signal.SIGTERM)
        totals = ""
        while "pre-auth since start" not in totals:
            totals = s.read_line()
        print(f"100 HTTP requests: {len(rejected)} lines of their own, then: {summary[0].strip()}; "
              f"at the stop: {totals.strip()}")
        assert ("0 cut at --handshake-timeout, 0 cut to make room, 0 timed out reading, "
                "0 refused token(s), 100 rejected, 0 closed with every handler busy, 0 refused with no thread") in totals
    finally:
        s.stop()


@pytest.mark.parametrize("how", ["option", "env", "empty-file", "short-file"])
def test_an_empty_or_short_token_is_refused(how, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text({"empty-file": "", "short-file": "short\n"}.get(how, ""))
    args = ["server", "--listen", "127.0.0.1:0"]
    env = dict(os.environ)
    env.pop("IOBENCH_AUTH_TOKEN", None)
    if how == "option":
        args += ["--auth-token", ""]
    elif how == "env":
        env["IOBENCH_AUTH_TOKEN"] = ""
    else:
        args += ["--auth-token", f"@{token_file}"]
    p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=10, env=env)
    assert p.returncode == 2, (p.stdout, p.stderr)
    expected = {"option": "--auth-token '': an empty token would mean no authentication",
                "env": "IOBENCH_AUTH_TOKEN is set but empty",
                "empty-file": "it is empty",
                "short-file": "--auth-token of 5 bytes: at least 16"}[how]
    assert expected in p.stderr and p.stderr.count("\n") == 1, p.stderr
