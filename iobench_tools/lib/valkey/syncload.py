"""What a reviewer asks first of a change to a primary's full sync: the latency its clients see
while the sync streams, and the memory it takes. Two probes around one sync (realsync.real_sync's
`during`):

- Load: `valkey-benchmark` from the primary's own build, a steady GET load at --rps on a few
  connections for a fixed window that starts with REPLICAOF (so it covers the fork, the RDB
  stream's start and, when the sync is shorter, its end); its own latency distribution read
  back: p50, p99, p99.9 (the first percentile it lists at or above 99.9%), max. The same load
  without a sync is the baseline.
- Memory: sampled every 20 ms while the sync runs: the primary's RSS, its fork children's RSS and
  private dirty pages (smaps_rollup: the copy-on-write and buffers the child itself pays for),
  and the primary's INFO memory: used_memory and mem_clients_slaves (the replicas' output
  buffers). With each sample, the CPU a fork child last ran on (/proc/CHILD/stat): where the
  child ran, as the kernel saw it, whatever placement was asked for.
"""
import contextlib
import json
import os
import re
import subprocess
import tempfile
import threading
import time

from iobench_tools.lib.kernel import iobenchlib, runs
from iobench_tools.lib.valkey import openload

SUMMARY = re.compile(r"latency summary \(msec\):\s*\n\s*avg\s+min\s+p50\s+p95\s+p99\s+max\s*\n"
                     r"\s*([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")
PERCENTILE = re.compile(r"^([\d.]+)% <= ([\d.]+) milliseconds", re.MULTILINE)
THROUGHPUT = re.compile(r"throughput summary: ([\d.]+) requests per second")


class LoadFailed(Exception):
    pass


def parse_benchmark(text):
    """valkey-benchmark's report: {avg, p50, p95, p99, p999, max (ms), rps}; LoadFailed when it
    has none (the load did not run)."""
    m, t = SUMMARY.search(text), THROUGHPUT.search(text)
    if not m or not t:
        tail = text.strip().splitlines()[-1:] or ["no output"]
        raise LoadFailed(f"valkey-benchmark gave no latency summary: {tail[0][:200]}")
    avg, _, p50, p95, p99, worst = (float(x) for x in m.groups())
    p999 = next((float(ms) for pct, ms in PERCENTILE.findall(text) if float(pct) >= 99.9), worst)
    return {"avg_ms": avg, "p50_ms": p50, "p95_ms": p95, "p99_ms": p99, "p999_ms": p999,
            "max_ms": worst, "rps": float(t.group(1))}


class Load:
    """A steady load of `command` (get, or set: writes the replicas' buffers must carry) on
    `node` (a replsynclib.Node) for `seconds`, from `benchmark`."""

    def __init__(self, benchmark, node, rps, seconds, conns=4, cpus=None, command="get"):
        tls = (["--tls", "--cacert", f"{node.certs}/ca.crt"] if node.proto == "tls" else [])
        pin = ["taskset", "-c", cpus] if cpus else []
        self.cmd = [*node.place.prefix, *pin, benchmark, "-h", node.ip, "-p", str(node.port),
                    *tls, "-t", command, *(["-r", "100000"] if command == "set" else []),
                    "-c", str(conns), "--rps", str(rps), "--duration",
                    str(seconds), "--precision", "3"]
        self.seconds = seconds
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)

    def result(self):
        try:
            out, _ = self.proc.communicate(timeout=self.seconds + 60)
        except subprocess.TimeoutExpired:
            self.kill()
            raise LoadFailed(f"valkey-benchmark ran past {self.seconds + 60} s") from None
        if self.proc.returncode != 0:
            raise LoadFailed(f"valkey-benchmark exit {self.proc.returncode}: "
                             f"{out.strip().splitlines()[-1:] or ''}")
        return parse_benchmark(out)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


OPEN_LOOP = "iobench load"  # the load tool that is not a valkey-benchmark path


class OpenLoad:
    """The same load, open loop (`iobench load`, docs/load.md): each request sent at its
    intended time whatever earlier replies did, its latency from that time, in 100 ms slices of
    wall-clock time. result(window) reads the whole load as Load does, and the slices inside a
    wall-clock window (the sync's: from REPLICAOF to the sync done) beside it. Plain RESP over
    TCP: a TLS-only node is refused."""

    def __init__(self, node, rps, seconds, conns=4, cpus=None, command="get"):
        if node.proto == "tls":
            raise LoadFailed("iobench load speaks plain RESP over TCP, and this node's port is "
                             "TLS only: use valkey-benchmark for a TLS cell")
        pin = ["taskset", "-c", cpus] if cpus else []
        fd, self.path = tempfile.mkstemp(prefix="iobench-load.", suffix=".json")
        os.close(fd)
        run = runs.LoadRun(connect=f"{node.ip}:{node.port}", rate=rps, conns=conns,
                           duration=f"{seconds}s", command=command, json=self.path)
        self.cmd = [*node.place.prefix, *pin, *run.argv(iobenchlib.binary())]
        self.seconds = seconds
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)

    def result(self, window=None):
        try:
            out, _ = self.proc.communicate(timeout=self.seconds + 60)
        except subprocess.TimeoutExpired:
            self.kill()
            raise LoadFailed(f"iobench load ran past {self.seconds + 60} s") from None
        try:
            with open(self.path) as f:
                doc = json.load(f)
        except (OSError, ValueError):
            doc = None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        if self.proc.returncode != 0 or not doc:
            raise LoadFailed(f"iobench load exit {self.proc.returncode}: "
                             f"{(out or '').strip().splitlines()[-1:] or ''}")
        return open_figures(doc, window)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
        with contextlib.suppress(OSError):
            os.unlink(self.path)


def open_figures(doc, window=None):
    """Load's figures (ms) from an `iobench load` JSON, and with a window (unix ns) the same
    over the slices inside it: sync_p50_ms, sync_p99_ms, sync_p999_ms, sync_max_ms and
    sync_requests."""
    lat, req = doc["latency_us"], doc["requests"]
    out = {"p50_ms": lat["p50"] / 1000, "p99_ms": lat["p99"] / 1000,
           "p999_ms": lat["p999"] / 1000, "max_ms": lat["max"] / 1000,
           "rps": req["answered"] / doc["duration_s"], "unanswered": req["unanswered"],
           "open_loop": True}
    if window:
        counts, top = openload.window(doc, *window), openload.window_max_us(doc, *window)
        for q, name in ((0.5, "p50"), (0.99, "p99"), (0.999, "p999"), (1.0, "max")):
            v = openload.quantile_us(counts, q, result=doc, max_us=top)
            out[f"sync_{name}_ms"] = v / 1000 if v is not None else None
        out["sync_requests"] = sum(counts.values())
        # Whether the load ran past the window's end: a load that stopped inside the sync
        # leaves its last part unmeasured.
        last = max((sl["start_unix_ns"] for sl in doc["slices"]), default=0)
        out["load_outlasted_sync"] = last >= window[1]
    return out


def make_load(tool, node, rps, seconds, cpus=None, command="get"):
    """valkey-benchmark (`tool` its path: closed loop, as before) or iobench load (OPEN_LOOP)."""
    if tool == OPEN_LOOP:
        return OpenLoad(node, rps, seconds, cpus=cpus, command=command)
    return Load(tool, node, rps, seconds, cpus=cpus, command=command)


def children_of(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def kib_field(path, name):
    """A 'Name:   123 kB' field of a /proc file, in bytes (0 if the process is gone)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(name + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def last_cpu(pid):
    """The CPU the process last ran on (/proc/PID/stat's processor field; None once gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            after_name = f.read().rsplit(")", 1)[1].split()
        return int(after_name[36])  # field 39; fields from 3 (state) follow the name
    except (OSError, IndexError, ValueError):
        return None


def info_memory(node):
    """used_memory, mem_clients_slaves and mem_total_replication_buffers (the shared replication
    buffer the replicas and the backlog hold, where Valkey keeps the writes a syncing replica has
    yet to receive) from the node's INFO memory (None when it does not answer in time)."""
    out = node.cli("INFO", "memory", check=False)
    got = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    try:
        return (int(got["used_memory"]), int(got["mem_clients_slaves"]),
                int(got.get("mem_total_replication_buffers", 0)))
    except (KeyError, ValueError):
        return None


class MemorySampler:
    """Peaks of the primary's memory while a sync runs, sampled on a thread every `every_s`."""

    def __init__(self, node, every_s=0.02, info_every_s=0.1):
        self.node, self.pid = node, node.proc.pid
        self.every_s, self.info_every_s = every_s, info_every_s
        self.peak = {"primary_rss_bytes": 0, "child_rss_bytes": 0, "child_private_dirty_bytes": 0,
                     "used_memory_bytes": 0, "replica_buffers_bytes": 0,
                     "replication_buffers_bytes": 0, "samples": 0}
        self.child_cpus = set()
        self.before = info_memory(node)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        next_info = 0.0
        while not self.stopping.is_set():
            p = self.peak
            p["samples"] += 1
            p["primary_rss_bytes"] = max(p["primary_rss_bytes"],
                                         kib_field(f"/proc/{self.pid}/status", "VmRSS"))
            for child in children_of(self.pid):
                p["child_rss_bytes"] = max(p["child_rss_bytes"],
                                           kib_field(f"/proc/{child}/status", "VmRSS"))
                p["child_private_dirty_bytes"] = max(
                    p["child_private_dirty_bytes"],
                    kib_field(f"/proc/{child}/smaps_rollup", "Private_Dirty"))
                cpu = last_cpu(child)
                if cpu is not None:
                    self.child_cpus.add(cpu)
            if time.monotonic() >= next_info:
                got = info_memory(self.node)
                if got:
                    p["used_memory_bytes"] = max(p["used_memory_bytes"], got[0])
                    p["replica_buffers_bytes"] = max(p["replica_buffers_bytes"], got[1])
                    p["replication_buffers_bytes"] = max(p["replication_buffers_bytes"], got[2])
                next_info = time.monotonic() + self.info_every_s
            self.stopping.wait(self.every_s)

    def stop(self):
        self.stopping.set()
        self.thread.join(timeout=10)
        out = dict(self.peak, child_cpus=sorted(self.child_cpus))
        if self.before:
            out["used_memory_before_bytes"] = self.before[0]
        return out


class During:
    """Both probes around one sync: started before REPLICAOF, stopped once the sync is done;
    stop() gives {"load": ..., "memory": ...}. `load`: (benchmark, rps, seconds, cpus, command)
    or None."""

    def __init__(self, primary, load):
        self.memory = MemorySampler(primary)
        self.load = (make_load(load[0], primary, load[1], load[2], cpus=load[3],
                               command=load[4]) if load else None)
        self.started_ns = time.time_ns()  # REPLICAOF follows at once

    def stop(self, window=None):
        """`window`: the sync's (unix ns), else from REPLICAOF to now."""
        memory = self.memory.stop()
        out = {"memory": memory}
        if self.load:
            how = "primary's log" if window else "REPLICAOF to done"
            window = window or (self.started_ns, time.time_ns())
            out["load"] = (dict(self.load.result(window), sync_window=how)
                           if isinstance(self.load, OpenLoad)
                           else self.load.result())  # waits out its window
        return out

    def kill(self):
        self.memory.stopping.set()
        if self.load:
            self.load.kill()


def idle_load(benchmark, node, rps, seconds, cpus=None, command="get"):
    """The baseline: the same load on a primary that is not syncing (`benchmark`: a
    valkey-benchmark path, or OPEN_LOOP)."""
    return make_load(benchmark, node, rps, seconds, cpus=cpus, command=command).result()


def benchmark_of(server):
    """The valkey-benchmark beside a build's valkey-server."""
    path = os.path.join(os.path.dirname(server), "valkey-benchmark")
    return path if os.access(path, os.X_OK) else None
