"""Emulated hosts for the tests of two-host and fleet sweeps: network namespaces, each with its
own sshd on port 2222 (a temporary host key, one authorized key for root), joined to this
namespace by veth pairs on one bridge, so every host reaches every other and this one reaches
them all. They share this machine's filesystem, but for root's ~/.bashrc, empty in each sshd's
mount namespace as on a fresh host. Root only."""
import contextlib
import itertools
import os
import shutil
import subprocess
import time

from iobench_tools.lib.kernel import hostlock

SSHD = "/usr/sbin/sshd"


def why_not():
    """Why emulated hosts cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root (a network namespace and sshd)"
    for tool in (SSHD, shutil.which("ssh"), shutil.which("ssh-keygen")):
        if not tool or not os.access(tool, os.X_OK):
            return "openssh-server/openssh-client not installed (scripts/setup --studies installs them)"
    if subprocess.run(["ip", "netns", "list"], capture_output=True).returncode != 0:
        return "ip netns is not available here"
    return None


def _ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True)


def _keys(d):
    d.mkdir(parents=True)
    for name in ("host_key", "id"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)],
                       check=True)
    (d / "authorized_keys").write_text((d / "id.pub").read_text())


def _sshd_config(keys, address, name):
    path = keys / f"sshd_config.{name}"
    path.write_text(f"""Port 2222
ListenAddress {address}
HostKey {keys / 'host_key'}
AuthorizedKeysFile {keys / 'authorized_keys'}
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile {keys / f'sshd.{name}.pid'}
Subsystem sftp internal-sftp
""")
    return path


def _fresh_root(keys):
    """The command prefix that runs sshd where root's ~/.bashrc is an empty file, as on a fresh
    host: bash reads it for every command sshd runs, and this machine's is the controller's, no
    host's (pyenv's set-up here: 0.14 CPU-s a command, its shims first on the host's PATH; the
    fleet test took 104 CPU-s with it, 57 without). A mount namespace of sshd's own; every
    other file stays this machine's."""
    rc = os.path.join(os.path.expanduser("~root"), ".bashrc")
    if not os.path.isfile(rc) or not shutil.which("unshare"):
        return []
    empty = keys / "bashrc"
    empty.write_text("# an emulated host's root: none of the controller's shell set-up\n")
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount --bind "$0" "$1" && shift && exec "$@"', str(empty), rc]


# Each emulated_hosts() of this process names its links afresh: a namespace deleted by the one
# before may still be torn down by the kernel (asynchronously), its veth pair with it.
_calls = itertools.count()
_tag = None  # the current emulated_hosts()'s


def silence(index):
    """Host `index`'s link goes silent: its end on the bridge goes down, nothing passes either
    way and nobody sends a reset or a FIN (a dead link, as when an instance vanishes)."""
    _ip("link", "set", f"iobv{_tag}{index}a", "down")


def _free_net(start):
    """A 10.237.N.0/24 no address of this host is in: the fleet and remote-server tests run in
    different pytest lanes (scripts/test), each with its own bridge in the root namespace."""
    used = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True).stdout
    for k in range(240):
        net = 10 + (start + k) % 240
        if f" 10.237.{net}." not in used:
            return net
    raise RuntimeError("every 10.237.N.0/24 (N 10..249) is in use on this host")


@contextlib.contextmanager
def emulated_hosts(tmp_path, count):
    """Yields ([address, ...], ssh config path): `count` hosts, ssh root@ADDRESS with -F CONFIG."""
    global _tag
    tag = _tag = f"{os.getpid() % 10000}{next(_calls) % 10}"
    net = _free_net(os.getpid())
    bridge = f"iobbr{tag}"
    keys = tmp_path / "sshd"
    _keys(keys)
    addresses = [f"10.237.{net}.{i + 1}" for i in range(count)]
    config = keys / "ssh_config"
    config.write_text(f"""Host 10.237.{net}.*
  Port 2222
  IdentityFile {keys / 'id'}
  IdentitiesOnly yes
  BatchMode yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
""")
    namespaces = [f"iobh{tag}n{i}" for i in range(count)]
    fresh_root = _fresh_root(keys)  # one empty ~/.bashrc for every host's sshd
    sshds = []
    hold = hostlock.SharedHold()  # never beside a study run by hand
    try:
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)
        _ip("link", "add", bridge, "type", "bridge")
        _ip("addr", "add", f"10.237.{net}.254/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege-separation directory
        for i, (ns, address) in enumerate(zip(namespaces, addresses)):
            here, there = f"iobv{tag}{i}a", f"iobv{tag}{i}b"
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
            _ip("netns", "add", ns)
            subprocess.run(["ip", "link", "del", here], capture_output=True)  # a leftover
            _ip("link", "add", here, "type", "veth", "peer", "name", there)
            _ip("link", "set", here, "master", bridge)
            _ip("link", "set", here, "up")
            _ip("link", "set", there, "netns", ns)
            _ip("-n", ns, "addr", "add", f"{address}/24", "dev", there)
            _ip("-n", ns, "link", "set", there, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            sshds.append(subprocess.Popen(
                ["nsenter", f"--net=/run/netns/{ns}", *fresh_root, SSHD, "-D", "-e",
                 "-f", str(_sshd_config(keys, address, str(i)))],
                stderr=subprocess.PIPE, text=True))
        for sshd, address in zip(sshds, addresses):
            deadline = time.monotonic() + 20
            while subprocess.run(["ssh", "-F", str(config), f"root@{address}", "true"],
                                 capture_output=True).returncode != 0:
                assert sshd.poll() is None, f"sshd did not start: {sshd.stderr.read()}"
                assert time.monotonic() < deadline, f"sshd on {address} did not answer in 20 s"
                time.sleep(0.2)
        yield addresses, str(config)
    finally:
        for sshd in sshds:
            sshd.terminate()
            sshd.wait(timeout=10)
        for ns in namespaces:
            # Whatever a test left running there (a server) would keep the namespace alive.
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
            for pid in pids.stdout.split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), 9)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)
        hold.release()
