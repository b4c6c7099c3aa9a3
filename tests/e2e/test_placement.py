"""--cpus pins each side's data phase; every run records, per side, the CPU it was pinned to, the
CPUs it was allowed and the CPUs it was seen on; an unpinned loopback run on few CPUs says that
placement moves its figures. Also --version and the protocol layout the frames are built from."""
import json
import os
import re

import pytest

from conftest import Server, proto_version, run

ALLOWED = sorted(os.sched_getaffinity(0))


def run_json(cache, *args):
    p = run(*args, "--json", "-", "-q", cache=cache, check=0)
    return json.loads(p.stdout)


def sides(doc):
    r = doc["results"][0]["runs"][0]
    return r["sender"]["placement"], r["receiver"]["placement"]


def test_cpus_pins_each_side_and_records_where_it_ran(cache_dir):
    if len(ALLOWED) < 2:
        pytest.skip(f"needs two CPUs, this process may use {ALLOWED}")
    a, b = ALLOWED[0], ALLOWED[1]
    doc = run_json(cache_dir, "--cpus", f"{a},{b}", "--bytes", "2M")
    assert (doc["options"]["sender_cpu"], doc["options"]["receiver_cpu"]) == (a, b)
    send, recv = sides(doc)
    assert (send["pinned_cpu"], send["seen_cpus"]) == (a, str(a))
    assert (recv["pinned_cpu"], recv["seen_cpus"]) == (b, str(b))
    assert send["allowed_cpus"] == recv["allowed_cpus"] != str(a)  # the set before pinning
    # Reversed: the server sends, and still on the sender's CPU.
    send, recv = sides(run_json(cache_dir, "--cpus", f"{a},{b}", "--bytes", "2M", "--reverse"))
    assert (send["seen_cpus"], recv["seen_cpus"]) == (str(a), str(b))


def test_one_cpu_pins_both_sides_to_it(cache_dir):
    cpu = ALLOWED[-1]
    doc = run_json(cache_dir, "--cpus", str(cpu), "--bytes", "2M", "--conns", "2")
    for run_ in doc["results"][0]["runs"]:
        for side in ("sender", "receiver"):
            assert run_[side]["placement"]["pinned_cpu"] == cpu


def test_unpinned_runs_record_their_set_and_warn_on_few_cpus(cache_dir):
    doc = run_json(cache_dir, "--bytes", "2M")
    send, recv = sides(doc)
    assert send["pinned_cpu"] is None and recv["pinned_cpu"] is None
    assert send["allowed_cpus"] and send["seen_cpus"]
    assert doc["options"]["sender_cpu"] is None
    table = run("--bytes", "2M", "-v", cache=cache_dir, check=0).stdout
    assert "placement: not pinned" in table
    assert ("note: unpinned on" in table) == (len(ALLOWED) <= 4), table
    pinned = run("--bytes", "2M", "-v", "--cpus", str(ALLOWED[0]), cache=cache_dir,
                 check=0).stdout
    assert "note: unpinned" not in pinned and f"pinned to CPU {ALLOWED[0]}" in pinned


@pytest.mark.parametrize("value,needle", [
    ("x", "invalid --cpus 'x': expected SENDER[,RECEIVER]"),
    ("0,1,2", "invalid --cpus '0,1,2'"),
    ("-1", "invalid --cpus '-1'"),
    ("5000", "invalid --cpus '5000'"),
    (str(max(ALLOWED) + 1), "is not one this process may run on"),
])
def test_bad_cpus_is_one_line_before_any_run(cache_dir, value, needle):
    p = run("--cpus", value, cache=cache_dir, check=2)
    assert needle in p.stderr and p.stderr.count("\n") == 1, p.stderr


def test_a_server_refuses_a_cpu_it_may_not_use(cache_dir):
    if len(ALLOWED) < 2:
        pytest.skip(f"needs two CPUs, this process may use {ALLOWED}")
    s = Server(cache=cache_dir, cpus={ALLOWED[0]})
    try:
        p = run("client", "--connect", s.addr, "--bytes", "1M", "--cpus", f"{ALLOWED[0]},{ALLOWED[1]}",
                cache=cache_dir, check=1)
        assert f"CPU {ALLOWED[1]} is not one this server may run on" in p.stderr, p.stderr
        ok = run("client", "--connect", s.addr, "--bytes", "1M", "--cpus", str(ALLOWED[0]), "--json", "-",
                 "-q", cache=cache_dir, check=0)
        assert json.loads(ok.stdout)["results"][0]["runs"][0]["receiver"]["placement"]["seen_cpus"] == str(ALLOWED[0])
    finally:
        s.stop()


def test_json_options_carry_every_engine_tuning_field(cache_dir):
    opts = run_json(cache_dir, "--bytes", "1M", "--engine", "epoll", "--reads-per-event", "3")["options"]
    layout = {f["name"] for f in json.loads(run("protocol").stdout)["messages"]["HELLO"]["fields"]}
    tuning = {n.split(".", 1)[1] for n in layout if n.startswith("tuning.")}
    assert tuning == {"edge", "reads_per_event", "queue_depth", "zerocopy", "sqpoll", "fixed_buffers",
                      "uring_recv", "notsent_lowat"}
    assert tuning <= set(opts) and opts["reads_per_event"] == 3 and opts["syscalls"] == "auto"


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag):
    p = run(flag, check=0)
    assert p.stdout.startswith("iobench ") and f"control protocol {proto_version()}" in p.stdout
    assert "Gbit/s" not in p.stdout  # no benchmark ran


def test_protocol_layout_lists_every_message():
    doc = json.loads(run("protocol", check=0).stdout)
    assert set(doc["messages"]) == {"HELLO", "ACK", "RESULT", "ERROR", "GROUP", "PROGRESS",
                                    "CHALLENGE", "AUTH"}
    assert doc["version"] == proto_version()
    hello = [f["name"] for f in doc["messages"]["HELLO"]["fields"]]
    assert hello[:2] == ["client_sends", "bytes"] and "tuning.queue_depth" in hello


def test_softirq_work_per_cpu_is_recorded_per_run(cache_dir):
    p = run("--bytes", "8M", "--buf", "4k", "--repeat", "2", "--json", "-", "-q", cache=cache_dir,
            check=0)
    doc = json.loads(p.stdout)
    cpus = os.cpu_count()
    for r in doc["results"][0]["runs"]:
        s = r["softirqs"]
        assert s["host"] == "this host: both sides"
        assert len(s["net_rx_per_cpu"]) == len(s["net_tx_per_cpu"]) >= 1
        assert len(s["net_rx_per_cpu"]) <= cpus
        # 8 MiB over loopback in 4K writes: thousands of receive softirqs somewhere.
        assert sum(s["net_rx_per_cpu"]) > 100
    table = run("--bytes", "8M", "--buf", "4k", "-v", cache=cache_dir, check=0).stdout
    assert re.search(r"^softirqs 4K \(this host, both sides\): NET_RX CPU\d+ \d+%.* of \d+",
                     table, re.M), table
    # The sender's segments: a 4K write is at most one loopback segment (MSS 32K-64K). Loopback
    # drops nothing, but a tail-loss probe may still send a segment again: any count.
    seg = re.search(r"^segments 4K \(sender, TCP_INFO\): (\d+\.\d+) per write, \d+ retransmitted$",
                    table, re.M)
    assert seg and 0 < float(seg.group(1)) <= 1.01, table
