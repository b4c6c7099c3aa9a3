"""A stream of new connections against the pre-auth cap (src/server/preauth.h): when every place
is taken, the gate cuts one connection of the source holding the most, at random among them.
A valid client whose handshake is slow (IOBENCH_TEST_SLOW_HANDSHAKE waits before each of its
pre-auth steps: a distant replica, as this host has no delay qdisc) is served while another
local user (a local peer is one source per UID, issue #88) opens new connections many times
faster than the cap turns over; the same flood from the client's own user is measured and
printed (the random rule's survival). Cutting the oldest,
as the gate did before, cut that client on every try (docs/hardening.md has both rates)."""
import os
import select
import socket
import subprocess
import threading
import time

import pytest

from conftest import BIN, OTHER_UID, Server, sockets_owned_by

# Not under ThreadSanitizer (marked concurrency): a server that slow cannot take 200 new
# connections a second, so the flood would wait in the backlog instead of at the gate; the gate's
# locking runs under it in test_preauth.py's 300 drips.
MAX_CONNS = 4          # 8 handlers, 8 places before authentication
FLOOD_PER_S = 200      # new connections a second
STEP_DELAY_S = 0.25    # before the client's TLS handshake and before its HELLO
TRIES = 8


class Flood:
    """New connections to `port` from `source` (an address, or a list the flood rotates over),
    `per_s` a second, each silent and held until the server closes it (then closed here); stops
    at stop() or after `seconds`, whichever first."""

    def __init__(self, port, source, per_s, seconds=60, uid=OTHER_UID):
        self.uid = uid
        self.sources = [source] if isinstance(source, str) else list(source)
        self.port, self.every_s = port, 1 / per_s
        self.end = time.monotonic() + seconds
        self.opened = self.cut = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _open(self):
        s = socket.socket()
        s.bind((self.sources[self.opened % len(self.sources)], 0))
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", self.port))
        self.opened += 1
        return s

    def _run(self):
        with sockets_owned_by(self.uid):
            self._flood()

    def _flood(self):
        held, due = [], time.monotonic()
        while not self.stopping.is_set() and time.monotonic() < self.end and len(held) < 500:
            if time.monotonic() >= due:
                held.append(self._open())
                due += self.every_s
            # The server sends nothing before a HELLO: readable means it closed the connection.
            readable, _, _ = select.select(held, [], [], max(0.0, due - time.monotonic()))
            for s in readable:
                held.remove(s)
                s.close()
                self.cut += 1
        for s in held:
            s.close()

    def stop(self):
        self.stopping.set()
        self.thread.join(timeout=10)


def slow_client(addr, cache_dir, tls_args=()):
    """One run of a client whose pre-auth steps each wait STEP_DELAY_S: True when served."""
    p = subprocess.run([BIN, "client", "--connect", addr, "--bytes", "1M", "-q", "--cache-dir",
                        cache_dir, "--hello-timeout", "20", *tls_args],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                       env=dict(os.environ, IOBENCH_TEST_SLOW_HANDSHAKE=str(STEP_DELAY_S)))
    return p.returncode == 0, p.stderr.strip()[-200:]


def served_under_flood(cache_dir, certs, flood_source, tls, server_args=(), tries=TRIES,
                       uid=OTHER_UID):
    """(tries served, flood connections opened, flood connections the server cut): the flood's
    sockets are `uid`'s (the client's are root's)."""
    tls_server = ["--tls-cert", certs / "server.crt", "--tls-key", certs / "server.key"]
    s = Server("--max-conns", str(MAX_CONNS), "--handshake-timeout", "20", "--quiet",
               *(tls_server if tls else []), *server_args, cache=cache_dir)
    flood = Flood(s.port, flood_source, FLOOD_PER_S, uid=uid)
    try:
        time.sleep(0.5)  # every place taken before the first try
        tls_args = ["--proto", "tls", "--tls-ca", str(certs / "ca.crt")] if tls else []
        results = [slow_client(s.addr, cache_dir, tls_args) for _ in range(tries)]
        assert s.alive()
        return sum(ok for ok, _ in results), flood.opened, flood.cut, results
    finally:
        flood.stop()
        s.stop()


@pytest.mark.parametrize("tls", [False, True], ids=["tcp", "tls"])
def test_a_slow_client_is_served_beside_a_flood_from_another_user(cache_dir, certs, tls):
    """The flood (another local user, from 127.0.1.2) opens ~100 connections during each try's
    0.5 s pre-auth against 8 places: each newcomer cuts one of the flood's own, never the
    client's (root's, from 127.0.0.1)."""
    served, opened, cut, results = served_under_flood(cache_dir, certs, "127.0.1.2", tls)
    print(f"{'tls' if tls else 'tcp'}: flood from another user at {FLOOD_PER_S}/s "
          f"({opened} opened, {cut} cut by the server), a client with {STEP_DELAY_S} s before "
          f"each pre-auth step: served {served} of {TRIES}")
    assert cut > opened / 2, (opened, cut)  # the flood was at the cap, not under it
    assert served == TRIES, results


def test_a_flood_from_the_clients_own_user_is_measured(cache_dir, certs):
    """The same flood from the client's own user (root, on the client's address): the rule can
    tell them apart only by luck (about e^(-n/9) for n arrivals during its pre-auth), so the rate
    is printed, not asserted; the flood is held at the cap and the server stays up."""
    served, opened, cut, _ = served_under_flood(cache_dir, certs, "127.0.0.1", False, uid=0)
    print(f"tcp: flood from the client's own user at {FLOOD_PER_S}/s ({opened} opened, "
          f"{cut} cut): a client with {STEP_DELAY_S} s before each step served {served} of "
          f"{TRIES}")
    assert cut > opened / 2, (opened, cut)


def test_a_local_flood_rotating_over_3000_blocks_is_one_source(cache_dir, certs):
    """Another local user's flood rotates over 3,000 loopback /24 blocks (127.B.C.1) and, with
    --source-block-v4 32, over as many addresses. Before #88 each block (or address) was a
    source of its own, tied with the client's, and the client was cut at random among them
    (3,000 /24s left a valid TLS client at 64% under the package). A local peer is one source
    per UID now, whatever address it binds: the client is served every time."""
    blocks = [f"127.{1 + i // 250}.{i % 250}.1" for i in range(3000)]
    for args in ((), ("--source-block-v4", "32")):
        served, opened, cut, results = served_under_flood(cache_dir, certs, blocks, False, args)
        print(f"tcp{' '.join(('',) + args)}: another user's flood rotating over 3,000 /24s at "
              f"{FLOOD_PER_S}/s, a client with {STEP_DELAY_S} s before each pre-auth step: "
              f"served {served} of {TRIES} ({opened} opened, {cut} cut)")
        assert cut > opened / 2, (opened, cut)
        assert served == TRIES, results
