"""scripts/replication-knee and the patched Valkey it drives (scripts/install-valkey --source):
bad input stops with one line; a small real sync at two chunk sizes writes the chunks the patch
promises, stock and whole, and the report judges the knees."""
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from iobench_tools.lib.kernel import experiment
from kernel_progress import finished, servers_in, wait_for_first_run

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))
SCRIPT = str(ROOT / "scripts" / "replication-knee")
VALKEY = ROOT / "build" / "valkey" / "valkey-server-src"

needs_build = pytest.mark.skipif(
    not os.access(VALKEY, os.X_OK),
    reason=f"{VALKEY} missing: scripts/install-valkey --source builds it (it says why it did not)")


def needs_sync(test):
    """A real sync: the build, root (iobench watch's eBPF; the fleet's namespaces), redis-cli
    and zstd (loading the dataset)."""
    test = pytest.mark.skipif(os.geteuid() != 0, reason="iobench watch needs root (eBPF)")(test)
    test = pytest.mark.skipif(not shutil.which("redis-cli") or not shutil.which("zstd"),
                              reason="redis-cli or zstd missing (scripts/setup --studies installs them)")(test)
    return needs_build(test)


def knee(*args, tmp_path, timeout=600):
    return subprocess.run([SCRIPT, *args, "--iobench", BIN, "--out", str(tmp_path / "out"),
                           "--cache-dir", str(tmp_path / "cache")],
                          capture_output=True, text=True, timeout=timeout)


def small_sync(*args, tmp_path):
    """One round of two chunk sizes, dual-channel, 2 replicas, a 4M RDB: the results.json."""
    p = knee("--bufs", "16k,64k", "--replicas", "2", "--modes", "dual", "--rounds", "1",
             "--rdb", "4M", *args, tmp_path=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads((tmp_path / "out" / "results.json").read_text())


@pytest.mark.parametrize("args,said", [
    (["--bufs", "16k,3x"], "invalid --bufs '16k,3x': invalid size '3x'"),
    (["--bufs", "512"], "invalid --bufs: 512 outside 1024..1048576"),
    (["--chunks", "16k"], "--chunks is --bufs now (the size axis has one name in every script)"),
    (["--modes", "dual,rdma"], "invalid --modes 'dual,rdma': expected some of dual, diskless"),
    (["--chunking", "big"], "invalid --chunking 'big'"),
    (["--replicas", "0,2"], "invalid --replicas [0, 2]: each 1..16"),
    (["--cpus", "0"], "invalid --cpus '0': expected PRIMARY,REPLICAS"),
])
def test_bad_input_is_one_line(tmp_path, args, said):
    p = knee(*args, tmp_path=tmp_path, timeout=60)
    assert p.returncode == 2 and said in p.stderr, p.stderr
    assert not (tmp_path / "out").exists()


@needs_build
@pytest.mark.parametrize("env,said", [
    ({"IOBENCH_REPL_CHUNK": "3x"}, "invalid IOBENCH_REPL_CHUNK '3x': expected 1024..1048576"),
    ({"IOBENCH_REPL_CHUNK": "2048k"}, "invalid IOBENCH_REPL_CHUNK '2048k'"),
    ({"IOBENCH_REPL_CHUNKING": "big"}, "invalid IOBENCH_REPL_CHUNKING 'big': expected stock"),
    ({"IOBENCH_REPL_CHUNKING": "adaptive", "IOBENCH_REPL_CHUNK": "16k",
      "IOBENCH_REPL_CHUNK_MIN": "64k"}, "invalid IOBENCH_REPL_CHUNK_MIN 65536: above"),
])
def test_the_patched_server_refuses_a_bad_chunk_before_it_starts(env, said):
    p = subprocess.run([str(VALKEY), "--port", "0", "--save", ""], capture_output=True,
                       text=True, timeout=30, env=dict(os.environ, **env))
    assert p.returncode == 1 and p.stderr.strip() == p.stderr.strip().splitlines()[0]
    assert said in p.stderr, p.stderr


@needs_sync
@pytest.mark.slow
@pytest.mark.real_server
@pytest.mark.root
def test_two_chunk_sizes_stock_and_whole_on_the_real_server(tmp_path):
    doc = small_sync("--proto", "tcp", "--chunking", "stock,whole", tmp_path=tmp_path)
    cells = {c["id"]: c for c in doc["cells"]}
    assert set(cells) == {"tcp-dual-n2-16K", "tcp-dual-n2-64K", "tcp-dual-n2-16K-whole",
                          "tcp-dual-n2-64K-whole"}, sorted(cells)
    for cid, c in cells.items():
        (real,), (model,) = c["real"], c["model"]
        chunk = c["chunk"]
        # Both replicas in one BGSAVE, written by the dual-channel save child.
        assert real["bgsaves"] == 1 and real["writer"] == "save child", (cid, real)
        assert real["socket_bytes"] >= 2 * doc["rdb_bytes"], (cid, real)
        sizes = dict((s, n) for s, n in real["top_write_sizes"])
        # The chunk is the most common write; stock adds a tail per chunk, whole none.
        assert max(sizes, key=sizes.get) == chunk, (cid, sizes)
        per_chunk = real["socket_bytes"] / chunk
        if c["chunking"] == "whole":
            assert real["writes"] <= per_chunk + 2 * 2, (cid, real["writes"], per_chunk)
        else:
            assert real["writes"] >= 1.5 * (per_chunk - 2), (cid, real["writes"], per_chunk)
        # iobench's writer clock is exact; the save child's CPU is the kernel's tick count
        # (4 ms at HZ=250), which a child this small can finish inside: 0 is a reading then.
        assert model["writer_cpu_s_per_gib"] > 0, (cid, model)
        assert real["writer_cpu_s_per_gib"] >= 0, (cid, real)
        assert "--fanout connset" in model["command"] and f"--buf {chunk}" in model["command"]
    judged = {(k["chunking"], k["replicas"]): k for k in doc["knees"]}
    assert set(judged) == {("stock", 2), ("whole", 2)}
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## Predicted beside real" in report and "| tcp | dual | 2 | stock |" in report
    # One run per cell pairs no two rounds: rule v2 reads nothing, and each says why.
    assert all(k["real"]["knee"] is None and not k["real"]["sure"]
               and "not read" in k["real"]["why"] for k in doc["knees"]), doc["knees"]
    assert (tmp_path / "out" / "plots" / "tcp-dual.png").stat().st_size > 0


@needs_sync
@pytest.mark.real_server
@pytest.mark.netns
@pytest.mark.root
def test_the_fleet_gives_each_replica_its_own_link_and_leaves_nothing(tmp_path):
    doc = small_sync("--where", "fleet", "--proto", "tls", tmp_path=tmp_path)
    assert doc["where"] == "fleet" and doc["link"] == {"rate": "5gbit", "mtu": 9001}
    for c in doc["cells"]:
        (real,), (model,) = c["real"], c["model"]
        assert real["bgsaves"] == 1 and real["socket_bytes"] >= 2 * doc["rdb_bytes"]
        assert model["command"].startswith("scripts/netns-link ... -- ")
        assert "--fanout connset" in model["command"], model["command"]
    assert "the emulated fleet: each replica its own namespace" in (
        tmp_path / "out" / "report.md").read_text()
    after = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "iobkf" not in after and "iobkm" not in after, after


@needs_sync
@pytest.mark.real_server
@pytest.mark.root
def test_a_study_stopped_mid_run_resumes_with_the_syncs_it_had(tmp_path):
    """Ctrl-C once a sync has landed: every server stopped, exit 130, the syncs kept in
    progress.json; the same command again runs only the missing ones (the 75-minute study no
    longer starts over)."""
    cmd = [SCRIPT, "--bufs", "16k,64k", "--replicas", "1", "--modes", "dual", "--proto", "tcp",
           "--rounds", "2", "--rdb", "2M", "--no-model", "--iobench", BIN,
           "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")]
    progress = tmp_path / "out" / "progress.json"
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=experiment.default_sigint)  # Ctrl-C reaches it
    kept = wait_for_first_run(progress, p, 300)
    assert kept, "no sync landed in progress.json"
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert "the same command resumes" in err
    before = finished(progress)
    assert 1 <= len(before) < 4
    assert not servers_in("iobench-knee-"), "a server outlived the interrupt"
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    after = json.loads(progress.read_text())["cells"]
    for (c, r), ended in before.items():
        assert after[c][r]["ended"] == ended, f"{c} round {r} synced again"
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert all(len(c["real"]) == 2 for c in doc["cells"]) and doc["failures"] == []

@needs_sync
@pytest.mark.real_server
@pytest.mark.netns
@pytest.mark.root
def test_a_sync_that_never_finishes_fails_in_one_line_and_leaves_nothing(tmp_path):
    """A replica behind a 1 Mbit/s link cannot take a 4 MiB RDB within --sync-timeout 2: the
    sync fails, is recorded, and the study ends with one line and a non-zero exit, with no
    server, namespace or temporary tree left."""
    r = subprocess.run([SCRIPT, "--where", "fleet", "--rate", "1mbit", "--rdb", "4M",
                        "--sync-timeout", "2", "--retries", "0", "--rounds", "1", "--bufs", "16k",
                        "--replicas", "1", "--modes", "dual", "--proto", "tcp", "--no-model",
                        "--iobench", BIN, "--out", str(tmp_path / "out"),
                        "--cache-dir", str(tmp_path / "cache")],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, TMPDIR=str(tmp_path)))
    assert r.returncode == 1, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert "failed every attempt" in last and "not linked up within 2 s" in last, r.stderr
    assert "Traceback" not in r.stderr
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert len(doc["failures"]) == 1
    assert not servers_in("iobench-knee-"), "a server outlived the failed sync"
    # The knee study's fleet namespaces are iobkfp and iobkfrN (lib/replsynclib.Fleet); other
    # tests running beside this one make their own.
    left = [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                      text=True).stdout.split() if n.startswith("iobkf")]
    assert not left, f"namespaces left: {left}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "out"]


def test_a_sync_timeout_out_of_range_is_refused(tmp_path):
    r = knee("--sync-timeout", "0", tmp_path=tmp_path, timeout=60)
    assert r.returncode == 2 and "invalid --sync-timeout 0" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 or "usage:" in r.stderr
