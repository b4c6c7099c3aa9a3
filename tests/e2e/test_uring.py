"""io_uring end to end: TLS through the memory-BIO codec, multishot receives over a ring of
provided buffers (and the batched fallback), registered send buffers, and provided rings that
follow an adaptive buffer size."""
import json
import re

import pytest

from conftest import run

MiB = 1 << 20
SIZES = {"1k": 1024, "4k": 4096, "16k": 16384, "64k": 65536}


def run_json(cache, *args):
    p = run(*args, "--json", "-", "-q", cache=cache, check=0)
    return json.loads(p.stdout)


@pytest.fixture(autouse=True)
def need_uring(cache_dir):
    p = run("--engine", "uring", "--bytes", "64k", "-q", cache=cache_dir)
    if p.returncode != 0:
        pytest.skip(f"io_uring refused here: {p.stderr.strip()}")


@pytest.mark.parametrize("proto", ["tcp", "tls"])
@pytest.mark.parametrize("buf", ["1k", "16k", "64k"])
@pytest.mark.parametrize("reverse", [False, True])
def test_uring_moves_exact_bytes_over_tcp_and_tls(cache_dir, proto, buf, reverse):
    doc = run_json(cache_dir, "--engine", "uring", "--proto", proto, "--buf", buf, "--bytes", "3M",
                   *(["--reverse"] if reverse else []))
    r = doc["results"][0]["runs"][0]
    s, v = r["sender"], r["receiver"]
    assert s["engine"] == v["engine"] == "uring"
    assert s["bytes"] == v["bytes"] == 3 * MiB and s["xxh3"] == v["xxh3"]
    if proto == "tls":
        # io_uring moves the records itself: both sides run the memory-BIO model.
        assert s["tls"]["io"] == v["tls"]["io"] == "bio"
        assert s["tls"]["records_out"] == v["tls"]["records_in"] == 3 * MiB // min(SIZES[buf], 16384)
        assert s["engine_path"].startswith("send: TLS records sealed in memory")
    assert v["engine_path"].startswith("recv: multishot, provided ring 16 x " + buf.upper())
    # One multishot request serves many buffers: far fewer submissions than completions.
    assert v["uring"]["sqes"] < v["uring"]["cqes"]
    assert v["io_calls"] >= 3 * MiB // SIZES[buf]
    k = doc["results"][0]["counting_run"]["receiver"]  # --syscalls auto counts in its own run
    if k["syscalls"]["source"] in ("bpf", "perf_event"):
        by = k["syscalls"]["by_name"]
        # The process's other threads may read a little (the counters see every thread); the
        # data itself never comes through read(2)/recvfrom(2).
        assert by.get("read", 0) + by.get("recvfrom", 0) <= 4, by
        assert by.get("io_uring_enter", 0) <= k["uring"]["cqes"]


@pytest.mark.parametrize("proto", ["tcp", "tls"])
@pytest.mark.parametrize("buf", ["1k", "64k"])
def test_batched_receive_is_the_fallback_and_moves_exact_bytes(cache_dir, proto, buf):
    doc = run_json(cache_dir, "--engine", "uring", "--uring-recv", "batch", "--proto", proto,
                   "--buf", buf, "--bytes", "3M", "--qd", "4")
    r = doc["results"][0]["runs"][0]
    s, v = r["sender"], r["receiver"]
    assert s["bytes"] == v["bytes"] == 3 * MiB and s["xxh3"] == v["xxh3"]
    assert v["engine_path"].startswith("recv: batched, 4 linked receives per io_uring_enter")
    assert v["uring"]["sqes"] == v["uring"]["cqes"] == v["io_calls"]
    assert doc["options"]["uring_recv"] == "batch"


def test_forced_multishot_reports_the_path(cache_dir):
    doc = run_json(cache_dir, "--engine", "uring", "--uring-recv", "multishot", "--buf", "4k",
                   "--bytes", "2M")
    v = doc["results"][0]["runs"][0]["receiver"]
    assert v["bytes"] == 2 * MiB and "multishot" in v["engine_path"]


@pytest.mark.parametrize("send,recv", [("uring", "blocking"), ("blocking", "uring"),
                                       ("uring", "epoll"), ("epoll", "uring")])
def test_mixed_engines_over_tls(cache_dir, send, recv):
    doc = run_json(cache_dir, "--send-engine", send, "--recv-engine", recv, "--proto", "tls",
                   "--buf", "16k", "--bytes", "3M")
    r = doc["results"][0]["runs"][0]
    s, v = r["sender"], r["receiver"]
    assert (s["engine"], v["engine"]) == (send, recv)
    assert s["bytes"] == v["bytes"] == 3 * MiB and s["xxh3"] == v["xxh3"]
    # Each side picks its own model: bio under uring, socket under the others (--tls-io auto).
    assert s["tls"]["io"] == ("bio" if send == "uring" else "socket")
    assert v["tls"]["io"] == ("bio" if recv == "uring" else "socket")


@pytest.mark.parametrize("reverse", [False, True])
def test_fixed_buffers_with_zerocopy_send_from_registered_memory(cache_dir, reverse):
    doc = run_json(cache_dir, "--engine", "uring", "--fixed-buffers", "--zerocopy", "--buf", "64k",
                   "--bytes", "4M", *(["--reverse"] if reverse else []))
    r = doc["results"][0]["runs"][0]
    s, v = r["sender"], r["receiver"]
    assert s["bytes"] == v["bytes"] == 4 * MiB and s["xxh3"] == v["xxh3"]
    assert s["engine_path"].startswith("send: from a registered copy of the payload (4M")
    assert s["zerocopy"]["sends"] == s["zerocopy"]["notifications"] == 64
    assert doc["options"]["fixed_buffers"] is True


def test_fixed_buffers_without_zerocopy_works_or_names_the_refusal(cache_dir):
    p = run("--engine", "uring", "--fixed-buffers", "--buf", "16k", "--bytes", "2M", "--json", "-",
            "-q", cache=cache_dir)
    if p.returncode == 0:
        s = json.loads(p.stdout)["results"][0]["runs"][0]["sender"]
        assert s["bytes"] == 2 * MiB and "registered copy" in s["engine_path"]
    else:
        assert "refuses registered buffers for IORING_OP_SEND (EINVAL)" in p.stderr, p.stderr


@pytest.mark.parametrize("proto", ["tcp", "tls"])
def test_provided_rings_follow_an_adaptive_buffer(cache_dir, proto):
    # A 64K budget over 3 staggered connections of up to 64K each (TLS too, whose default
    # maximum is one record): sizes change as they join and leave, and each change takes a new
    # ring of the new size. Four runs: a resize that lands on the last records (the old
    # request's final completions bring them) once left a receiver waiting.
    doc = run_json(cache_dir, "--engine", "uring", "--proto", proto, "--buf", "adaptive",
                   "--budget", "64k", "--buf-max", "64k", "--conns", "3", "--stagger", "3ms",
                   "--bytes", "24M", "--repeat", "4", "--timeout", "5")
    runs = doc["results"][0]["runs"]
    assert len(runs) == 4 and not any(r["group"]["error"] for r in runs), runs
    resized = 0
    for c in (c for r in runs for c in r["group"]["conns"]):
        v, s = c["receiver"], c["sender"]
        assert c["ok"] and v["bytes"] == s["bytes"] == 24 * MiB and v["xxh3"] == s["xxh3"]
        assert "multishot" in v["engine_path"]
        m = re.search(r"(\d+) rings \(resized\)", v["engine_path"])
        if m:
            # A ring per size the receives ran at; a size adopted after the last byte (or
            # changed and changed back between two waits) takes none.
            resized += 1
            assert 2 <= int(m.group(1)) <= v["buf_resizes"] + 1, v
    assert resized > 0, [c["receiver"]["engine_path"] for r in runs for c in r["group"]["conns"]]


def test_uring_over_tls_refuses_the_socket_model():
    p = run("--engine", "uring", "--proto", "tls", "--tls-io", "socket", timeout=10)
    assert p.returncode == 2 and "use --tls-io bio or auto" in p.stderr
