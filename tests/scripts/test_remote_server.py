"""The two-host sweep's own server (iobench_tools/lib/fleet/remoteserver.py) on an emulated host
(tests/scripts/emulated_hosts.py): only its sweep can use it. A client without the sweep's token
is refused; the token is on no command line; the TLS key's directory is private, its key removed
once the server has read it, the directory gone after the server stops, also when the ssh
connection is cut (Ctrl-C), and an earlier sweep's whose shell was killed removed at the next
start; and the sweep's stop ends its own server by PID, not another server on that host."""
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from emulated_hosts import emulated_hosts, silence, why_not
from iobench_tools.lib.fleet.remoteserver import RemoteServer

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))

pytestmark = pytest.mark.skipif(why_not() is not None, reason=str(why_not()))


@pytest.fixture
def host(tmp_path):
    with emulated_hosts(tmp_path, 1) as (addresses, config):
        yield f"root@{addresses[0]}", addresses[0], config


def pids_with(text):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmd:
            found.append((int(pid), cmd))
    return found


def servers_on(addr, port):
    """The iobench servers (not the ssh or the shell that started them) listening there."""
    return [p for p in pids_with(f"--listen {addr}:{port}") if p[1].startswith(f"{BIN} server")]


def client(addr, port, env, *extra):
    return subprocess.run([BIN, "client", "--connect", f"{addr}:{port}", "--bytes", "1M", "-q",
                           *extra], capture_output=True, text=True, timeout=60, env=env)


def test_only_the_sweep_uses_its_server_and_it_leaves_nothing_behind(tmp_path, host):
    target, addr, config = host
    certs = tmp_path / "certs"
    subprocess.run([str(ROOT / "tls" / "make-certs"), str(certs), "--ip", addr], check=True,
                   capture_output=True)
    other = subprocess.run(["ssh", "-F", config, target,
                            f"nohup {BIN} server --listen {addr}:5396 --quiet >/dev/null 2>&1 "
                            "& echo $!"], capture_output=True, text=True, timeout=30)
    other_pid = int(other.stdout.strip())
    try:
        # Key directories of earlier sweeps: one whose shell was killed (its pid gone) still
        # holds a key, and is removed by the next start; one whose shell lives is left alone.
        dead = subprocess.Popen(["true"])
        dead.wait()
        stale, live = (Path(tempfile.mkdtemp(prefix="iobench-sweep.")) for _ in range(2))
        for folder, pid in ((stale, dead.pid), (live, os.getpid())):
            (folder / "shell.pid").write_text(f"{pid}\n")
            (folder / "server.key").write_text("PRIVATE KEY\n")
        rs = RemoteServer(target, BIN, 5390, str(certs), "auto", config)
        token = rs.env["IOBENCH_AUTH_TOKEN"]
        key_dir = Path(rs.key_dir)
        assert not stale.exists() and (live / "server.key").exists()
        shutil.rmtree(live)
        assert key_dir.stat().st_mode & 0o777 == 0o700
        # The server has read its key by its banner: the key is no longer on the disk.
        assert not (key_dir / "server.key").exists(), os.listdir(key_dir)
        assert all(token not in cmd for _, cmd in pids_with("iobench"))
        assert [cmd for _, cmd in pids_with(f"--listen {addr}:5390")], "it binds the address"
        bare = {k: v for k, v in os.environ.items() if k != "IOBENCH_AUTH_TOKEN"}
        refused = client(addr, 5390, bare)
        assert refused.returncode != 0 and "token" in refused.stderr.lower(), refused.stderr
        assert client(addr, 5390, rs.env).returncode == 0
        tls = client(addr, 5391, rs.env, "--proto", "tls", "--tls-ca", str(certs / "ca.crt"))
        assert tls.returncode == 0, tls.stderr
        rs.stop()
        assert not key_dir.exists(), "the key's directory outlived the server"
        assert not pids_with(f"--listen {addr}:5390"), "the sweep's server is still running"
        os.kill(other_pid, 0)  # the other server on that host survived the sweep's stop

        cut = RemoteServer(target, BIN, 5392, str(certs), "auto", config)
        cut_dir = Path(cut.key_dir)
        cut.proc.send_signal(signal.SIGINT)  # Ctrl-C reaches ssh: the connection drops
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and (cut_dir.exists() or
                                               pids_with(f"--listen {addr}:5392")):
            time.sleep(0.1)
        assert not cut_dir.exists() and not pids_with(f"--listen {addr}:5392")
        cut.stop()
    finally:
        os.kill(other_pid, signal.SIGTERM)


@pytest.mark.slow
def test_a_silently_cut_link_leaves_no_server_running(tmp_path, host):
    """The link to the server's host goes silent (no reset, no FIN: ssh and sshd notice nothing
    for hours). The server's stdin lease runs out and it stops, its key directory removed, within
    the lease plus a few seconds; the sweep's ssh gives up on its own keepalives; what the server
    logged reached the sweep (its start-up warning)."""
    target, addr, config = host
    certs = tmp_path / "certs"
    subprocess.run([str(ROOT / "tls" / "make-certs"), str(certs), "--ip", addr], check=True,
                   capture_output=True)
    rs = RemoteServer(target, BIN, 5394, str(certs), "auto", config, lease_s=4)
    try:
        key_dir = Path(rs.key_dir)
        assert client(addr, 5394, rs.env).returncode == 0
        time.sleep(3)  # heartbeats keep it up past its lease
        assert servers_on(addr, 5394)
        silence(0)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 15 and (key_dir.exists() or
                                               servers_on(addr, 5394)):
            time.sleep(0.2)
        gone_s = time.monotonic() - t0
        print(f"link cut: server and key directory gone in {gone_s:.1f} s (lease 4 s)")
        assert not servers_on(addr, 5394), "the server outlived its lease"
        assert not key_dir.exists(), "the key directory outlived the server"
        assert gone_s <= 4 + 5, gone_s  # the lease, and the stop (the bound docs/sweeps.md states)
        # ssh's own keepalives (3 x 5 s) end the local side too.
        rs.proc.wait(timeout=30)
    finally:
        rs.stop()
