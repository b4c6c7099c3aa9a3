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


@pytest.mark.slow
@pytest.mark.real_server
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="iobench watch needs root (eBPF)")
@pytest.mark.skipif(not shutil.which("redis-server") or not shutil.which("redis-cli")
                    or not shutil.which("zstd"),
                    reason="redis-server, redis-cli or zstd missing (scripts/setup --studies installs them)")
def test_small_syncs_beside_the_model(tmp_path):
    out = tmp_path / "out"
    p = subprocess.run([SCRIPT, "--rdb", "2M", "--repeat", "1", "--price-rounds", "2",
                        "--iobench", BIN, "--out",
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
        # A main thread's CPU clock is exact; a save child that ended between two samples is
        # known to the tick (10 ms), which a 2 MB sync may not reach.
        assert real["writer_cpu_s_per_gib"] > 0 or real["writer"] == "save child", (key, real)
        assert isinstance(c["gaps"], list) and set(c["ratios"]) >= {"writes", "bytes_per_write"}
        assert real["write_histogram"].get("16384..32767", 0) > 0, real["write_histogram"]
    # Disk-based syncs write the file out of the main thread; dual-channel's child writes itself.
    assert cells[("redis", "tcp", "disk")]["real"]["writer"] == "main thread"
    if ("valkey", "tcp", "dual") in cells:
        dual = cells[("valkey", "tcp", "dual")]
        assert dual["real"]["writer"] == "save child"
        # Replayed, the child's 16K-then-overshoot writes take more calls than whole chunks.
        price = dual["pattern"]
        assert price["pattern"]["writes"]["median"] > 1.2 * price["whole"]["writes"]["median"]
    for c in cells.values():
        price = c["pattern"]
        assert price["rounds"] == 2 and "--write-pattern @watch.json" in price["command"]
        assert price["pattern"]["segments_out"]["min"] > 0, price
        assert price["cpu_verdict"] in ("parity within noise", "whole chunks cheaper",
                                        "the pattern cheaper")
    report = (out / "report.md").read_text()
    assert "## Gaps over 10%" in report and "redis 7." in report
    assert "dual-channel replication is Valkey's" in report
    table = report.split("## Gaps")[0]
    assert table.count("\n| redis") + table.count("\n| valkey") == len(cells)
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert sum(r["kind"] == "model" for r in rows) == len(cells) == sum(r["kind"] == "real" for r in rows)
    assert sum(r["kind"] == "pattern" for r in rows) == len(cells)
    assert "## The real pattern, priced" in report
    assert (out / "plots" / "writes.png").is_file()
    assert doc["command"].startswith("scripts/replication-sync --rdb 2M")


@pytest.mark.parametrize("args, message", [
    (["--modes", "fast"], "invalid --modes 'fast'"),
    (["--servers", "redis,memcached"], "invalid --servers 'redis,memcached'"),
    (["--rdb", "lots"], "invalid size 'lots'"),
    (["--repeat", "0"], "invalid --repeat 0"),
    (["--netns-mtu", "100"], "invalid --netns-mtu 100"),
    (["--where", "moon"], "invalid choice: 'moon'"),
])
def test_bad_input_is_one_line(args, message):
    p = subprocess.run([SCRIPT, *args], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and message in p.stderr, p.stderr


def netns_unavailable():
    if os.geteuid() != 0:
        return "needs root (ip netns, tc)"
    probe = subprocess.run(["ip", "netns", "add", "iobrsprobe"], capture_output=True, text=True)
    subprocess.run(["ip", "netns", "del", "iobrsprobe"], capture_output=True)
    return None if probe.returncode == 0 else f"ip netns refused: {probe.stderr.strip()}"


@pytest.mark.real_server
@pytest.mark.netns
@pytest.mark.root
@pytest.mark.skipif(netns_unavailable() is not None, reason=str(netns_unavailable()))
@pytest.mark.skipif(not shutil.which("redis-server") or not shutil.which("redis-cli"),
                    reason="redis-server or redis-cli missing (scripts/setup --studies installs them)")
def test_syncs_over_the_emulated_link(tmp_path):
    # Primary and replica in their own namespaces over a rate-capped veth, MTU 9001; the model
    # crosses the same kind of link (scripts/netns-link).
    out = tmp_path / "out"
    p = subprocess.run([SCRIPT, "--where", "netns", "--netns-rate", "1gbit", "--servers", "redis",
                        "--modes", "disk,diskless", "--proto", "tcp", "--rdb", "2M", "--repeat",
                        "1", "--price-rounds", "1", "--iobench", BIN, "--out", str(out),
                        "--cache-dir", str(tmp_path / "cache")],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads((out / "results.json").read_text())
    assert doc["where"] == "netns" and doc["netns"] == {"rate": "1gbit", "mtu": 9001}
    assert len(doc["cells"]) == 2
    for c in doc["cells"]:
        assert c["real"]["socket_bytes"] >= c["rdb_bytes"] and c["model"]["writes"] > 0, c
    leftover = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "iobrs" not in leftover, leftover


def test_a_second_run_of_a_fleet_or_link_name_stops_before_it_touches_the_first(monkeypatch,
                                                                               tmp_path):
    """Two studies of one fleet name once ran together: the second deleted the first's
    namespaces under it (a 28-round run lost its network mid-sync). The name is held now: the
    second stops in one line before any namespace command."""
    import fcntl
    from iobench_tools.lib.valkey import replsynclib
    monkeypatch.setattr(replsynclib, "LOCKS", str(tmp_path))
    ran = []
    monkeypatch.setattr(replsynclib.subprocess, "run", lambda *a, **k: ran.append(a))
    monkeypatch.setattr(replsynclib, "_sh", lambda *a: ran.append(a))
    held = open(tmp_path / "iobench-netns-iobkt.lock", "a")
    fcntl.flock(held, fcntl.LOCK_EX)
    for make in (lambda: replsynclib.Fleet(2, "5gbit", 9001, name="iobkt"),
                 lambda: replsynclib.NetLink("5gbit", 9001, name="iobkt")):
        with pytest.raises(SystemExit, match="the namespaces 'iobkt\\*' are in use by another "
                                             "run"):
            make()
    assert ran == [], ran
    held.close()  # the first run ended: the name is free again
    fleet = replsynclib.Fleet(1, "5gbit", 9001, name="iobkt")
    assert ran, "the free name's namespaces are made"
    fleet.close()
    replsynclib.NetLink("5gbit", 9001, name="iobkt").close()
