"""Shared fixtures for the end-to-end tests: the iobench binary, a private payload cache and a
long-lived `iobench server` on an ephemeral loopback port."""
import os
import queue
import threading
import re
import struct
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("payload-cache"))


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


# The control protocol's version (src/proto/messages.h kVersion).
PROTO_VERSION = 2


def hello_frame(version=PROTO_VERSION, client_sends=True, nbytes=1 << 20, send_buf=16384, recv_buf=16384,
                proto="tcp", engine="blocking", body_len=None, tls_io="", max_fragment=16384,
                conns=1, group_id=0, token="", fixed_buffers=False, uring_recv="auto"):
    """A HELLO frame built independently of the C++ codec (little-endian, u16-length strings)."""
    s = lambda t: struct.pack("<H", len(t)) + t.encode()
    body = (struct.pack("<?QQQQQ??Qq", client_sends, nbytes, send_buf, recv_buf, 0, 0, True, False,
                        1, 3) + s(proto) + s(engine) + struct.pack("<d", 30.0) + s(tls_io)
            + struct.pack("<?Q??II", False, max_fragment, True, False, 0, 8)
            # conns, conn_index, group_id, payload_bytes, adaptive, budget, buf_min, buf_max
            + struct.pack("<IIQQ?QQQ", conns, 0, group_id, 0, False, 0, 0, 0)
            + s(token) + struct.pack("<??", False, False)
            # fixed_buffers, uring_recv
            + struct.pack("<?", fixed_buffers) + s(uring_recv))
    n = len(body) if body_len is None else body_len
    return b"IOBC" + struct.pack("<HHI", version, 1, n) + body


class Server:
    def __init__(self, *extra, cache=None):
        args = [BIN, "server", "--listen", "127.0.0.1:0", *map(str, extra)]
        if cache:
            args += ["--cache-dir", cache]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, bufsize=1)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on (\S+):(\d+)", line)
        assert m, f"server did not start: {line!r} {self.proc.stderr.read() if self.proc.poll() is not None else ''}"
        self.port = int(m.group(2))
        self.addr = f"127.0.0.1:{self.port}"
        self.lines = []
        # A thread drains stdout into a queue so log lines are never stuck in a buffer.
        self.queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.queue.put(line)
        self.queue.put(None)

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

    def stop(self):
        if self.alive():
            self.proc.kill()
        self.proc.wait(timeout=10)


@pytest.fixture
def server(cache_dir):
    s = Server("--handshake-timeout", "1", "--idle-timeout", "5", cache=cache_dir)
    yield s
    s.stop()
