"""Shared fixtures for the end-to-end tests: the iobench binary, a private payload cache and a
long-lived `iobench server` on an ephemeral loopback port."""
import contextlib
import ctypes
import functools
import json
import os
import queue
import threading
import re
import shutil
import struct
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))


def share_payloads(src, dst):
    """Copies each complete payload in src that dst lacks (each arrives whole: a temporary
    name, then a rename, as the cache writes its own), so a lane never reads one half-copied."""
    for f in src.glob("resp-*.zst"):
        if ".tmp." not in f.name and not (dst / f.name).exists():
            tmp = dst / f"{f.name}.tmp.{os.getpid()}"
            shutil.copyfile(f, tmp)
            os.replace(tmp, dst / f.name)


# A session's payload cache is its own (a test may look for its processes by --cache-dir). With
# IOBENCH_TEST_PAYLOAD_SEED (scripts/test sets it) the lanes share what they built: a cache
# starts with the folder's payloads and gives back its own at the end, so the ASan and TSan
# lanes read the payloads the Release lanes built instead of building each again (a 64 MiB one
# costs 34 CPU-s under TSan, 8.6 under ASan, 2.1 at -O3). The sanitizers still build payloads:
# every test with a cache of its own (the server's builds, the throw sites) and the unit tests.
@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    cache = tmp_path_factory.mktemp("payload-cache")
    seed = os.environ.get("IOBENCH_TEST_PAYLOAD_SEED")
    if seed:
        share_payloads(Path(seed), cache)
    yield str(cache)
    if seed:
        share_payloads(cache, Path(seed))


def run(*args, cache=None, timeout=120, check=None):
    """Runs iobench with args; returns CompletedProcess. `check` asserts the exit code."""
    cmd = [BIN, *map(str, args)]
    if cache and "--cache-dir" not in args:
        # --cache-dir is a subcommand option, so it goes after the subcommand when there is one.
        cmd += ["--cache-dir", cache]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check is not None:
        assert p.returncode == check, f"{cmd}: rc={p.returncode}\nstdout={p.stdout}\nstderr={p.stderr}"
    return p


@functools.lru_cache(maxsize=None)
def protocol_layout():
    """The control protocol's layout as the binary describes it (`iobench protocol`): the
    version and every message's fields in wire order, from the C++ field lists."""
    p = subprocess.run([BIN, "protocol"], capture_output=True, text=True, timeout=30, check=True)
    return json.loads(p.stdout)


def proto_version():
    return protocol_layout()["version"]


_PACK = {"bool": "<?", "u32": "<I", "u64": "<Q", "i64": "<q", "f64": "<d"}


def pack_fields(message, values):
    """A message body packed here, independently of the C++ codec (little-endian, u16-length
    strings), walking the binary's field list: `values` overrides a field's default by name."""
    fields = protocol_layout()["messages"][message]["fields"]
    unknown = set(values) - {f["name"] for f in fields}
    assert not unknown, f"{message} has no fields {unknown}"
    body = b""
    for f in fields:
        v = values.get(f["name"], f["default"])
        if f["type"] == "str":  # the length in bytes, not characters
            body += struct.pack("<H", len(v.encode())) + v.encode()
        elif f["type"] == "pairs":  # (name, count) list: u16 count, then str + u64 each
            body += struct.pack("<H", len(v)) + b"".join(
                struct.pack("<H", len(k)) + k.encode() + struct.pack("<Q", n) for k, n in v)
        else:
            body += struct.pack(_PACK[f["type"]], v)
    return body


def hello_frame(version=None, client_sends=True, nbytes=1 << 20, send_buf=16384, recv_buf=16384,
                proto="tcp", engine="blocking", body_len=None, tls_io="", max_fragment=16384,
                conns=1, group_id=0, token="", fixed_buffers=False, uring_recv="auto", fields=None):
    """A HELLO frame: the fields a test sets (`fields`: any others, by layout name), every
    other at its default."""
    body = pack_fields("HELLO", {
        "client_sends": client_sends, "bytes": nbytes, "send_buf_bytes": send_buf,
        "recv_buf_bytes": recv_buf, "seed": 1, "zstd_level": 3, "proto": proto, "engine": engine,
        "tls_io": tls_io, "tls_records.tls_max_fragment": max_fragment, "conns": conns, "group_id": group_id,
        "auth": bool(token), "tuning.fixed_buffers": fixed_buffers,
        "tuning.uring_recv": uring_recv, **(fields or {})})
    n = len(body) if body_len is None else body_len
    version = proto_version() if version is None else version
    return b"IOBC" + struct.pack("<HHI", version, 1, n) + body


# Another local user, as the server sees a loopback peer (by its socket's owner, sock_diag):
# a local peer is one source per UID, not per address (issue #88), so an attack from this host
# is another user's sockets beside the valid client's root ones.
OTHER_UID = 65534
_libc = ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def sockets_owned_by(uid=OTHER_UID):
    """Sockets made by this thread inside the block belong to `uid` (the thread's fsuid, which
    sets a socket's owner; Linux keeps it per thread, so other threads are untouched)."""
    previous = _libc.setfsuid(uid)
    try:
        yield
    finally:
        _libc.setfsuid(previous)


class Server:
    def __init__(self, *extra, cache=None, cpus=None, listen="127.0.0.1:0", prefix=(), env=None):
        # prefix: a command the server runs under (e.g. nsenter into a network namespace).
        args = [*prefix, BIN, "server", "--listen", listen, *map(str, extra)]
        if cache:
            args += ["--cache-dir", cache]
        # cpus: the set of CPUs the server process may run on (as under taskset).
        pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
        # env: variables added to the server's environment (the fault hooks).
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, bufsize=1, preexec_fn=pin,
                                     env={**os.environ, **env} if env else None)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on (\S+):(\d+)", line)
        assert m, f"server did not start: {line!r} {self.proc.stderr.read() if self.proc.poll() is not None else ''}"
        self.port = int(m.group(2))
        self.addr = f"{listen.rsplit(':', 1)[0]}:{self.port}"
        # --tls-listen: "... (tcp) and ADDR:PORT (tls, ...)"
        t = re.search(r" and (\S+):(\d+) \(tls", line)
        self.tls_addr = f"{t.group(1)}:{t.group(2)}" if t else None
        self.banner = line
        self.lines = []
        # A thread drains stdout into a queue so log lines are never stuck in a buffer, and one
        # drains stderr: a pipe nobody reads would stop the server at its next warning, or a
        # sanitizer's report, with its session hanging (and the report unseen).
        self.queue = queue.Queue()
        self.errors = []
        self.pumps = [threading.Thread(target=f, daemon=True) for f in (self._pump, self._pump_stderr)]
        for t in self.pumps:
            t.start()

    def _pump(self):
        for line in self.proc.stdout:
            self.queue.put(line)
        self.queue.put(None)

    def _pump_stderr(self):
        for line in self.proc.stderr:
            self.errors.append(line)

    def stderr_text(self):
        """What the server wrote to stderr so far (all of it once stop() has returned)."""
        return "".join(self.errors)

    def read_line(self, timeout=15):
        """Next log line from the server, or fails after `timeout` seconds."""
        try:
            line = self.queue.get(timeout=timeout)
        except queue.Empty:
            line = None
        if line is None:
            raise AssertionError(f"no server log line within {timeout}s (alive={self.alive()})")
        self.lines.append(line)
        return line

    def alive(self):
        return self.proc.poll() is None

    def moved_bytes(self):
        """Bytes its connections carried either way so far (ss: bytes_acked + bytes_received)."""
        out = subprocess.run(["ss", "-Htni", "state", "established", f"( sport = :{self.port} )"],
                             capture_output=True, text=True).stdout
        return sum(int(n) for n in re.findall(r"bytes_(?:acked|received):(\d+)", out))

    def wait_for_data_phase(self, client, at_least=256 << 10, within=30):
        """Until `client` (a Popen) is surely streaming: `at_least` bytes on its connection.
        A fixed sleep is not that: a loaded CI's server had not answered a HELLO 0.2 s after
        the connect, and a kill meant for the data phase came before it."""
        deadline = time.monotonic() + within
        while self.moved_bytes() < at_least:
            assert client.poll() is None, client.communicate()
            assert time.monotonic() < deadline, f"no data phase within {within} s"
            time.sleep(0.01)

    def stop(self):
        if self.alive():
            self.proc.kill()
        self.proc.wait(timeout=10)
        # The pipes reach end of file once the process is gone; until the pumps have read that
        # far, a line the server wrote before it died may not be in stderr_text() yet.
        for t in self.pumps:
            t.join(timeout=5)


@pytest.fixture(scope="session")
def certs(tmp_path_factory):
    """A CA and a server certificate for localhost and 127.0.0.1 (tls/make-certs' default)."""
    d = tmp_path_factory.mktemp("certs")
    subprocess.run([str(ROOT / "tls" / "make-certs"), str(d)], check=True, capture_output=True)
    return d


@pytest.fixture
def server(cache_dir):
    s = Server("--handshake-timeout", "1", "--idle-timeout", "5", cache=cache_dir)
    yield s
    s.stop()
