"""scripts/replication-sync at a small size: real full syncs (Redis, and Valkey where
scripts/install-valkey put it) measured with iobench watch, set beside iobench's model."""
import csv
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))
SCRIPT = str(ROOT / "scripts" / "replication-sync")
VALKEY = ROOT / "build" / "valkey" / "valkey-server"


@pytest.mark.skipif(os.geteuid() != 0, reason="iobench watch needs root (eBPF)")
@pytest.mark.skipif(not shutil.which("redis-server") or not shutil.which("redis-cli")
                    or not shutil.which("zstd"),
                    reason="redis-server, redis-cli or zstd missing (scripts/setup installs them)")
def test_small_syncs_beside_the_model(tmp_path):
    out = tmp_path / "out"
    p = subprocess.run([SCRIPT, "--rdb", "2M", "--repeat", "1", "--iobench", BIN, "--out",
                        str(out), "--cache-dir", str(tmp_path / "cache")],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads((out / "results.json").read_text())
    cells = {(c["server"], c["proto"], c["mode"]): c for c in doc["cells"]}
    wanted = {("redis", "tcp", "disk"), ("redis", "tcp", "diskless"), ("redis", "tls", "disk"),
              ("redis", "tls", "diskless")}
    if os.access(VALKEY, os.X_OK):
        wanted |= {("valkey", "tcp", "disk"), ("valkey", "tcp", "diskless"),
                   ("valkey", "tcp", "dual")}
    assert set(cells) == wanted, sorted(cells)
    for key, c in cells.items():
        real, model = c["real"], c["model"]
        # The whole RDB crossed the socket, and the model streamed as many bytes.
        assert real["socket_bytes"] >= c["rdb_bytes"], (key, real)
        assert real["writes"] > 0 and model["writes"] > 0 and real["transfer_s"] > 0, (key, real)
        assert real["writer_cpu_s_per_gib"] > 0, (key, real)
        assert isinstance(c["gaps"], list) and set(c["ratios"]) >= {"writes", "bytes_per_write"}
    # Disk-based syncs write the file out of the main thread; dual-channel's child writes itself.
    assert cells[("redis", "tcp", "disk")]["real"]["writer"] == "main thread"
    if ("valkey", "tcp", "dual") in cells:
        assert cells[("valkey", "tcp", "dual")]["real"]["writer"] == "save child"
    report = (out / "report.md").read_text()
    assert "## Gaps over 10%" in report and "redis 7." in report
    assert "dual-channel replication is Valkey's" in report
    assert report.count("\n| redis") + report.count("\n| valkey") == len(cells)
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert sum(r["kind"] == "model" for r in rows) == len(cells) == sum(r["kind"] == "real" for r in rows)
    assert (out / "plots" / "writes.png").is_file()
    assert doc["command"].startswith("scripts/replication-sync --rdb 2M")


@pytest.mark.parametrize("args, message", [
    (["--modes", "fast"], "invalid --modes 'fast'"),
    (["--servers", "redis,memcached"], "invalid --servers 'redis,memcached'"),
    (["--rdb", "lots"], "invalid size 'lots'"),
    (["--repeat", "0"], "invalid --repeat 0"),
])
def test_bad_input_is_one_line(args, message):
    p = subprocess.run([SCRIPT, *args], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and message in p.stderr, p.stderr
