"""Tests of the sweep scripts on tiny sweeps: manifest and resume, failed cells, plots, the
recommendation's knee, the netns path (root only) and teardown after an interrupt."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
BIN = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))
sys.path.insert(0, str(SCRIPTS))
import sweeplib  # noqa: E402


def sweep(tmp_path, name, *args, check=None):
    p = subprocess.run([str(SCRIPTS / "sweep"), name, "--results", str(tmp_path), "--iobench", BIN,
                        "--bytes", "1M", "--repeat", "2", "--warmup", "0", *args],
                       capture_output=True, text=True, timeout=300)
    if check is not None:
        assert p.returncode == check, p.stdout + p.stderr
    return p


def test_manifest_cells_and_resume(tmp_path):
    sweep(tmp_path, "tiny", "--proto", "tcp,tls", "--bufs", "4k,16k", check=0)
    d = tmp_path / "tiny"
    m = json.loads((d / "manifest.json").read_text())
    assert m["name"] == "tiny" and m["finished"] and m["iobench_commit"]
    assert [c["id"] for c in m["cells"]] == ["tcp-blocking-c1-4k", "tcp-blocking-c1-16k",
                                             "tls-blocking-c1-4k", "tls-blocking-c1-16k"]
    assert all(c["status"] == "ok" for c in m["cells"])
    first = {f.name: f.stat().st_mtime_ns for f in (d / "cells").iterdir()}
    p = sweep(tmp_path, "tiny", "--proto", "tcp,tls", "--bufs", "4k,16k", check=0)
    assert "4 already done" in p.stdout
    assert {f.name: f.stat().st_mtime_ns for f in (d / "cells").iterdir()} == first


def test_syscalls_counter_reaches_every_cell(tmp_path):
    sweep(tmp_path, "taskio", "--proto", "tcp", "--bufs", "4k", "--syscalls", "taskio", check=0)
    d = tmp_path / "taskio"
    assert json.loads((d / "manifest.json").read_text())["syscalls"] == "taskio"
    doc = json.loads((d / "cells" / "tcp-blocking-c1-4k.json").read_text())
    for run in doc["results"][0]["runs"]:
        assert run["sender"]["syscalls"]["source"] == "task_io"
        assert run["sender"]["syscalls"]["write"] == 256  # 1M in 4K writes
    p = sweep(tmp_path, "bad", "--syscalls", "ebpf", check=2)
    assert "invalid choice: 'ebpf'" in p.stderr


def test_failed_cell_is_recorded_and_the_sweep_goes_on(tmp_path):
    p = sweep(tmp_path, "bad", "--proto", "tcp", "--bufs", "17m,4k", check=1)
    m = json.loads((tmp_path / "bad" / "manifest.json").read_text())
    status = {c["id"]: c for c in m["cells"]}
    assert status["tcp-blocking-c1-17m"]["status"] == "failed"
    assert "17m" in status["tcp-blocking-c1-17m"]["error"]
    assert status["tcp-blocking-c1-4k"]["status"] == "ok"
    assert "failed tcp-blocking-c1-17m" in p.stdout


def test_plots_and_recommendation_are_written(tmp_path):
    pytest.importorskip("matplotlib")
    sweep(tmp_path, "plots", "--proto", "tcp,tls", "--bufs", "1k,16k", check=0)
    d = tmp_path / "plots"
    subprocess.run([str(SCRIPTS / "plot"), str(d)], check=True, capture_output=True)
    for name in ("cpu_per_gib.png", "syscalls_per_gib.png", "throughput.png"):
        png = d / "plots" / name
        assert png.stat().st_size > 10000 and png.read_bytes()[:4] == b"\x89PNG"
    subprocess.run([str(SCRIPTS / "recommend"), str(d)], check=True, capture_output=True)
    text = (d / "recommendation.md").read_text()
    assert "| Chunk Size | write-time sec | writes total |" in text
    assert ("Knee:" in text or "No knee:" in text) and "One connection:" in text
    assert "Placement: unpinned." in text


def test_placement_is_an_axis_and_recorded(tmp_path):
    sweep(tmp_path, "pl", "--proto", "tcp", "--bufs", "4k", "--cpus", "none", "--cpus", "0",
          check=0)
    d = tmp_path / "pl"
    m = json.loads((d / "manifest.json").read_text())
    assert m["placements"] == ["unpinned", "0"]
    assert [c["id"] for c in m["cells"]] == ["tcp-blocking-c1-4k", "tcp-blocking-c1-4k-cpus0"]
    doc = json.loads((d / "cells" / "tcp-blocking-c1-4k-cpus0.json").read_text())
    assert doc["options"]["sender_cpu"] == doc["options"]["receiver_cpu"] == 0
    _, rows = sweeplib.load(str(d))
    assert sorted(r["placement"] for r in rows) == ["--cpus 0", "unpinned"]
    p = sweep(tmp_path, "bad", "--cpus", "0,x", check=None)
    assert p.returncode != 0 and "invalid --cpus '0,x'" in p.stderr


def fake_sweep(tmp_path, cells):
    """A sweep directory as scripts/sweep writes it, from (proto, buf, placement, cpu s/GiB)."""
    d = tmp_path / "fake"
    (d / "cells").mkdir(parents=True)
    manifest = {"name": "fake", "command": "scripts/sweep fake", "iobench_commit": "0",
                "where": "loopback", "netns": None, "bytes": "1M", "started": "x",
                "finished": "y", "cells": []}
    ctx = {"cpu_model": "cpu", "cpus_online": 2, "kernel": "6.18", "libraries": {}}
    for i, (proto, buf, cpus, cpu) in enumerate(cells):
        stat = lambda v: {"median": v, "min": v, "max": v}  # noqa: E731
        side = {k: stat(1.0) for k in ("wall_s", "io_calls", "cpu_s", "syscalls")}
        side["cpu_s_per_gib"] = stat(cpu / 2)
        s, r = (cpus, cpus) if isinstance(cpus, int) else cpus
        doc = {"context": ctx, "options": {"sender_cpu": s, "receiver_cpu": r},
               "results": [{"send_buf_bytes": buf, "label": str(buf), "runs": [{}],
                            "summary": {"sender": side, "receiver": side}}]}
        name = f"cells/c{i}.json"
        (d / name).write_text(json.dumps(doc))
        manifest["cells"].append({"id": f"c{i}", "proto": proto, "engine": "blocking",
                                  "conns": 1, "buf": str(buf), "file": name, "status": "ok"})
    (d / "manifest.json").write_text(json.dumps(manifest))
    return d


def recommend(d):
    subprocess.run([str(SCRIPTS / "recommend"), str(d)], check=True, capture_output=True)
    return (d / "recommendation.md").read_text()


def test_a_knee_at_the_largest_size_tried_is_not_a_default(tmp_path):
    d = fake_sweep(tmp_path, [("tcp", 4096, -1, 3.0), ("tcp", 16384, -1, 1.0)])
    text = recommend(d)
    assert "No knee: the lowest CPU per GiB is at the largest size tried (16K); sweep larger " \
           "sizes" in text
    assert "One connection: no default from this sweep" in text
    assert "nothing is gained" not in text


def test_a_default_is_bounded_by_the_largest_size_tried(tmp_path):
    d = fake_sweep(tmp_path, [("tcp", 4096, -1, 3.0), ("tcp", 16384, -1, 1.0),
                              ("tcp", 65536, -1, 0.99)])
    text = recommend(d)
    assert "**One connection: 16K**" in text
    assert "above it, up to the largest size tried (64K), nothing is gained" in text


def test_placements_are_never_compared_and_a_differing_knee_is_named(tmp_path):
    d = fake_sweep(tmp_path, [
        ("tcp", 4096, -1, 9.0), ("tcp", 16384, -1, 3.0), ("tcp", 65536, -1, 1.0),
        ("tcp", 262144, -1, 0.99),
        ("tcp", 4096, 0, 3.0), ("tcp", 16384, 0, 1.0), ("tcp", 65536, 0, 0.99),
    ])
    text = recommend(d)
    assert "# Placement: --cpus 0" in text and "# Placement: unpinned" in text
    assert "**The knee differs between placements**: 16K --cpus 0, 64K unpinned" in text
    # The unpinned 4K cell (9.0) is not in the pinned table.
    pinned = text.split("# Placement: --cpus 0")[1].split("# Placement: unpinned")[0]
    assert "| 4K | " in pinned and "18.0" not in pinned


def test_recommend_and_plot_refuse_a_directory_that_is_not_a_sweep(tmp_path):
    for script in ("recommend", "plot"):
        p = subprocess.run([str(SCRIPTS / script), str(tmp_path / "nope")], capture_output=True,
                           text=True)
        assert p.returncode == 1 and "Traceback" not in p.stderr
        assert f"{script}: error: '{tmp_path / 'nope'}' is not a sweep (no such directory" in p.stderr


@pytest.mark.parametrize("script", ["compare-peers", "conns-scenario", "counting-overhead",
                                    "engines-compare", "fuzz", "micro", "micro-model",
                                    "netns-link", "plot", "plot-micro", "recommend", "setup",
                                    "sweep", "test", "tidy", "../tls/make-certs"])
def test_every_script_has_help(script):
    p = subprocess.run([str(SCRIPTS / script), "--help"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 0, p.stderr
    assert len(p.stdout.strip().splitlines()) >= 2 and "Traceback" not in p.stderr


def row(buf, cpu):
    half = {"median": cpu / 2, "min": cpu / 2, "max": cpu / 2}
    return {"buf": buf, "sender": {"cpu_s_per_gib": half}, "receiver": {"cpu_s_per_gib": half}}


def test_knee_on_a_synthetic_curve():
    rows = [row(1024, 10.0), row(4096, 3.0), row(8192, 2.05), row(16384, 2.0), row(65536, 1.99)]
    assert sweeplib.knee(rows, 0.05)["buf"] == 8192
    assert sweeplib.knee(rows, 0.0)["buf"] == 65536
    assert sweeplib.knee(rows, 0.60)["buf"] == 4096


def netns_list():
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


needs_root = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"),
                                reason="network namespaces need root, ip and tc")


@needs_root
def test_netns_sweep(tmp_path):
    sweep(tmp_path, "link", "--where", "netns", "--proto", "tcp", "--bufs", "16k", check=0)
    doc = json.loads((tmp_path / "link" / "cells" / "tcp-blocking-c1-16k.json").read_text())
    run = doc["results"][0]["runs"][0]
    assert run["sender"]["socket"]["mtu_bytes"] == 9001
    assert doc["options"]["server"] == "10.231.0.1:5210"
    assert "iobnet-srv" not in netns_list()


@needs_root
def test_interrupted_netns_run_tears_down(tmp_path):
    p = subprocess.Popen([str(SCRIPTS / "netns-link"), "--name", "iobint", "--",
                          "--bytes", "64M", "--buf", "64", "--repeat", "50", "-q"],
                         env=dict(os.environ, IOBENCH=BIN), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while "iobint-cli" not in netns_list():
        assert time.monotonic() < deadline and p.poll() is None, p.communicate()
        time.sleep(0.05)
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    p.wait(timeout=30)
    assert p.returncode != 0
    assert "iobint" not in netns_list()
    links = subprocess.run(["ip", "link"], capture_output=True, text=True).stdout
    assert "iobint" not in links


@needs_root
def test_netns_delay_is_refused():
    p = subprocess.run([str(SCRIPTS / "netns-link"), "--delay", "5", "--", "--bytes", "1M"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "netem" in p.stderr


def ssh_to_localhost():
    if not shutil.which("ssh"):
        return False
    p = subprocess.run(["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=3",
                        "-o", "StrictHostKeyChecking=accept-new", "root@127.0.0.1", "true"],
                       capture_output=True)
    return p.returncode == 0


@pytest.mark.skipif(not ssh_to_localhost(), reason="no key-based ssh to root@127.0.0.1 (sshd)")
def test_two_host_sweep_over_ssh(tmp_path):
    sweep(tmp_path, "ssh", "--server-host", "root@127.0.0.1", "--server-iobench", BIN,
          "--port", "5297", "--proto", "tcp,tls", "--bufs", "4k", check=0)
    for cell in ("tcp-blocking-c1-4k", "tls-blocking-c1-4k"):
        doc = json.loads((tmp_path / "ssh" / "cells" / f"{cell}.json").read_text())
        assert doc["options"]["mode"] == "client"
    tls = json.loads((tmp_path / "ssh" / "cells" / "tls-blocking-c1-4k.json").read_text())
    assert tls["results"][0]["runs"][0]["sender"]["tls"]["verified"] is True
    left = subprocess.run(["pgrep", "-f", "iobench server --listen 0.0.0.0:529[78]"],
                          capture_output=True, text=True).stdout
    assert left == "", "the remote servers must be stopped"


def test_conns_scenario_table_and_recommendation(tmp_path):
    p = subprocess.run([str(SCRIPTS / "conns-scenario"), "conns", "--results", str(tmp_path),
                        "--iobench", BIN, "--conns", "1,3", "--bufs", "4k,adaptive",
                        "--budget", "32k", "--bytes", "1M", "--repeat", "1", "--warmup", "0"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    d = tmp_path / "conns"
    m = json.loads((d / "manifest.json").read_text())
    assert [c["id"] for c in m["cells"]] == ["tcp-blocking-c1-4k", "tcp-blocking-c1-adaptive",
                                             "tcp-blocking-c3-4k", "tcp-blocking-c3-adaptive"]
    table = (d / "conns.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| tcp |")]
    assert len(rows) == 4, table
    # 3 connections at a fixed 4K hold at most 12K per side; adaptive is named with its budget.
    fixed3 = next(r for r in rows if r.startswith("| tcp | 3 | 4K |"))
    peaks = fixed3.split("|")[6].strip().split(" / ")
    assert all(sweeplib_size(x) <= 12 * 1024 for x in peaks), fixed3
    assert any("adaptive: budget 32K, 4K..64K" in r for r in rows)
    subprocess.run([str(SCRIPTS / "recommend"), str(d)], check=True, capture_output=True)
    assert "## Many connections" in (d / "recommendation.md").read_text()


def sweeplib_size(text):
    units = {"K": 1 << 10, "M": 1 << 20}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)
