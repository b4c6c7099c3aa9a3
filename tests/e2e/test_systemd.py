"""`iobench server` under systemd socket activation (iobench.socket): the listening sockets it is
handed (LISTEN_PID/LISTEN_FDS, as sd_listen_fds(3) reads them) stand for --listen and then
--tls-listen. systemd-socket-activate (systemd's own tool) passes them here without systemd as
PID 1: it listens, and on the first connection execs the server with the sockets."""
import shutil
import socket
import subprocess

import pytest

from conftest import BIN, run

ACTIVATE = shutil.which("systemd-socket-activate")
pytestmark = pytest.mark.skipif(not ACTIVATE, reason="systemd-socket-activate not installed "
                                                     "(Debian's systemd package has it)")


def free_ports(n, family=socket.AF_INET, host="127.0.0.1"):
    socks = [socket.socket(family) for _ in range(n)]
    for s in socks:
        s.bind((host, 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Activated:
    """systemd-socket-activate listening on `n` ports of `host` (loopback unless a test asks
    for another) for `iobench server ARGS`."""

    def __init__(self, n, *args, host="127.0.0.1"):
        family = socket.AF_INET6 if host.startswith("[") else socket.AF_INET
        self.ports = free_ports(n, family, host.strip("[]"))
        listen = [a for p in self.ports for a in ("-l", f"{host}:{p}")]
        self.proc = subprocess.Popen([ACTIVATE, *listen, BIN, "server", *map(str, args)],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(n):  # "Listening on 127.0.0.1:P as 3." once per socket
            assert "Listening on" in self.proc.stdout.readline()

    def output(self):
        self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        return out


def test_the_two_sockets_systemd_passes_serve_tcp_and_then_tls(certs, cache_dir):
    s = Activated(2, "--tls-cert", certs / "server.crt", "--tls-key", certs / "server.key")
    try:
        tcp, tls = (f"127.0.0.1:{p}" for p in s.ports)
        run("client", "--connect", tcp, "--bytes", "1M", "-q", "--syscalls", "off",
            cache=cache_dir, check=0)
        run("client", "--connect", tls, "--proto", "tls", "--tls-ca", certs / "ca.crt",
            "--bytes", "1M", "-q", "--syscalls", "off", cache=cache_dir, check=0)
        # The TCP socket refuses TLS and names the TLS one, as with --tls-listen.
        p = run("client", "--connect", tcp, "--proto", "tls", "--tls-ca", certs / "ca.crt",
                "--bytes", "1M", cache=cache_dir)
        assert p.returncode == 1 and "--tls-listen" in p.stderr, p.stderr
    finally:
        out = s.output()
    assert f"listening on {tcp} (tcp) and {tls} (tls" in out, out
    assert " over tcp " in out and " over TLSv1.3 " in out, out


def test_one_socket_stands_for_listen_and_tls_listen_is_still_bound(certs, cache_dir):
    (tls_port,) = free_ports(1)
    s = Activated(1, "--listen", "127.0.0.1:1", "--tls-listen", f"127.0.0.1:{tls_port}",
                  "--tls-cert", certs / "server.crt", "--tls-key", certs / "server.key")
    try:
        run("client", "--connect", f"127.0.0.1:{s.ports[0]}", "--bytes", "1M", "-q",
            "--syscalls", "off", cache=cache_dir, check=0)
        run("client", "--connect", f"127.0.0.1:{tls_port}", "--proto", "tls", "--tls-ca",
            certs / "ca.crt", "--bytes", "1M", "-q", "--syscalls", "off", cache=cache_dir,
            check=0)
    finally:
        out = s.output()
    # --listen's port 1 was never bound: systemd's socket stood for it.
    assert f"listening on 127.0.0.1:{s.ports[0]} (tcp) and 127.0.0.1:{tls_port}" in out, out


def ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


# Whether a plain-TCP socket systemd hands over is on loopback is judged from its address, so
# IPv6 loopback ("[::1]:P") is not warned about and a wildcard socket is.
@pytest.mark.parametrize("host,connect,warned", [
    pytest.param("[::1]", "[::1]", False, marks=pytest.mark.skipif(
        not ipv6_loopback(), reason="no IPv6 loopback here")),
    ("0.0.0.0", "127.0.0.1", True),
])
def test_a_passed_socket_without_tls_is_warned_about_unless_on_loopback(host, connect, warned,
                                                                         cache_dir):
    s = Activated(1, host=host)
    try:
        run("client", "--connect", f"{connect}:{s.ports[0]}", "--bytes", "1M", "-q",
            "--syscalls", "off", cache=cache_dir, check=0)
    finally:
        out = s.output()
    assert ("without TLS" in out) == warned, out


@pytest.mark.parametrize("n,args,error", [
    (3, [], "invalid LISTEN_FDS '3' from systemd: expected 1..2 listening sockets"),
    (2, [], "a second socket (127.0.0.1:{1}), the TLS port: it needs --tls-cert and --tls-key"),
])
def test_sockets_the_server_cannot_use_are_one_line_and_exit_2(n, args, error, cache_dir):
    s = Activated(n, *args)
    p = run("client", "--connect", f"127.0.0.1:{s.ports[0]}", "--bytes", "1M", cache=cache_dir)
    assert p.returncode == 1
    s.proc.wait(timeout=10)
    out = s.proc.stdout.read()
    assert s.proc.returncode == 2, out
    assert f"iobench: error: {error.format(*s.ports)}" in out.replace("systemd passed ", ""), out


def test_a_parents_sockets_are_not_taken():
    # LISTEN_PID names another process (the one systemd started, not this child): ignored, and
    # the server binds --listen as usual.
    srv = subprocess.Popen([BIN, "server", "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True,
                           env={"LISTEN_PID": "1", "LISTEN_FDS": "2"})
    try:
        line = srv.stdout.readline()
        assert "listening on 127.0.0.1:" in line and "(tcp)" in line, line
    finally:
        srv.terminate()
        srv.wait(timeout=10)
