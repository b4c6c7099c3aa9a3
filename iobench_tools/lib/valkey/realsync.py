"""One real Valkey full sync, watched: a primary (any build of valkey-server, pinned, loading the
same RDB) syncs N empty replicas at once over TCP or TLS, disk-based, diskless or dual-channel,
while `iobench watch` (and, once, `strace` from outside) counts what the socket writer does.
Shared by scripts/replication-knee and scripts/upstream-evidence."""
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from iobench_tools.lib.kernel.iobenchlib import ROOT
from iobench_tools.lib.valkey import replsynclib
from iobench_tools.lib.valkey.replsynclib import (Fleet, Node, Place, SocketWriter, Watch,
                                           bits_per_second, load_dataset, set_mode, socket_io)


class SyncFailed(Exception):
    pass


@contextlib.contextmanager
def sync_place(a, tmp):
    """Where a run's syncs happen: a.fleet, the emulated fleet for a.where == "fleet" (closed at
    the end, also on Ctrl-C) or None on loopback; yields the folder of TLS certificates made for
    every address a replica reaches the primary on."""
    a.fleet = None
    try:
        ips = ["127.0.0.1"]
        if a.where == "fleet":
            a.fleet = Fleet(max(a.replicas), a.rates, a.mtu)
            ips += [Fleet.primary_ip(i) for i in range(1, max(a.replicas) + 1)]
        certs = os.path.join(tmp, "certs")
        subprocess.run([os.path.join(ROOT, "tls", "make-certs"), certs, "--dns", "localhost",
                        *sum((["--ip", ip] for ip in ips), [])], check=True, capture_output=True)
        yield certs
    finally:
        if a.fleet:
            a.fleet.close()


def primary_options(a):
    """The primary's own options: an uncompressed RDB, and with `a.child_cpu` (valkey-evidence
    --child-cpu) its fork children on that CPU (Valkey's bgsave-cpulist: the save child sets
    its own affinity, off the CPU the main thread is pinned to)."""
    cpu = getattr(a, "child_cpu", None)
    return ["--rdbcompression", "no"] + (["--bgsave-cpulist", str(cpu)] if cpu is not None else [])


def real_sync(binary, env, c, a, dataset, certs, work, label, trace=False, during=None):
    """One full sync of the dataset to c["replicas"] replicas at once: the watched figures
    (and strace's, when `trace`). `a`: placement, fleet (or None), sync_timeout, plain (no
    iobench watch on the primary: the sync's time and the probes' figures alone). `during`:
    primary -> probes started just before REPLICAOF (syncload.During), whose stop() figures
    join the sync's."""
    prim_cpu, rep_cpu = a.placement
    fleet = a.fleet
    primary = Node(binary, os.path.join(work, "primary"), c["proto"], certs,
                   fleet.primary() if fleet else Place(),
                   primary_options(a), env=env, cpus=prim_cpu, rdb=dataset)
    replicas, watch, strace, probes = [], None, None, None
    try:
        set_mode("valkey", c["mode"], primary)
        # Every replica in one BGSAVE: diskless waits for all N (or 30 s); a disk-based save
        # takes the replicas that ask while it runs.
        primary.cli("CONFIG", "SET", "repl-diskless-sync-delay", "30")
        primary.cli("CONFIG", "SET", "repl-diskless-sync-max-replicas", c["replicas"])
        for i in range(c["replicas"]):
            r = Node(binary, os.path.join(work, f"replica{i}"), c["proto"], certs,
                     fleet.replica(i + 1) if fleet else Place(), cpus=rep_cpu)
            replicas.append(r)
            set_mode("valkey", c["mode"], r)
        # --event-loop watches the primary alone: the loop's classes pool every watched thread,
        # and the replicas' loops are not the one a primary's clients wait on.
        event_loop = getattr(a, "event_loop", False)
        if not getattr(a, "plain", False):
            watch = Watch([primary.proc.pid] + ([] if event_loop else
                                                [r.proc.pid for r in replicas]),
                          os.path.join(work, "watch.json"), event_loop=event_loop)
        if trace:
            strace = Strace(primary.proc.pid, os.path.join(work, "strace.txt"))
        if during:
            probes = during(primary)
        t0 = time.monotonic()
        for i, r in enumerate(replicas):
            r.cli("REPLICAOF", fleet.primary_ip(i + 1) if fleet else primary.ip, primary.port)
        deadline = t0 + a.sync_timeout
        up = {}  # replica index -> seconds from REPLICAOF to its link up
        while len(up) < len(replicas):
            if time.monotonic() > deadline:
                raise SyncFailed(f"{label}: {len(replicas) - len(up)} replica(s) not linked up "
                                 f"within {a.sync_timeout} s")
            for i, r in enumerate(replicas):
                if i not in up and r.synced():
                    up[i] = time.monotonic() - t0
            time.sleep(0.02)
        took = time.monotonic() - t0
        # Every replica served, and the save child reaped (its CPU is then in the primary's).
        while time.monotonic() < deadline:
            log = open(primary.log).read()
            if (log.count("Synchronization with replica") >= len(replicas)
                    and "terminated with success" in log):
                break
            time.sleep(0.02)
        log = open(primary.log).read()
        fig = (sync_figures(watch.stop(), primary.proc.pid,
                            None if event_loop else [r.proc.pid for r in replicas], took)
               if watch else {"sync_s": took})
        if watch and event_loop:
            fig.update(watch.event_loop())
        fig["bgsaves"] = log.count("Starting BGSAVE for SYNC")
        fig["primary_sync_s"] = replsynclib.sync_span(log, len(replicas))
        if fleet:
            fig.update(sync_by_link_rate(up, fleet.rates))
        if strace:
            fig["strace"] = strace.stop()
        if probes:
            # The open loop's sync figures over the primary's own window (fork to last replica
            # online, its log), not REPLICAOF's: the replicas' connect time is no sync.
            w = replsynclib.sync_window(log, len(replicas))
            fig.update(probes.stop(window=(int(w[0] * 1e9), int(w[1] * 1e9)) if w else None))
            probes = None
        return fig
    finally:
        for tool in (watch, strace, probes):
            if tool:
                tool.kill()
        for node in replicas + [primary]:
            node.stop()
        shutil.rmtree(work, ignore_errors=True)


def sync_figures(procs, primary, replicas, took):
    """The socket writer (the primary's process that wrote the most to TCP sockets: the main
    thread, or the dual-channel save child), its CPU per GiB delivered to all replicas, the
    primary's whole CPU (threads and children), the replicas' CPU (`replicas` None: not
    watched, not given)."""
    w = SocketWriter(procs, primary)
    # The children's CPU: what the watch saw of them, or what the main process reaped of them
    # (a child ending between two samples), whichever is larger: a lower bound either way.
    children = sum(p["cpu_s"] for p in w.tree if p["pid"] != primary)
    primary_cpu = w.main["cpu_s"] + max(children, w.main["reaped_children_cpu_s"])
    return {"sync_s": took, "writer": w.kind,
            "socket_bytes": w.sent["bytes"], "writes": w.sent["calls"],
            "bytes_per_write": w.sent["bytes"] / max(w.sent["calls"], 1),
            "top_write_sizes": w.top_sizes(3),
            # What the writer read to write it: the RDB file (disk-based) or the child's pipe
            # (diskless); above the bytes written when partial writes make it read again.
            "source_read_bytes": socket_io(w.proc, "read", ("file", "pipe"))["bytes"],
            "writer_cpu_s": w.cpu_s, "writer_cpu_s_per_gib": w.per_gib(w.cpu_s),
            # The writer's event loop (each pass one epoll_wait: the main thread; a save child
            # has none), its event changes (epoll_ctl: a handler added or removed) and its reads
            # of the child's pipe (diskless), by the kernel's count (iobench watch, eBPF).
            **writer_loop_calls(w.proc),
            "primary_cpu_s_per_gib": w.per_gib(primary_cpu),
            # `replicas` None: they were not watched (--event-loop).
            **({} if replicas is None else {
                "replica_cpu_s_per_gib": w.per_gib(sum(p["cpu_s"] for p in procs
                                                       if p["pid"] in replicas))})}


def sync_by_link_rate(up, rates):
    """On a fleet whose links differ: when the replicas behind the fastest links had the whole
    RDB (the last of them), and when those behind the slower ones had it; {} when they are one
    rate. `up`: replica index -> seconds to its link up; `rates`: each replica's tbf rate."""
    speeds = [bits_per_second(rates[i]) for i in range(len(up))]
    if len(set(speeds)) < 2:
        return {}
    fast = max(speeds)
    return {"fast_sync_s": max(t for i, t in up.items() if speeds[i] == fast),
            "slow_sync_s": max(t for i, t in up.items() if speeds[i] < fast)}


def writer_loop_calls(proc):
    calls = proc.get("syscalls", {})
    return {"writer_epoll_waits": calls.get("epoll_wait", 0) + calls.get("epoll_pwait", 0),
            "writer_epoll_ctls": calls.get("epoll_ctl", 0),
            "writer_pipe_reads": socket_io(proc, "read", ("pipe",))["calls"]}


# strace -y names each descriptor: `123 write(9<socket:[4711]>, ""..., 16384) = 16384`; a call
# another process interrupts is split: `... 16384 <unfinished ...>`, then `123 <... write resumed>) = 16384`.
STRACE_CALL = re.compile(r"^(\d+)\s+(read|write)\(\d+<([^>]*)>")
STRACE_DONE = re.compile(r"\)\s+=\s+(-?\d+)")
STRACE_RESUMED = re.compile(r"^(\d+)\s+<\.\.\. (read|write) resumed>")


class Strace:
    """strace attached from outside to the primary and the children it forks (-f), every read
    and write with its descriptor's kind (-y): the socket writes and file/pipe reads counted
    by the kernel's own interface, to cross-check iobench watch's eBPF counts."""

    def __init__(self, pid, path):
        self.path = path
        self.proc = subprocess.Popen(["strace", "-f", "-y", "-qq", "-s0", "-e", "trace=read,write",
                                      "-o", path, "-p", str(pid)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # attached to every thread before the sync starts

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=60)
        return parse_strace(open(self.path).read())

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def parse_strace(text):
    """The writer's socket writes (the process that wrote the most socket bytes), and what that
    process read from RDB files and pipes."""
    by_pid, pending = {}, {}
    for line in text.splitlines():
        call = STRACE_CALL.match(line)
        resumed = STRACE_RESUMED.match(line)
        if call and line.endswith("<unfinished ...>"):
            pending[call.group(1)] = (call.group(2), call.group(3))
            continue
        if call:
            pid, what, kind = call.group(1), call.group(2), call.group(3)
        elif resumed and resumed.group(1) in pending:
            pid = resumed.group(1)
            what, kind = pending.pop(pid)
        else:
            continue
        done = STRACE_DONE.search(line)
        n = int(done.group(1)) if done else 0
        if n <= 0:
            continue
        d = by_pid.setdefault(pid, {"writes": 0, "socket_bytes": 0, "source_read_bytes": 0})
        if what == "write" and kind.startswith(("socket:", "TCP")):
            d["writes"] += 1
            d["socket_bytes"] += n
        elif what == "read" and (kind.endswith(".rdb") or kind.startswith("pipe:")):
            d["source_read_bytes"] += n
    if not by_pid:
        return {"writes": 0, "socket_bytes": 0, "source_read_bytes": 0}
    return max(by_pid.values(), key=lambda d: d["socket_bytes"])


def add_large_value(node, size, tmp):
    """SETs key `iobench:large` to `size` random bytes (incompressible, stored as one string) on
    `node` and saves: the RDB's size."""
    value = os.path.join(tmp, "large-value")
    with open(value, "wb") as f:
        left = size
        while left:
            f.write(os.urandom(min(left, 1 << 20)))
            left -= min(left, 1 << 20)
    with open(value, "rb") as f:
        p = subprocess.run([*node.cli_args(), "-x", "SET", "iobench:large"], stdin=f,
                           capture_output=True, text=True, timeout=600)
    os.remove(value)
    if p.returncode != 0 or p.stdout.strip() != "OK":
        sys.exit(f"{replsynclib.PROG}: error: SET of the {size}-byte value: "
                 f"{p.stdout.strip()} {p.stderr.strip()}")
    node.cli("SAVE")
    return os.path.getsize(os.path.join(node.dir, "dump.rdb"))


def make_dataset(binary, a, certs, tmp):
    """The RDB every primary loads: iobench's replication stream, a.rdb bytes, saved once; with
    a.large_value (where the command has it), one more key holding that many random bytes, the
    write larger than a chunk that the fork child's writers must not copy."""
    node = Node(binary, os.path.join(tmp, "dataset"), "tcp", certs, Place(),
                ["--rdbcompression", "no"])
    try:
        rdb, payload = load_dataset(node, a.rdb, a.cache_dir, tmp)
        if getattr(a, "large_value", None):
            rdb = add_large_value(node, a.large_value, tmp)
    finally:
        node.stop()
    path = os.path.join(tmp, "dataset.rdb")
    os.rename(os.path.join(tmp, "dataset", "dump.rdb"), path)
    return path, rdb, payload
