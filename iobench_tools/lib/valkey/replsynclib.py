"""What the real-replication scripts share (scripts/replication-sync, scripts/replication-knee):
where a server runs (loopback or an emulated link), one Valkey/Redis server process over TCP or
TLS, loading iobench's replication stream into a primary, and reading an `iobench watch` report
of a sync: who wrote the replication sockets, how, and at what CPU."""
import fcntl
import os
import re
import signal
import subprocess
import sys
import time

from iobench_tools.lib.kernel import axes
from iobench_tools.lib.kernel import iobenchjson
from iobench_tools.lib.kernel import iobenchlib
from iobench_tools.lib.kernel import runs as iobench_runs
from iobench_tools.lib.kernel.iobenchlib import free_port

PROG = "replication"  # the script's name in its error lines (set by the script)
IOBENCH = "iobench"   # the iobench binary (set by the script)


class Place:
    """Where a server runs: loopback, or one end of the emulated link (a command prefix that
    enters its network namespace, and its address; `bind`: every address it listens on)."""

    def __init__(self, prefix=(), ip="127.0.0.1", bind=None):
        self.prefix, self.ip, self.bind = list(prefix), ip, list(bind or [ip])


def _sh(*cmd):
    subprocess.run(list(map(str, cmd)), check=True, capture_output=True)


def _link(ns_a, dev_a, ip_a, ns_b, dev_b, ip_b, rate, mtu):
    """A veth pair between two namespaces, MTU and a tbf rate cap on both ends (the per-flow
    cap of scripts/netns-link: its bucket must hold at least rate/HZ bytes)."""
    _sh("ip", "link", "add", dev_a, "type", "veth", "peer", "name", dev_b)
    for ns, dev, ip in ((ns_a, dev_a, ip_a), (ns_b, dev_b, ip_b)):
        _sh("ip", "link", "set", dev, "netns", ns)
        _sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", dev)
        _sh("ip", "-n", ns, "link", "set", dev, "up", "mtu", mtu)
        _sh("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate,
            "burst", "4mb", "latency", "20ms")


RATE = re.compile(r"^\d+(\.\d+)?(bit|kbit|mbit|gbit)$", re.IGNORECASE)  # tc's bits per second
RATE_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}


def bits_per_second(rate):
    m = RATE.match(rate)
    return float(rate[:-len(m[2])]) * RATE_UNITS[m[2].lower()]


def _enter(ns):
    # nsenter, not `ip netns exec`: the latter remounts /sys, hiding tracefs.
    return ["nsenter", f"--net=/run/netns/{ns}"]


LOCKS = "/run/lock"


def claim(name):
    """Holds the namespaces NAME* for this process (the lock scripts/netns-link's veth.sh takes
    for its names): a second run of a study that uses them would delete the first's namespaces
    under it, so it stops in one line instead. Returns the lock's file, held until closed."""
    os.makedirs(LOCKS, exist_ok=True)
    path = os.path.join(LOCKS, f"iobench-netns-{name}.lock")
    f = open(path, "a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        sys.exit(f"{PROG}: error: the namespaces '{name}*' are in use by another run (lock "
                 f"{path}): wait for it to end")
    return f


class Fleet:
    """The emulated fleet of scripts/netns-fleet: a primary namespace and `n` replica
    namespaces, each replica joined to the primary by its own veth (10.232.i.1 - 10.232.i.2),
    MTU and tbf rate on both ends. Root only; held against a second run of its name (claim);
    close() removes every namespace and lets the name go."""

    def __init__(self, n, rate, mtu, name="iobkf"):
        """`rate`: one tbf rate for every link, or a list: replica i's link at the i-th, the
        last repeated (["100mbit", "5gbit"]: one slow replica among fast ones)."""
        self.n, self.name = n, name
        self.rates = self.link_rates(n, rate)
        self.lock = claim(name)
        self.close(release=False)
        _sh("ip", "netns", "add", f"{name}p")
        _sh("ip", "-n", f"{name}p", "link", "set", "lo", "up")
        for i in range(1, n + 1):
            _sh("ip", "netns", "add", f"{name}r{i}")
            _sh("ip", "-n", f"{name}r{i}", "link", "set", "lo", "up")
            _link(f"{name}p", f"{name}p{i}", self.primary_ip(i), f"{name}r{i}", f"{name}r{i}",
                  f"10.232.{i}.2", self.rates[i - 1], mtu)

    @staticmethod
    def link_rates(n, rate):
        rates = rate if isinstance(rate, list) else [rate]
        return [rates[min(i, len(rates) - 1)] for i in range(n)]

    @staticmethod
    def primary_ip(i):
        """The primary's address on replica i's link (1-based)."""
        return f"10.232.{i}.1"

    def primary(self):
        return Place(_enter(f"{self.name}p"), self.primary_ip(1),
                     [self.primary_ip(i) for i in range(1, self.n + 1)])

    def replica(self, i):
        return Place(_enter(f"{self.name}r{i}"), f"10.232.{i}.2")

    def close(self, release=True):
        subprocess.run(["ip", "netns", "del", f"{self.name}p"], capture_output=True)
        for i in range(1, self.n + 1):
            subprocess.run(["ip", "netns", "del", f"{self.name}r{i}"], capture_output=True)
        if release:
            self.lock.close()


class NetLink:
    """The emulated EC2 link of scripts/netns-link: the primary's and the replica's network
    namespaces joined by a veth pair with an MTU and a tbf rate cap on both ends. Root only; held
    against a second run of its name (claim) until close()."""

    def __init__(self, rate, mtu, name="iobrs"):
        self.ns = {"primary": f"{name}p", "replica": f"{name}r"}
        self.ip = {"primary": "10.232.0.1", "replica": "10.232.0.2"}
        self.lock = claim(name)
        self.close(release=False)
        for ns in self.ns.values():
            _sh("ip", "netns", "add", ns)
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
        _link(self.ns["primary"], f"{name}a", self.ip["primary"], self.ns["replica"], f"{name}b",
              self.ip["replica"], rate, mtu)

    def place(self, role):
        return Place(_enter(self.ns[role]), self.ip[role])

    def close(self, release=True):
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        if release:
            self.lock.close()


class Node:
    """One server process at `place`, over TCP or TLS (certificates from tls/make-certs)."""

    def __init__(self, binary, workdir, proto, certs, place, extra=(), env=None, cpus=None,
                 rdb=None):
        """`env`: variables added to the server's environment (the patched Valkey's chunk);
        `cpus`: a CPU list it is pinned to (taskset); `rdb`: an RDB file it loads at start."""
        os.makedirs(workdir)
        self.dir, self.proto, self.certs, self.port = workdir, proto, certs, free_port()
        self.place, self.ip = place, place.ip
        self.log = os.path.join(workdir, "log")
        if rdb:
            os.link(rdb, os.path.join(workdir, "dump.rdb"))
        pin = ["taskset", "-c", cpus] if cpus else []
        args = [*place.prefix, *pin, binary, "--bind", *place.bind, "--save", "", "--appendonly",
                "no", "--dir", workdir, "--logfile", self.log, "--repl-diskless-sync-delay", "0"]
        if place.ip != "127.0.0.1":
            # A private namespace's address: without this, Redis answers only loopback clients.
            args += ["--protected-mode", "no"]
        if proto == "tls":
            args += ["--port", "0", "--tls-port", str(self.port), "--tls-replication", "yes",
                     "--tls-auth-clients", "no", "--tls-cert-file", f"{certs}/server.crt",
                     "--tls-key-file", f"{certs}/server.key", "--tls-ca-cert-file", f"{certs}/ca.crt"]
        else:
            args += ["--port", str(self.port)]
        err = open(os.path.join(workdir, "stderr"), "w+")
        self.proc = subprocess.Popen(args + list(extra), stdout=subprocess.DEVNULL, stderr=err,
                                     env=dict(os.environ, **(env or {})))
        deadline = time.monotonic() + 120  # a large RDB loads before PONG
        try:
            while time.monotonic() < deadline and self.proc.poll() is None:
                if self.cli("PING", check=False).strip() == "PONG":
                    return
                time.sleep(0.05)
        except BaseException:  # Ctrl-C while it starts: the caller has no Node to stop yet
            self.stop()
            raise
        died = self.proc.poll() is not None
        self.stop()
        err.seek(0)
        said = err.read().strip().splitlines()
        sys.exit(f"{PROG}: error: {binary} " + (f"exited: {said[-1] if said else '?'}" if died
                 else f"did not answer on port {self.port}") + f" (its log: {self.log})")

    def cli_args(self):
        tls = ["--tls", "--cacert", f"{self.certs}/ca.crt"] if self.proto == "tls" else []
        return [*self.place.prefix, "redis-cli", "-h", self.ip, "-p", str(self.port), *tls]

    def cli(self, *args, check=True):
        p = subprocess.run([*self.cli_args(), *map(str, args)], capture_output=True, text=True,
                           timeout=600)
        if check and (p.returncode != 0 or p.stdout.startswith("ERR")):
            sys.exit(f"{PROG}: error: redis-cli {' '.join(map(str, args))}: "
                     f"{p.stdout.strip()} {p.stderr.strip()}")
        return p.stdout

    def synced(self):
        """A replica whose link to its primary is up, with no sync in progress."""
        info = self.cli("INFO", "replication")
        return "master_link_status:up" in info and "master_sync_in_progress:0" in info

    def stop(self):
        """Kills the server and its fork children: a save child whose replicas' link is gone
        would otherwise outlive it, blocked on a write until repl-timeout."""
        children = _children(self.proc.pid)
        self.proc.kill()
        self.proc.wait()
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _children(pid):
    """The pids of a process's children (every thread's), from /proc."""
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


class Watch:
    """`iobench watch` on some processes, writing its report to `path`, until stop()."""

    def __init__(self, pids, path, event_loop=False):
        self.path = path
        # A large write is 4 KiB or more: the chunks, not the INFO replies (1.5 KiB) the
        # memory probe asks the primary for every 100 ms.
        run = iobench_runs.WatchRun(pid=tuple(pids), json=path, event_loop=event_loop,
                                    large_write=LARGE_WRITE if event_loop else None)
        self.proc = subprocess.Popen(run.argv(IOBENCH),
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        if "watching" not in self.proc.stderr.readline():
            sys.exit(f"{PROG}: error: iobench watch: {self.proc.communicate()[1].strip()}")

    def stop(self):
        """Ends the watch (SIGINT, as a user would) and returns its processes' figures."""
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=60)
        if self.proc.returncode != 0:
            sys.exit(f"{PROG}: error: iobench watch: {err.strip()}")
        return iobenchjson.watch_processes(self.path)

    def event_loop(self):
        """After stop(): the event loop's figures (loop_figures) of a watch with event_loop."""
        return loop_figures(iobenchjson.watch_event_loop(self.path))

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


LARGE_WRITE = "4k"
# iobench watch --event-loop's classes (docs/watch.md), by the names of their figures.
LOOP_CLASSES = (("iterations_with_large_write", "loop_write"), ("iterations", "loop_other"),
                ("large_writes_in_loop", "write_in_loop"),
                ("large_writes_elsewhere", "write_child"))


def loop_figures(event_loop):
    """{loop_write_p99_us: ..., ...}: each class's count and p50/p99/p99.9/max in µs, from
    iobench watch's watch.event_loop (the kernel's histograms)."""
    out = {}
    for cls, name in LOOP_CLASSES:
        q = event_loop[cls]
        out[f"{name}_count"] = q["count"]
        for k in ("p50", "p99", "p999", "max"):
            out[f"{name}_{k}_us"] = q[k]
    return out


def load_dataset(node, target, cache, workdir):
    """Replays iobench payload chunks (seeds 1, 2, ...) until the RDB (SAVE) reaches target."""
    chunk = max(1 << 20, min(target, 16 << 20))
    rdb = os.path.join(node.dir, "dump.rdb")
    for seed in range(1, 257):
        out = os.path.join(workdir, "payload.zst")
        subprocess.run(iobench_runs.PayloadRun(bytes=chunk, seed=seed, out=out, cache_dir=cache,
                                       quiet=True).argv(IOBENCH), check=True, capture_output=True)
        pipe = subprocess.run(f"zstd -dc {out} | {' '.join(node.cli_args())} --pipe", shell=True,
                              capture_output=True, text=True, timeout=600)
        if pipe.returncode != 0 or "errors: 0" not in pipe.stdout:
            sys.exit(f"{PROG}: error: loading the payload: {pipe.stdout}{pipe.stderr}")
        node.cli("SAVE")
        if os.path.getsize(rdb) >= target:
            return os.path.getsize(rdb), seed * chunk
    sys.exit(f"{PROG}: error: the RDB did not reach {target} bytes")


def set_mode(server, mode, *nodes):
    for n in nodes:
        n.cli("CONFIG", "SET", "repl-diskless-sync", "no" if mode == "disk" else "yes")
        if server == "valkey":
            n.cli("CONFIG", "SET", "dual-channel-replication-enabled",
                  "yes" if mode == "dual" else "no")


def socket_io(proc, family, kinds=("tcp", "socket")):
    """A process's reads or writes on TCP sockets (a socket made during the watch and never seen
    in /proc counts as `socket`: on loopback here, TCP too), or on the descriptors of `kinds`."""
    out = {"calls": 0, "bytes": 0, "sizes": {}}
    for io in proc["io"]:
        if io["fd_kind"] in kinds and io["family"] == family:
            out["calls"] += io["calls"]
            out["bytes"] += io["bytes"]
            for s in io["sizes"]:
                out["sizes"][s["result"]] = out["sizes"].get(s["result"], 0) + s["calls"]
    return out


def log2_histogram(sizes):
    """{"1..1": n, "2..3": n, ..., "16384..32767": n}: the writes by power-of-two bucket."""
    buckets = {}
    for size_, n in sizes.items():
        if size_ > 0:
            low = 1 << (size_.bit_length() - 1)
            buckets[low] = buckets.get(low, 0) + n
    return {f"{low}..{2 * low - 1}": buckets[low] for low in sorted(buckets)}


def _log_time(parts):
    """A Valkey log line's time ("PID:R 29 Nov 2026 04:12:09.123 ..." split), in seconds."""
    return time.mktime(time.strptime(" ".join(parts[1:4]), "%d %b %Y")) + sum(
        float(x) * m for x, m in zip(parts[4].split(":"), (3600, 60, 1)))


def sync_window(text, replicas):
    """(begin, end) in unix seconds: the primary's first "Starting BGSAVE for SYNC" (the fork)
    and its `replicas`-th replica online ("Synchronization with replica ... succeeded": a dual
    channel replica's main channel too, at its first ACK once it has loaded the RDB; its early
    "Partial resynchronization request ... accepted" is not the end), from its log's millisecond
    timestamps; None when the log has not both. `text`: the log, as read."""
    begin, done = None, 0
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 6:
            continue
        if "Starting BGSAVE for SYNC" in line and begin is None:
            begin = _log_time(parts)
        elif begin is not None and "Synchronization with replica" in line \
                and "succeeded" in line:
            done += 1
            if done == replicas:
                return begin, _log_time(parts)
    return None


def sync_span(text, replicas):
    """Seconds of the primary's sync_window: the full sync as the primary saw it, without the
    time a replica takes to connect (its cron, about a second, quantises the time from
    REPLICAOF), or None."""
    w = sync_window(text, replicas)
    return w[1] - w[0] if w else None


def log_span(log, start_at):
    """Seconds from the primary's "Starting BGSAVE for SYNC" to the end of the RDB transfer
    ("Streamed RDB transfer ... succeeded", or "Synchronization with replica ... succeeded"
    for a disk-based sync), from its log's millisecond timestamps past offset `start_at`."""
    begin = end = None
    with open(log) as f:
        f.seek(start_at)
        for line in f:
            parts = line.split()
            if len(parts) < 6:
                continue
            t = _log_time(parts)
            if "Starting BGSAVE for SYNC" in line and begin is None:
                begin = t
            elif begin is not None and ("Streamed RDB transfer" in line
                                        or "Synchronization with replica" in line):
                end = t
                break
    return end - begin if begin is not None and end is not None else None


class SocketWriter:
    """The primary's process that wrote the most to TCP sockets during a watched sync (the main
    thread, or the save child), what it wrote (`sent`: socket_io) and its CPU (`cpu_s`)."""

    def __init__(self, procs, primary):
        self.tree = [p for p in procs if p["root"] == primary]
        self.main = next(p for p in procs if p["pid"] == primary)
        self.proc = max(self.tree, key=lambda p: socket_io(p, "write")["bytes"])
        self.sent = socket_io(self.proc, "write")
        self.kind = "main thread" if self.proc["pid"] == primary else "save child"
        self.cpu_s = self.proc["cpu_s"]
        if self.proc["pid"] != primary and not self.proc["cpu_complete"]:
            # The save child ended between two samples: its whole life is in the CPU its parent
            # reaped (the only child a primary forks during a sync).
            # (Ticks: under 10 ms it may read 0; the larger of the two is the better lower bound.)
            self.cpu_s = max(self.cpu_s, self.main["reaped_children_cpu_s"])
        self.gib = self.sent["bytes"] / (1 << 30)

    def per_gib(self, cpu_s):
        return cpu_s / self.gib if self.gib else None

    def top_sizes(self, n):
        return [[s, k] for s, k in sorted(self.sent["sizes"].items(), key=lambda s: -s[1])[:n]]


def figures(procs, primary, replica, took, transfer):
    w = SocketWriter(procs, primary)
    rep = next(p for p in procs if p["pid"] == replica)
    return {"sync_s": took, "transfer_s": transfer, "writer": w.kind,
            "socket_bytes": w.sent["bytes"], "writes": w.sent["calls"],
            "bytes_per_write": w.sent["bytes"] / max(w.sent["calls"], 1),
            "top_write_sizes": w.top_sizes(5),
            "write_histogram": log2_histogram(w.sent["sizes"]),
            "writer_cpu_s": w.cpu_s, "writer_cpu_s_per_gib": w.per_gib(w.cpu_s),
            "primary_cpu_s": sum(p["cpu_s"] for p in w.tree),
            "replica_reads": socket_io(rep, "read")["calls"], "replica_cpu_s": rep["cpu_s"]}


def add_sync_options(ap, cpus_help="primary's CPU,replicas' CPU, or none"):
    """The options of the real-sync commands beside their own: --replicas, --rounds, --rdb,
    --cpus, --where, --rate, --mtu, --sync-timeout, --seed, --cache-dir (read by
    check_sync_args)."""
    ap.add_argument("--replicas", default="1,4", help="replicas synced at once (1..16)")
    axes.add_rounds(ap, 5, "a sync per cell per round")
    ap.add_argument("--rdb", type=iobenchlib.size_arg, default=iobenchlib.size_arg("100M"),
                    help="RDB size to sync (100M)")
    axes.add_cpus(ap, "0,1", "primary, replicas", cpus_help)
    ap.add_argument("--where", default="loopback", choices=["loopback", "fleet"],
                    help="loopback, or the emulated fleet: each replica in its own network "
                    "namespace behind its own capped veth (root)")
    ap.add_argument("--rate", default="5gbit",
                    help="--where fleet: each link's tbf rate, or a list: replica i's link at the "
                         "i-th, the last repeated (100mbit,5gbit: one slow replica) (5gbit)")
    ap.add_argument("--mtu", type=int, default=9001, help="--where fleet: the MTU (9001)")
    ap.add_argument("--sync-timeout", type=int, default=300, help="seconds per sync (300)")
    ap.add_argument("--seed", type=int, default=1,
                    help="the order's seed: the rounds' shuffle, or the balanced order's "
                         "relabelling (1)")
    ap.add_argument("--cache-dir", default=os.path.expanduser("~/.cache/iobench"),
                    help="iobench's payload cache, which the dataset is built from")


def check_sync_args(ap, a, choices):
    """The options of the real-sync commands (replication-knee, upstream-evidence), checked and
    read in place: each comma list of `choices` ({option: allowed values}), --replicas (1..16),
    --rounds (1..100), --where fleet (root), --mtu, and --cpus into a.placement."""
    if not 1 <= a.sync_timeout <= 3600:
        ap.error(f"invalid --sync-timeout {a.sync_timeout}: expected 1..3600 seconds")
    for opt, allowed in choices.items():
        value = getattr(a, opt)
        wrong = [v for v in value.split(",") if v not in allowed]
        if wrong or not value:
            ap.error(f"invalid --{opt} '{value}': expected some of {', '.join(allowed)}")
        setattr(a, opt, value.split(","))
    try:
        a.replicas = [int(x) for x in a.replicas.split(",")]
    except ValueError:
        ap.error(f"invalid --replicas '{a.replicas}': expected numbers 1..16")
    if any(not 1 <= n <= 16 for n in a.replicas):
        ap.error(f"invalid --replicas {a.replicas}: each 1..16")
    if not 1 <= a.rounds <= 100:
        ap.error(f"invalid --rounds {a.rounds}: expected 1..100")
    if a.where == "fleet" and os.geteuid() != 0:
        ap.error("--where fleet needs root (ip netns, tc)")
    a.rates = a.rate.split(",")
    if not all(RATE.match(r) for r in a.rates):
        ap.error(f"invalid --rate '{a.rate}': expected a tbf rate (5gbit, 100mbit) or a list of "
                 "them")
    if not 1280 <= a.mtu <= 65535:
        ap.error(f"invalid --mtu {a.mtu}: expected 1280..65535")
    if a.cpus == "none":
        a.placement = (None, None)
        return
    parts = a.cpus.split(",")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        ap.error(f"invalid --cpus '{a.cpus}': expected PRIMARY,REPLICAS (e.g. 0,1) or none")
    a.placement = tuple(parts)
