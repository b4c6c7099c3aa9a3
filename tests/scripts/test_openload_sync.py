"""The harm run's load, open loop (issue #76): valkey-evidence --load-tool open runs `iobench
load` around a sync (syncload.OpenLoad) and reads the slices inside the sync's window apart from
the whole load. Against a real server: a stall inside the window shows in the window's p99 and
one outside it does not, and a TLS-only node is refused with the reason."""
import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from iobench_tools.lib.valkey import syncload

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))
VALKEY = os.environ.get("IOBENCH_VALKEY", str(ROOT / "build" / "valkey" / "valkey-server"))

pytestmark = [pytest.mark.real_server]


def command(port, *words):
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(f"*{len(words)}\r\n".encode() +
                  b"".join(f"${len(w)}\r\n{w}\r\n".encode() for w in words))
        return s.recv(4096).split(b"\r\n")[0].decode()


@pytest.fixture
def node(tmp_path):
    binary = VALKEY if os.access(VALKEY, os.X_OK) else shutil.which("redis-server")
    if not binary or not os.access(BIN, os.X_OK):
        pytest.skip("no valkey-server or redis-server, or no iobench build")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "no", "--dir", str(tmp_path),
                          "--enable-debug-command", "yes"], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                if command(port, "PING") == "+PONG":
                    break
            except OSError:
                time.sleep(0.1)
        yield SimpleNamespace(ip="127.0.0.1", port=port, proto="tcp",
                              place=SimpleNamespace(prefix=[]))
    finally:
        p.kill()
        p.wait()


def test_the_syncs_window_is_read_apart_from_the_whole_load(node, monkeypatch):
    monkeypatch.setenv("IOBENCH_BIN", BIN)
    load = syncload.OpenLoad(node, 1000, 3)
    time.sleep(0.5)
    stall = threading.Thread(target=command, args=(node.port, "DEBUG", "SLEEP", "0.3"))
    window = (time.time_ns(), None)
    stall.start()
    stall.join()
    window = (window[0], time.time_ns())  # the "sync": the stall inside it
    time.sleep(0.5)
    inside = load.result(window)
    assert inside["open_loop"] and inside["unanswered"] == 0, inside
    assert inside["sync_p99_ms"] >= 100 and inside["sync_requests"] >= 250, inside
    # A window after the stall sees none of it; the whole load still does.
    load = syncload.OpenLoad(node, 1000, 3)
    time.sleep(0.3)
    command(node.port, "DEBUG", "SLEEP", "0.3")
    time.sleep(0.4)
    after = (time.time_ns(), time.time_ns() + 1_500_000_000)
    outside = load.result(after)
    assert outside["max_ms"] >= 200, outside
    assert outside["sync_max_ms"] < 100, outside


def test_a_tls_only_node_is_refused_with_the_reason(node):
    tls = SimpleNamespace(**{**vars(node), "proto": "tls"})
    with pytest.raises(syncload.LoadFailed, match="TLS only: use valkey-benchmark"):
        syncload.OpenLoad(tls, 1000, 1)
