"""Two network namespaces joined by a veth pair (MTU 9001, a tbf rate cap): a link the fault
tests can break from outside, as a real network breaks. Root only; `why_unavailable()` says
why a test must be skipped."""
import functools
import itertools
import os
import re
import subprocess
import time

from iobench_tools.lib.kernel import hostlock

_serial = itertools.count()


def sh(*cmd, check=True):
    return subprocess.run(list(map(str, cmd)), capture_output=True, text=True, check=check)


@functools.lru_cache(maxsize=None)
def why_unavailable():
    """None when namespaces, veth and tbf work here; otherwise the reason."""
    if os.geteuid() != 0:
        return "needs root (ip netns, veth, tc)"
    probe = f"iobprobe{os.getpid() % 100000}"
    try:
        sh("ip", "netns", "add", probe)
        sh("ip", "-n", probe, "link", "add", "p0", "type", "veth", "peer", "name", "p1")
        sh("tc", "-n", probe, "qdisc", "add", "dev", "p0", "root", "tbf", "rate", "100mbit",
           "burst", "1mb", "latency", "50ms")
    except (OSError, subprocess.CalledProcessError) as e:
        return f"network namespaces with veth and tbf are not available here: {e}"
    finally:
        sh("ip", "netns", "del", probe, check=False)
    return None


class Link:
    """Server namespace <-> client namespace. `server_ip` is the server's address; `run_in`
    prefixes a command so it runs in one namespace (nsenter, which keeps tracefs visible)."""

    def __init__(self, rate="100mbit", mtu=9001, segment_offload=True):
        # Never beside a study run by hand: the host's measurement lock, shared, for its life.
        self.hold = hostlock.SharedHold()
        n = next(_serial)
        tag = f"f{os.getpid() % 10000}{n}"
        self.ns = {"server": f"iob{tag}s", "client": f"iob{tag}c"}
        self.dev = {"server": f"iob{tag}a", "client": f"iob{tag}b"}
        net = 10 + (os.getpid() + n) % 240
        self.ip = {"server": f"10.234.{net}.1", "client": f"10.234.{net}.2"}
        self.server_ip = self.ip["server"]
        for ns in self.ns.values():
            sh("ip", "netns", "del", ns, check=False)
            sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", self.dev["server"], "type", "veth", "peer", "name",
           self.dev["client"])
        if not segment_offload:
            # One segment per packet, as on a wire: veth checks a packet against the MTU of
            # the end it arrives at only when it is not a GSO bundle. Taken at connect().
            for dev in self.dev.values():
                sh("ip", "link", "set", dev, "gso_max_segs", 1)
        for side in ("server", "client"):
            ns, dev = self.ns[side], self.dev[side]
            sh("ip", "link", "set", dev, "netns", ns)
            sh("ip", "-n", ns, "addr", "add", f"{self.ip[side]}/24", "dev", dev)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "link", "set", dev, "up", "mtu", mtu)
            sh("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate, "burst",
               "1mb", "latency", "50ms")

    def run_in(self, side):
        return ["nsenter", f"--net=/run/netns/{self.ns[side]}"]

    # --- faults: each is what a real network does, seen from the endpoints -----------------

    def go_silent(self):
        """The server's end goes down: carrier drops on both ends, nothing passes either way,
        and nobody sends a reset or a FIN (a blip, a security-group change, a dead NIC)."""
        sh("ip", "-n", self.ns["server"], "link", "set", self.dev["server"], "down")

    def come_back(self):
        """The link is up again: carrier on both ends, and neither end's neighbour entry left
        failed from the silence (a connect at once met "No route to host" until the kernel probed
        again: seen once in CI, test_link_faults' serves_next)."""
        sh("ip", "-n", self.ns["server"], "link", "set", self.dev["server"], "up")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(
                "state UP" in subprocess.run(["ip", "-n", self.ns[side], "-o", "link", "show",
                                              self.dev[side]], capture_output=True,
                                             text=True).stdout for side in ("server", "client")):
            time.sleep(0.05)
        for side in ("server", "client"):
            sh("ip", "-n", self.ns[side], "neigh", "flush", "dev", self.dev[side])

    def lower_mtu(self, side, mtu=1500):
        """A PMTU black hole: `side` drops every frame above `mtu` arriving from the other end,
        which still sends at 9001, and no ICMP says so (needs segment_offload=False)."""
        sh("ip", "-n", self.ns[side], "link", "set", self.dev[side], "mtu", mtu)

    def restore_mtu(self, side, mtu=9001):
        sh("ip", "-n", self.ns[side], "link", "set", self.dev[side], "mtu", mtu)

    def remove_server_host(self):
        """The server's host vanishes: its end of the link is deleted (so is the pair). To the
        client, nothing answers and nothing says so."""
        sh("ip", "-n", self.ns["server"], "link", "del", self.dev["server"])

    def reset(self, port):
        """The server's kernel aborts its connections on `port` (ss -K): the client gets a RST."""
        sh(*self.run_in("server"), "ss", "-K", "state", "established", "sport", "=", f":{port}")

    def bytes_moved(self, side):
        """Bytes acknowledged or received so far on `side`'s established TCP connections."""
        out = sh(*self.run_in(side), "ss", "-Htin", "state", "established", check=False).stdout
        return sum(int(n) for n in re.findall(r"bytes_(?:acked|received):(\d+)", out))

    def wait_for_data(self, side, at_least, timeout=30):
        deadline = time.monotonic() + timeout
        while self.bytes_moved(side) < at_least:
            assert time.monotonic() < deadline, f"no {at_least} bytes on the link in {timeout}s"
            time.sleep(0.05)

    def close(self):
        for ns in self.ns.values():
            sh("ip", "netns", "del", ns, check=False)
        self.hold.release()
