"""The upstream Valkey patches (patches/valkey-8.1.1-series/), their builds (scripts/build-valkey-source
--upstream), Valkey's own tests run against them (scripts/valkey-tests) and their evidence
(scripts/upstream-evidence): the patches apply exactly and stay small, bad input stops with one
line and leaves nothing behind, and a small real run shows what each patch promises."""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from iobench_tools.lib.valkey import realsync, upstreamlib, valkeytests

# Shares no namespace name, netns lock, package or host-wide check with the other script tests:
# a lane apart (scripts/test).
pytestmark = pytest.mark.apart

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))
BUILD = ROOT / "scripts" / "build-valkey-source"
TARBALL = ROOT / "build" / "valkey-src" / "valkey_8.1.1+dfsg1.orig.tar.xz"
UPSTREAM = ROOT / "build" / "valkey" / "upstream"
PATCHES = sorted((ROOT / "patches" / "valkey-8.1.1-series").glob("*.patch"))


def built(level):
    return os.access(UPSTREAM / level / "valkey-server", os.X_OK)


needs_builds = pytest.mark.skipif(
    not (built("stock") and built("0004")),
    reason="the stock and 0004 builds are missing: scripts/setup --studies builds them with "
           "scripts/build-valkey-source --upstream (which says why it did not)")


def changed_lines(patch):
    return sum(1 for line in patch.read_text().splitlines()
               if re.match(r"^[+-](?![+-]{2} )", line))


def test_the_series_is_four_small_patches_in_upstream_form():
    assert [p.name[:4] for p in PATCHES] == ["0001", "0002", "0003", "0004"]
    for p in PATCHES:
        text = p.read_text()
        assert text.startswith("From ") and "\nSubject: [PATCH " in text, p.name
        assert "getenv" not in text and "IOBENCH" not in text, f"{p.name}: an environment knob"
        assert changed_lines(p) <= 60, f"{p.name}: {changed_lines(p)} changed lines"


@pytest.mark.skipif(not TARBALL.exists(), reason=f"{TARBALL} missing (scripts/setup --studies fetches it)")
def test_each_patch_applies_in_order_with_no_fuzz(tmp_path):
    subprocess.run(["tar", "-C", str(tmp_path), "-xf", str(TARBALL)], check=True)
    src = next(tmp_path.glob("valkey-8.1.1*"))
    for p in PATCHES:
        r = subprocess.run(["patch", "-d", str(src), "-p1", "--forward", "--batch", "--fuzz=0"],
                           stdin=open(p), capture_output=True, text=True)
        assert r.returncode == 0, f"{p.name}: {r.stdout}{r.stderr}"
        assert "offset" not in r.stdout and "fuzz" not in r.stdout, f"{p.name}: {r.stdout}"


@pytest.mark.parametrize("args, said", [
    (["--upstream", "0009"], "invalid --upstream '0009'"),
    (["--upstream", "0002", "--chunk", "1000"], "invalid --chunk '1000'"),
    (["--upstream", "stock", "--chunk", "65536"], "--chunk needs --upstream 0001 or later"),
    (["--chunk", "65536"], "--chunk needs --upstream"),
    (["--bogus"], "unknown argument '--bogus'"),
    (["--fetch", "9.0"], "invalid --fetch '9.0': expected 8.1.1 or 9.1.2"),
    (["--fetch", "9.1.2", "--upstream", "stock"], "--fetch takes one version"),
])
def test_bad_build_arguments_stop_with_one_line(args, said):
    r = subprocess.run([str(BUILD), *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and said in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(not TARBALL.exists(), reason=f"{TARBALL} missing (scripts/setup --studies fetches it)")
def test_a_patch_that_does_not_apply_stops_with_one_line_and_leaves_no_temporary_tree(tmp_path):
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "patches" / "valkey-8.1.1-series").mkdir(parents=True)
    (repo / "build" / "valkey-src").mkdir(parents=True)
    shutil.copy(BUILD, repo / "scripts")
    (repo / "build" / "valkey-src" / TARBALL.name).symlink_to(TARBALL)
    (repo / "patches" / "valkey-8.1.1-series" / "0001-broken.patch").write_text(
        "--- a/src/rio.c\n+++ b/src/rio.c\n@@ -1,1 +1,1 @@\n-no such line\n+nor this\n")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    r = subprocess.run([str(repo / "scripts" / "build-valkey-source"), "--upstream", "0001"],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ, TMPDIR=str(tmp)))
    assert r.returncode == 1 and "0001-broken.patch does not apply" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not list(tmp.iterdir()), "the unpacked source was left behind"
    assert not (repo / "build" / "valkey" / "upstream" / "0001").exists()


def test_runtest_output_is_read_into_passed_failed_and_skipped():
    text = ("[ok]: First server should have role slave after SLAVEOF (3 ms)\n"
            "\x1b[0;31m[err]\x1b[0m: diskless loading short read in tests/integration/replication.tcl\n"
            "[skip]: a test with tags\n[ignore]: another\n[ok]: Second (12 ms)\n"
            "[1/1 done]: integration/replication (30 seconds)\n")
    out = valkeytests.parse_output(text)
    assert out["passed"] == ["First server should have role slave after SLAVEOF", "Second"]
    assert out["failed"] == ["diskless loading short read"]
    assert out["skipped"] == ["a test with tags", "another"] and out["exception"] == []
    stock = dict(out, failed=[], status="passed")
    assert valkeytests.regressions(stock, dict(out, status="failed")) == [
        "diskless loading short read"]
    assert valkeytests.regressions(out, dict(stock, status="passed")) == []
    assert valkeytests.regressions(stock, dict(stock, status="timeout")) == ["(the unit: timeout)"]


def test_committed_valkey_test_reports_keep_no_machine_path():
    """A test server's output folder (./tests/tmp/server.28061.69) is this machine's run: the
    reports name it by its pattern, and no committed report holds one, or a home or checkout."""
    line = "not found in ./tests/tmp/server.28061.69/stdout after line: 60"
    assert valkeytests.without_run_folders([line]) == [
        "not found in ./tests/tmp/server.PID.N/stdout after line: 60"]
    for f in ROOT.glob("results/**/valkey-tests*/results.json"):
        text = f.read_text()
        for machine in (re.compile(r"tests/tmp/[A-Za-z_-]+\.\d+\.\d+"),
                        re.compile(r"(^|[\s\"'(=])/tmp/"), re.compile(r"/root/"),
                        re.compile(re.escape(str(ROOT)))):
            assert not machine.search(text), (f, machine.pattern)


def test_strace_lines_split_by_another_process_are_joined():
    text = ('5 write(9<socket:[1]>, ""..., 16384 <unfinished ...>\n'
            '6 write(3</w/temp-1.rdb>, ""..., 100) = 100\n'
            '5 <... write resumed>) = 16384\n'
            '5 read(7</w/dump.rdb>, ""..., 65536) = 65536\n'
            '5 read(8</proc/5/stat>, ""..., 4095) = 300\n'
            '5 write(9<socket:[1]>, ""..., 10) = -1 EAGAIN (Resource temporarily unavailable)\n')
    assert realsync.parse_strace(text) == {"writes": 1, "socket_bytes": 16384,
                                           "source_read_bytes": 65536}


def test_a_verdict_needs_an_interval_off_one():
    runs = lambda xs: [{"writer_cpu_s_per_gib": x} for x in xs]  # noqa: E731
    same = upstreamlib.compare(runs([1.0, 1.1, 0.9, 1.05, 0.95]), runs([1.02, 0.9, 1.1, 1.0, 0.97]),
                               "writer_cpu_s_per_gib", True)
    assert same["verdict"] == "parity within noise"
    lower = upstreamlib.compare(runs([1.0, 1.02, 0.99, 1.01, 1.0]), runs([0.8, 0.81, 0.79, 0.8, 0.82]),
                                "writer_cpu_s_per_gib", True)
    assert lower["verdict"] == "better" and lower["ci"][1] < 1
    higher = upstreamlib.compare(runs([0.8, 0.81, 0.79, 0.8, 0.82]), runs([1.0, 1.02, 0.99, 1.01, 1.0]),
                                 "writer_cpu_s_per_gib", True)
    assert higher["verdict"] == "worse"


def test_valkey_tests_refuses_bad_input_with_one_line():
    script = str(ROOT / "scripts" / "valkey-tests")
    for args, said in ((["--builds", "0002"], "stock is the reference"),
                       (["--builds", "stock,0042"], "'0042'"),
                       (["--proto", "udp"], "invalid --proto 'udp'"),
                       (["--jobs", "0"], "invalid --jobs 0")):
        r = subprocess.run([script, *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and said in r.stderr, (args, r.stderr)


def test_valkey_tests_without_tclsh_says_so(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python3").symlink_to("/usr/bin/python3")
    r = subprocess.run([str(ROOT / "scripts" / "valkey-tests"), "--builds", "stock"],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PATH=str(bindir)))
    assert r.returncode == 1 and "tclsh not found" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_valkey_tests_over_tls_without_tcl_tls_says_so(tmp_path):
    # A tclsh whose `package require tls` fails, as Debian's tcl without tcl-tls does.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python3").symlink_to("/usr/bin/python3")
    (bindir / "tclsh").write_text("#!/bin/sh\necho \"can't find package tls\" >&2\nexit 1\n")
    (bindir / "tclsh").chmod(0o755)
    for base in ("8.1.1", "9.1.2"):
        r = subprocess.run([str(ROOT / "scripts" / "valkey-tests"), "--base", base, "--proto",
                            "tls"], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, PATH=f"{bindir}:/bin"))
        assert r.returncode == 1 and "Tcl's tls package is missing" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.real_server
@needs_builds
@pytest.mark.skipif(not shutil.which("tclsh"), reason="tclsh missing (Debian's tcl)")
def test_the_full_series_passes_a_replication_unit_stock_passes_over_tcp_and_tls(tmp_path):
    """The CI part of scripts/valkey-tests: one replication unit (replication-4, 17 tests, about
    25 s each run), stock and 0004, TCP and TLS."""
    r = subprocess.run([str(ROOT / "scripts" / "valkey-tests"), "--builds", "stock,0004",
                        "--units", "replication-4", "--jobs", "2", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads((tmp_path / "results.json").read_text())
    assert {(x["build"], x["proto"]) for x in doc["runs"]} == {
        ("stock", "tcp"), ("stock", "tls"), ("0004", "tcp"), ("0004", "tls")}
    assert all(x["passed"] > 10 and x["failed"] == 0 for x in doc["runs"])
    assert all(v["passes_stock"] for v in doc["verdicts"].values())
    assert "| integration/replication-4 |" in (tmp_path / "report.md").read_text()


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("tclsh"), reason="tclsh missing (Debian's tcl)")
@needs_builds
def test_a_unit_past_its_timeout_is_killed_with_its_servers(tmp_path):
    r = subprocess.run([str(ROOT / "scripts" / "valkey-tests"), "--builds", "stock",
                        "--proto", "tcp", "--units", "replication", "--unit-timeout", "10",
                        "--out", str(tmp_path / "out")], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, TMPDIR=str(tmp_path)))
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert doc["runs"][0]["status"] == "timeout" and doc["runs"][0]["seconds"] < 60
    left = [p for p in os.listdir("/proc") if p.isdigit() and str(tmp_path) in _cwd(p)]
    assert not left, f"processes of the unit left running: {left}"
    assert [p.name for p in tmp_path.iterdir()] == ["out"], "the unit's suite was left behind"
    assert r.returncode == 0  # stock alone has no verdict to fail


def _cwd(pid):
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


@pytest.mark.slow
@pytest.mark.real_server
@needs_builds
@pytest.mark.skipif(os.geteuid() != 0, reason="iobench watch needs root (eBPF)")
@pytest.mark.skipif(not shutil.which("redis-cli") or not shutil.which("zstd"),
                    reason="redis-cli or zstd missing (scripts/setup --studies installs them)")
def test_the_series_writes_whole_64k_chunks_and_reads_the_rdb_once(tmp_path):
    """stock beside 0004, one round at 8M: the dual-channel child writes whole 64K chunks over
    TCP (stock: 16K and a tail each); the disk-based TLS sender reads each byte of the RDB once
    though every write is a one-record partial write; strace agrees from outside."""
    r = subprocess.run([str(ROOT / "scripts" / "upstream-evidence"), "--patches", "chunk",
                        "--modes", "dual,disk", "--replicas", "1", "--rounds", "2", "--rdb", "8M",
                        "--iobench", BIN, "--out", str(tmp_path / "out"),
                        "--cache-dir", str(tmp_path / "cache")],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    cells = {c["id"]: c for c in doc["cells"]}
    whole = cells["tcp-dual-n1-0004"]["runs"][0]
    assert int(whole["top_write_sizes"][0][0]) == 65536 and whole["bytes_per_write"] > 60000
    stock = cells["tcp-dual-n1-stock"]["runs"][0]
    assert stock["bytes_per_write"] < 16384 and whole["writes"] * 3 < stock["writes"]
    disk = cells["tls-disk-n1-0004"]["runs"][0]
    assert disk["bytes_per_write"] < 17000  # one TLS record per write
    assert 0.99 < disk["source_read_bytes"] / disk["socket_bytes"] < 1.01
    traced = cells["tls-disk-n1-0004"]["strace"]
    assert abs(traced["writes"] - disk["writes"]) <= 0.02 * disk["writes"] + 5
    assert "## chunk: the series at 64K" in (tmp_path / "out" / "report.md").read_text()


def test_two_suites_at_once_take_different_port_ranges():
    """valkey-tests claims its port ranges machine-wide: a second run beside the first gets
    others, and one that finds none free says so instead of failing the units."""
    from iobench_tools.lib.valkey import valkeytests
    first = valkeytests.claim_slots(2)
    try:
        second = valkeytests.claim_slots(2)
        try:
            assert not set(first) & set(second)
        finally:
            for f in second.values():
                f.close()
        with pytest.raises(valkeytests.SlotsBusy, match="port ranges are free for 99 jobs"):
            valkeytests.claim_slots(99)
    finally:
        for f in first.values():
            f.close()
