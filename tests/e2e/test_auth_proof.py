"""The token's proof, spoken by hand (protocol 13, tls/auth.cc): the AUTH carries the client's own
nonce and HMAC-SHA256(token, "iobench-auth-v2" NUL server nonce NUL client nonce NUL HELLO frame).
A client written here from that sentence is served; a proof of the old form (the server's nonce
alone), one that sends the server's nonce back as its own, and one made for another HELLO are
refused. Tokens under 16 bytes are refused on both sides unless --allow-short-token."""
import hashlib
import hmac
import os
import socket
import struct

import pytest

from conftest import BIN, Server, hello_frame, pack_fields, proto_version, run

TOKEN = "a-token-of-enough-bytes"
ACK, ERROR, PROGRESS, CHALLENGE, AUTH = 2, 4, 6, 7, 8


def recv_exact(sock, n):
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            break
        out += chunk
    return out


def recv_frame(sock):
    """(type, body) of the next frame, or (None, b"") when the server closed."""
    header = recv_exact(sock, 12)
    if len(header) < 12:
        return None, b""
    _, _, kind, length = struct.unpack("<4sHHI", header)
    return kind, recv_exact(sock, length)


def first_string(body):
    (n,) = struct.unpack("<H", body[:2])
    return body[2:2 + n].decode()


def auth_frame(client_nonce, proof):
    body = pack_fields("AUTH", {"client_nonce": client_nonce, "proof": proof})
    return b"IOBC" + struct.pack("<HHI", proto_version(), AUTH, len(body)) + body


def v2_proof(server_nonce, client_nonce, hello):
    msg = b"iobench-auth-v2\0" + server_nonce.encode() + b"\0" + client_nonce.encode() + b"\0" + hello
    return hmac.new(TOKEN.encode(), msg, hashlib.sha256).hexdigest()


def exchange(server, make_auth):
    """Sends a HELLO, reads the CHALLENGE, sends make_auth(nonce, hello): the reply's type and
    text (the server's ERROR message, if any)."""
    hello = hello_frame(token=TOKEN)
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(hello)
        kind, body = recv_frame(s)
        assert kind == CHALLENGE, kind
        s.sendall(make_auth(first_string(body), hello))
        kind, body = recv_frame(s)
        while kind == PROGRESS:  # the server builds the payload first (slow on a loaded host)
            kind, body = recv_frame(s)
        return kind, first_string(body) if kind == ERROR else ""


@pytest.fixture
def server(cache_dir):
    s = Server("--auth-token", TOKEN, cache=cache_dir)
    yield s
    s.stop()


def test_a_proof_over_both_nonces_and_the_hello_is_served(server):
    mine = os.urandom(32).hex()
    kind, text = exchange(server, lambda nonce, hello: auth_frame(mine, v2_proof(nonce, mine, hello)))
    assert kind == ACK, text


@pytest.mark.parametrize("forged, said", [
    ("the-old-form", "wrong --auth-token"),
    ("the-servers-nonce-sent-back", "AUTH without a nonce of the client's own"),
    ("made-for-another-hello", "wrong --auth-token"),
    ("no-client-nonce", "AUTH without a nonce of the client's own"),
])
def test_a_proof_not_bound_to_this_session_is_refused(server, forged, said):
    mine = os.urandom(32).hex()

    def make(nonce, hello):
        if forged == "the-old-form":  # protocol 12: HMAC(token, "iobench-auth-v1" NUL nonce)
            return auth_frame(mine, hmac.new(TOKEN.encode(), b"iobench-auth-v1\0" + nonce.encode(),
                                             hashlib.sha256).hexdigest())
        if forged == "the-servers-nonce-sent-back":  # what a relay replaying a server would do
            return auth_frame(nonce, v2_proof(nonce, nonce, hello))
        if forged == "no-client-nonce":
            return auth_frame("", v2_proof(nonce, "", hello))
        other = hello_frame(token=TOKEN, nbytes=2 << 20)  # a proof for a 2 MiB request
        return auth_frame(mine, v2_proof(nonce, mine, other))

    kind, text = exchange(server, make)
    assert kind == ERROR and said in text, (kind, text)
    assert f"rejected: {said}" in server.read_line()
    assert server.alive()


@pytest.mark.parametrize("side", ["server", "client"])
def test_a_short_token_is_refused_unless_allowed(cache_dir, side):
    if side == "server":
        p = run("server", "--listen", "127.0.0.1:0", "--auth-token", "fifteen-bytes!!")
    else:
        p = run("client", "--connect", "127.0.0.1:1", "--auth-token", "fifteen-bytes!!")
    assert p.returncode == 2, p.stderr
    assert "--auth-token of 15 bytes: at least 16" in p.stderr and "--allow-short-token" in p.stderr
    assert "fifteen-bytes!!" not in p.stderr  # the token itself is never printed
    assert len(p.stderr.strip().splitlines()) == 1


def test_a_short_token_allowed_on_both_sides_still_works(cache_dir):
    s = Server("--auth-token", "short", "--allow-short-token", cache=cache_dir)
    try:
        p = run("client", "--connect", s.addr, "--bytes", "1M", "-q", "--auth-token", "short",
                "--allow-short-token", cache=cache_dir)
        assert p.returncode == 0, p.stderr
    finally:
        s.stop()
