"""The server under a fuzz of client frames (docs/hardening.md): the fuzzer's corpus
(tests/fuzz/corpus, every control message) mutated at random and sent over sockets, before
authentication (as the first frame) and after it (a HELLO whose token's proof is right, then
mutated frames where the data and the RESULT belong), from eight connections at a time. The server
neither crashes nor grows past its --memory-budget, and serves a valid client after.
IOBENCH_SERVER_FUZZ_SECONDS sets how long (4 here; 20 is the full run:
IOBENCH_SERVER_FUZZ_SECONDS=20 python3 -m pytest -s tests/e2e/test_server_fuzz.py)."""
import os
import random
import socket
import threading
import time
from pathlib import Path

import pytest

from conftest import Server, hello_frame, run
from test_auth_proof import (ACK, CHALLENGE, auth_frame, first_string, recv_frame, v2_proof,
                             TOKEN)
from test_server_contained import peak_rss_mib
from test_server_memory import rss_mib, sanitized

CORPUS = Path(__file__).resolve().parents[1] / "fuzz" / "corpus"
SECONDS = float(os.environ.get("IOBENCH_SERVER_FUZZ_SECONDS", "4"))
BUDGET_MIB = 64

pytestmark = [pytest.mark.concurrency]


def mutate(rng, frames):
    """One frame of the corpus, changed as libFuzzer's simplest mutators would."""
    data = bytearray(rng.choice(frames))
    for _ in range(rng.randint(0, 8)):
        op = rng.randrange(5)
        if op == 0 and data:
            data[rng.randrange(len(data))] = rng.randrange(256)
        elif op == 1 and len(data) > 12:
            del data[rng.randrange(12, len(data)):]
        elif op == 2:
            data += rng.randbytes(rng.randint(1, 512))
        elif op == 3 and len(data) >= 12:  # the body length, anything up to 2^32 - 1
            data[8:12] = rng.randbytes(4)
        elif op == 4 and len(data) >= 8:  # the type, anything
            data[6:8] = rng.randbytes(2)
    return bytes(data)


def drain(sock):
    """Reads what the server answers until it closes, or 0.3 s of silence (a frame it waits
    the rest of: the connection is dropped here, as a fuzzer moves on)."""
    sock.settimeout(0.3)
    try:
        while sock.recv(65536):
            pass
    except OSError:
        pass


def authenticated(port, rng):
    """A connection past the token's proof (a HELLO for 64 KiB, either direction), or None."""
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    hello = hello_frame(token=TOKEN, nbytes=64 * 1024, client_sends=rng.random() < 0.5)
    s.sendall(hello)
    kind, body = recv_frame(s)
    if kind != CHALLENGE:
        s.close()
        return None
    mine = os.urandom(32).hex()
    s.sendall(auth_frame(mine, v2_proof(first_string(body), mine, hello)))
    return s


def one_client(port, rng, frames, counts):
    try:
        if rng.random() < 0.5:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                s.sendall(mutate(rng, frames))
                s.shutdown(socket.SHUT_WR)
                drain(s)
            counts["before"] += 1
            return
        s = authenticated(port, rng)
        if s is None:
            return
        with s:
            # Data (too little, or garbage), then frames where the RESULT belongs.
            s.sendall(rng.randbytes(rng.choice([0, 100, 64 * 1024])))
            for _ in range(rng.randint(1, 3)):
                s.sendall(mutate(rng, frames))
            s.shutdown(socket.SHUT_WR)
            drain(s)
        counts["after"] += 1
    except OSError:
        counts["errors"] += 1


def test_a_fuzz_of_frames_before_and_after_authentication(cache_dir):
    frames = [f.read_bytes() for f in sorted(CORPUS.iterdir()) if f.is_file()]
    assert len(frames) >= 8
    s = Server("--auth-token", TOKEN, "--memory-budget", f"{BUDGET_MIB}M", "--handshake-timeout",
               "2", "--idle-timeout", "2", "--quiet", cache=cache_dir)
    counts = {"before": 0, "after": 0, "errors": 0}
    try:
        base = rss_mib(s.proc.pid)
        end = time.monotonic() + SECONDS

        def worker(seed):
            rng = random.Random(seed)
            while time.monotonic() < end and s.alive():
                one_client(s.port, rng, frames, counts)

        threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=SECONDS + 30)
        assert s.alive(), s.stderr_text()
        peak = peak_rss_mib(s.proc.pid)
        print(f"{SECONDS:.0f} s of fuzzed frames: {counts['before']} connections before "
              f"authentication, {counts['after']} after, {counts['errors']} ended by a timeout or reset; "
              f"server RSS {base:.0f} -> peak {peak:.0f} MiB (--memory-budget {BUDGET_MIB}M)")
        assert counts["before"] > 0 and counts["after"] > 0, counts
        if not sanitized():
            assert peak < base + BUDGET_MIB + 32, (base, peak)
        p = run("client", "--connect", s.addr, "--bytes", "1M", "-q", "--auth-token", TOKEN,
                cache=cache_dir, timeout=60)
        assert p.returncode == 0, p.stderr
        assert "handler(s) failed" not in "".join(s.lines), s.lines
    finally:
        s.stop()
