"""Soak: one `iobench server` (TCP on one port, TLS on another: --tls-listen) serves SESSIONS
sessions from several clients at once — TCP and TLS, both directions, buffer sizes 1K..64K —
with misbehaving clients mixed in (connect and close, random bytes, HTTP, a broken ClientHello,
a TLS handshake then nothing, silence). Then: are the server's descriptors, threads and RSS
where they were after the warm-up, and does its log account for every session? Exit 0 when
both hold, 1 otherwise; --json writes the figures.

  scripts/soak [--sessions 5000] [--clients 4] [--per-client 50] [--bytes 256k]
               [--hostile-every 1] [--json FILE] [--iobench PATH]
"""
import json
import os
import random
import re
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

from iobench_tools.lib.kernel import axes
from iobench_tools.lib.kernel import iobenchlib
from iobench_tools.lib.kernel import runs as iobench_runs
from iobench_tools.lib.kernel.iobenchlib import ROOT, require_binary

KINDS = [("tcp", False), ("tcp", True), ("tls", False), ("tls", True)]  # (proto, --reverse)
SIZES = ["1k", "4k", "16k", "64k"]
HOSTILE = ["connect-close", "random", "http", "tls-broken-hello", "tls-then-close", "silent"]


def server_figures(pid):
    """Descriptors, threads and resident memory of a process, from /proc."""
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    status = open(f"/proc/{pid}/status").read()
    threads = int(re.search(r"^Threads:\s+(\d+)", status, re.M).group(1))
    rss_kib = int(re.search(r"^VmRSS:\s+(\d+)", status, re.M).group(1))
    return {"fds": fds, "threads": threads, "rss_mib": round(rss_kib / 1024, 1)}


class SoakServer:
    def __init__(self, iobench, certs, cache):
        self.proc = subprocess.Popen(
            iobench_runs.ServerRun(listen="127.0.0.1:0", tls_listen="127.0.0.1:0",
                           tls_cert=f"{certs}/server.crt", tls_key=f"{certs}/server.key",
                           handshake_timeout=2, idle_timeout=10, cache_dir=cache).argv(iobench),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on \S+:(\d+) \(tcp\) and \S+:(\d+) \(tls", line)
        if not m:
            raise SystemExit(f"soak: error: the server did not start: {line.strip()} "
                             f"{self.proc.stderr.read() if self.proc.poll() is not None else ''}")
        self.port = {"tcp": int(m.group(1)), "tls": int(m.group(2))}
        self.lines = []
        self.lock = threading.Lock()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            with self.lock:
                self.lines.append(line.rstrip("\n"))

    def session_lines(self):
        """Log lines about a client (not the server's own '-' lines)."""
        with self.lock:
            return [ln for ln in self.lines if not re.match(r"^\[[^]]+\] - ", ln)]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def hostile(kind, port, rng):
    """One misbehaving client: each makes the server log one `rejected:` line."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
            if kind == "random":
                c.sendall(rng.randbytes(rng.randint(1, 2048)))
            elif kind == "http":
                c.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            elif kind == "tls-broken-hello":
                c.sendall(b"\x16\x03\x01\x02\x00" + rng.randbytes(rng.randint(0, 600)))
            elif kind == "tls-then-close":
                ctx = ssl.create_default_context()
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
                with ctx.wrap_socket(c, server_hostname="localhost"):
                    pass
                return
            elif kind == "silent":
                time.sleep(0.2)
            if kind != "connect-close":
                try:
                    c.recv(65536)
                except OSError:
                    pass
    except OSError:
        pass


def worker(a, server, cache, certs, index, plan, results):
    rng = random.Random(index)
    for step, (proto, reverse) in enumerate(plan):
        if proto == "hostile":
            kind = HOSTILE[(index + step) % len(HOSTILE)]
            hostile(kind, server.port["tls" if kind.startswith("tls") else "tcp"], rng)
            results.append(("hostile", 1, 0))
            continue
        bufs = ",".join(rng.sample(SIZES, 2))
        cmd = iobench_runs.ClientRun(
            connect=f"127.0.0.1:{server.port[proto]}", proto=proto, buf=bufs,
            repeat=a.per_client // 2, bytes=a.bytes, syscalls="off", cache_dir=cache,
            tls_ca=f"{certs}/ca.crt" if proto == "tls" else None, reverse=reverse,
        ).argv(a.iobench)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        sessions = 2 * (a.per_client // 2)
        results.append(("client", sessions, p.returncode))
        if p.returncode != 0:
            print(f"soak: client failed: {p.stderr.strip()}", file=sys.stderr)


def plans(a):
    """Each client's list of steps: valid client runs (cycling through proto x direction) and a
    hostile connection every --hostile-every steps, SESSIONS sessions in all."""
    per_run = 2 * (a.per_client // 2)
    runs = max(1, a.sessions // per_run)
    steps = [[] for _ in range(a.clients)]
    for i in range(runs):
        steps[i % a.clients].append(KINDS[i % len(KINDS)])
        if a.hostile_every and (i + 1) % a.hostile_every == 0:
            steps[i % a.clients].append(("hostile", False))
    return steps


def run_phase(a, server, cache, certs, steps):
    results = []
    threads = [threading.Thread(target=worker, args=(a, server, cache, certs, i, s, results))
               for i, s in enumerate(steps)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def settle(server, expected_lines, timeout=30):
    """Waits until the log has a line for every connection made (sessions end just after)."""
    deadline = time.monotonic() + timeout
    while len(server.session_lines()) < expected_lines and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # the last session threads exit after logging


def main(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    ap.add_argument("--sessions", type=int, default=5000,
                    help="sessions the long-lived server serves in all")
    ap.add_argument("--clients", type=int, default=4, help="client processes at once")
    ap.add_argument("--per-client", type=int, default=50,
                    help="sessions per client process (two sizes x --repeat)")
    axes.add_bytes(ap, "256k", per="session")
    ap.add_argument("--hostile-every", type=int, default=1,
                    help="a misbehaving connection after every N client runs (0: none)")
    ap.add_argument("--rss-slack-mib", type=float, default=32,
                    help="RSS growth allowed after the warm-up")
    ap.add_argument("--json", help="write the figures here")
    iobenchlib.add_binary_option(ap)
    a = ap.parse_args(argv)
    for name in ("sessions", "clients", "per_client"):
        if getattr(a, name) < (2 if name == "per_client" else 1):
            sys.exit(f"soak: error: invalid --{name.replace('_', '-')} '{getattr(a, name)}'")
    require_binary("soak", a.iobench)
    with tempfile.TemporaryDirectory(prefix="iobench-soak-") as tmp:
        certs, cache = f"{tmp}/certs", f"{tmp}/cache"
        subprocess.run([os.path.join(ROOT, "tls", "make-certs"), certs, "--ip", "127.0.0.1"],
                       check=True, capture_output=True)
        server = SoakServer(a.iobench, certs, cache)
        try:
            report = soak(a, server, cache, certs)
        finally:
            server.stop()
    print(report["text"])
    if a.json:
        with open(a.json, "w") as f:
            json.dump({k: v for k, v in report.items() if k != "text"}, f, indent=2)
    sys.exit(0 if report["ok"] else 1)


def soak(a, server, cache, certs):
    # Warm-up: one run of each kind, so the payload cache and TLS state exist before the
    # baseline.
    warm = run_phase(a, server, cache, certs, [[k] for k in KINDS])
    settle(server, sum(n for _, n, _ in warm))
    base = server_figures(server.proc.pid)
    t0 = time.monotonic()
    results = run_phase(a, server, cache, certs, plans(a))
    expected = sum(n for _, n, _ in warm) + sum(n for _, n, _ in results)
    settle(server, expected)
    seconds = time.monotonic() - t0
    after = server_figures(server.proc.pid)
    lines = server.session_lines()
    ok = sum(" ok: " in ln for ln in lines)
    refused = sum(" rejected: " in ln or " failed: " in ln for ln in lines)
    valid = sum(n for kind, n, _ in warm + results if kind == "client")
    hostile_n = sum(n for kind, n, _ in results if kind == "hostile")
    client_failures = sum(1 for kind, _, rc in warm + results if kind == "client" and rc != 0)
    flat = (after["fds"] == base["fds"] and after["threads"] == base["threads"]
            and after["rss_mib"] - base["rss_mib"] <= a.rss_slack_mib)
    accounted = len(lines) == expected and ok == valid and refused == hostile_n
    good = flat and accounted and client_failures == 0 and server.proc.poll() is None
    text = "\n".join([
        f"soak: {expected} sessions ({valid} valid: TCP and TLS, both directions, "
        f"{','.join(SIZES)}; {hostile_n} misbehaving) from {a.clients} clients at once in "
        f"{seconds:.1f} s",
        f"  server after the warm-up: {base['fds']} fds, {base['threads']} threads, "
        f"RSS {base['rss_mib']} MiB",
        f"  server at the end:        {after['fds']} fds, {after['threads']} threads, "
        f"RSS {after['rss_mib']} MiB  -> {'flat' if flat else 'NOT FLAT'}",
        f"  log: {len(lines)} session lines for {expected} connections: {ok} ok, {refused} "
        f"rejected or failed -> {'every session accounted for' if accounted else 'MISMATCH'}",
        f"  client runs that failed: {client_failures}",
    ])
    return {"ok": good, "sessions": expected, "valid": valid, "misbehaving": hostile_n,
            "clients": a.clients, "seconds": round(seconds, 1), "baseline": base, "end": after,
            "flat": flat, "log_lines": len(lines), "log_ok": ok, "log_refused": refused,
            "accounted": accounted, "client_failures": client_failures, "text": text}


if __name__ == "__main__":
    main()
