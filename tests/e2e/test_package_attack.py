"""The package's server under the memory attacks of issue #75 (docs/hardening.md): the arguments
packaging/default/iobench gives it (--memory-budget 1280M --max-conns 32, TCP and TLS, a token
file) inside a memory cgroup at iobench.service's MemoryMax= (systemd's own limit; here the
cgroup directly, as this host has no systemd). 32 sessions sending the 4,102-byte frame that
declares a 128 MiB window, then 32 --reverse sessions of one 40 MiB source window: no OOM kill,
the cgroup's peak far under MemoryMax=, a valid TLS client served after. On the code before #75
the first attack took the process past 3.28 GB and systemd's OOM kill ended the service; under
this test's cgroup it was killed within a second."""
import os
import shlex
import socket
import subprocess
import threading
import uuid
from pathlib import Path

import pytest

from conftest import ROOT, Server, hello_frame, run
from test_auth_proof import (ACK, CHALLENGE, ERROR, PROGRESS, TOKEN, auth_frame, first_string,
                             recv_frame, v2_proof)
from test_server_budget import RESULT, huge_window_frame
from test_server_memory import rss_mib, sanitized

pytestmark = [pytest.mark.concurrency]

MiB = 1 << 20


def package_args():
    """IOBENCH_SERVER_ARGS and MemoryMax= as the package ships them."""
    p = subprocess.run(["sh", "-c", f". {ROOT}/packaging/default/iobench && printf %s "
                                    "\"$IOBENCH_SERVER_ARGS\""], capture_output=True, text=True,
                       check=True)
    unit = (ROOT / "packaging" / "systemd" / "iobench.service").read_text().splitlines()
    memory_max = next(l.split("=", 1)[1] for l in unit if l.startswith("MemoryMax="))
    return shlex.split(p.stdout), memory_max


def as_bytes(size):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)


def here(args, certs):
    """The package's arguments on this host: loopback ports of the kernel's choosing and the
    test's certificate for the package's."""
    swap = {"0.0.0.0:5211": "127.0.0.1:0",
            "/etc/iobench/tls/server.crt": str(certs / "server.crt"),
            "/etc/iobench/tls/server.key": str(certs / "server.key")}
    at = args.index("--listen")  # the Server helper gives its own (127.0.0.1:0)
    assert args[at + 1] == "0.0.0.0:5210", args
    return [swap.get(a, a) for a in args[:at] + args[at + 2:]]


class MemoryCgroup:
    """A fresh memory cgroup (v2 where the controller is offered, else v1) limited to `limit`
    bytes: what systemd's MemoryMax= sets for the unit."""

    def __init__(self, limit):
        v2 = Path("/sys/fs/cgroup")
        controllers = v2 / "cgroup.controllers"
        self.v2 = controllers.is_file() and "memory" in controllers.read_text().split()
        base = v2 if self.v2 else v2 / "memory"
        if not self.v2 and not (base / "tasks").is_file():
            pytest.skip("no memory cgroup controller here")
        self.dir = base / f"iobench-package-{uuid.uuid4().hex[:8]}"
        self.dir.mkdir()
        (self.dir / ("memory.max" if self.v2 else "memory.limit_in_bytes")).write_text(str(limit))

    def add(self, pid):
        (self.dir / "cgroup.procs").write_text(str(pid))

    def peak(self):
        name = "memory.peak" if self.v2 else "memory.max_usage_in_bytes"
        f = self.dir / name
        return int(f.read_text()) if f.is_file() else None

    def oom_kills(self):
        f = self.dir / ("memory.events" if self.v2 else "memory.oom_control")
        for line in f.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def remove(self):
        for _ in range(50):
            try:
                self.dir.rmdir()
                return
            except OSError:
                threading.Event().wait(0.1)


def authed(port, **hello):
    """A connection past the token's proof with this HELLO: (socket, the first reply's type and
    text after PROGRESS)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    # No syscall counts: a counting session waits up to 1 s for the others to end first.
    hello["fields"] = {"kernel_syscalls": False, **hello.get("fields", {})}
    frame = hello_frame(token=TOKEN, **hello)
    s.sendall(frame)
    kind, body = recv_frame(s)
    assert kind == CHALLENGE, kind
    mine = os.urandom(32).hex()
    s.sendall(auth_frame(mine, v2_proof(first_string(body), mine, frame)))
    kind, body = recv_frame(s)
    while kind == PROGRESS:
        kind, body = recv_frame(s)
    return s, kind, first_string(body) if kind == ERROR else ""


def huge_window_session(port, outcome):
    frame = huge_window_frame()
    try:
        s, kind, text = authed(port, nbytes=len(frame), fields={"decompress": True})
        with s:
            if kind == ACK:
                s.sendall(frame)
                kind, _ = recv_frame(s)
            outcome.append((kind, text))
    except OSError as e:
        outcome.append(("closed", str(e)))


@pytest.fixture
def package_server(certs, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("a memory cgroup needs root")
    if sanitized():
        pytest.skip("a sanitizer's shadow memory is not the package's: MemoryMax= is for the "
                    "release binary")
    args, memory_max = package_args()
    token = tmp_path / "auth-token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    group = MemoryCgroup(as_bytes(memory_max))
    s = Server(*here(args, certs), cache=str(cache), env={"IOBENCH_AUTH_TOKEN": f"@{token}"})
    try:
        group.add(s.proc.pid)
        yield s, group, as_bytes(memory_max), token
    finally:
        s.stop()
        group.remove()


def test_the_package_survives_both_memory_attacks_inside_its_memory_max(package_server, certs):
    s, group, memory_max, token = package_server
    assert "--memory-budget 1280M" in " ".join(package_args()[0])
    base = rss_mib(s.proc.pid)
    outcome = []
    threads = [threading.Thread(target=huge_window_session, args=(s.port, outcome))
               for _ in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    after_windows = rss_mib(s.proc.pid, "VmHWM")
    assert len(outcome) == 32, outcome
    # Each session is told why; one client's failures write 20 lines of their own in 10 s
    # (ClientLogLimit), the rest counted in a summary (#88).
    assert all(kind == RESULT for kind, _ in outcome), outcome[:3]  # each ended, none hung
    lines = [s.read_line(timeout=30) for _ in range(20)]
    assert all("declares a window larger than the 2 MiB" in l for l in lines), lines[:3]

    readers = []
    try:
        for i in range(32):
            sock, kind, text = authed(s.port, client_sends=False, nbytes=48 * MiB + i * 65536,
                                      fields={"seed": 5, "source_window": 40 * MiB})
            assert kind == ACK, text
            readers.append(sock)
        shmem = rss_mib(s.proc.pid, "RssShmem")
        peak = rss_mib(s.proc.pid, "VmHWM")
        cgroup_peak = group.peak()
        print(f"the package's arguments under MemoryMax={memory_max >> 20}M: 32 sessions of a "
              f"128 MiB-window frame, RSS {base:.0f} -> peak {after_windows:.0f} MiB; 32 readers "
              f"of one 40 MiB source window, RssShmem {shmem:.0f} MiB, RSS peak {peak:.0f} MiB, "
              f"the cgroup's peak {cgroup_peak / MiB if cgroup_peak else float('nan'):.0f} MiB; "
              f"OOM kills {group.oom_kills()}")
        assert shmem < 48, shmem
        assert after_windows - base < 64, (base, after_windows)
        assert peak < 1280, peak
    finally:
        for r in readers:
            r.close()
    assert group.oom_kills() == 0
    assert s.alive()
    p = run("client", "--connect", s.tls_addr, "--proto", "tls", "--tls-ca", certs / "ca.crt",
            "--bytes", "1M", "-q", "--auth-token", f"@{token}", timeout=120)
    assert p.returncode == 0, p.stderr
