"""A newcomer's first hour (issue #19): habits from iperf3, mistyped inputs and options that
would change nothing are refused before any run, with one line that names the fix."""
import json
import os
import pty
import re
import select
import socket
import stat
import subprocess
import threading
import time

import pytest

from conftest import BIN, run


@pytest.mark.parametrize("args,needle", [
    (["-c", "localhost", "-l", "16k"], "`iobench client --connect HOST:PORT`"),
    (["-s"], "`iobench server"),
    (["client", "--connect", "127.0.0.1:1", "-l", "16k"], "-l SIZE is --buf SIZE"),
    (["-P", "4"], "-P N is --conns N"),
    (["-A", "0"], "--cpus SENDER[,RECEIVER]"),
    (["-t", "10", "--repeat", "3"], "--time sizes the runs by time"),
    (["-u"], "no UDP mode"),
])
def test_iperf3_habits_get_the_iobench_spelling(cache_dir, args, needle):
    p = run(*args, cache=cache_dir, check=2, timeout=10)
    assert needle in p.stderr and p.stdout == "", p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args,needle", [
    (["--seed", "-1"], "--seed: '-1' is negative"),
    (["--conns", "-1"], "--conns: '-1' is negative"),
    (["--engine", "uring", "--qd", "-8"], "--qd: '-8' is negative"),
    (["payload", "--seed", "-2", "-o", "/dev/null"], "--seed: '-2' is negative"),
    (["server", "--max-conns", "-1"], "--max-conns: '-1' is negative"),
    (["--buf", "4k", "--buf", "16k"], "--buf given 2 times: give it once"),
    (["--bytes", "1.3k"], "1.3k is not a whole number of bytes"),
    (["--bytes", "1.k"], "no digits after the decimal point"),
    (["--qd", "16"], "--qd needs uring on a side"),
    (["--auth-token", "x" * 16], "--auth-token is for `iobench client`"),
    (["--stagger", "5ms"], "--stagger needs --conns 2 or more"),
])
def test_bad_or_idle_inputs_are_refused_naming_the_value(cache_dir, args, needle):
    p = run(*args, cache=cache_dir, check=2, timeout=10)
    assert needle in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_fractional_sizes_that_are_whole_bytes_are_accepted(cache_dir):
    p = run("--bytes", "1.5M", "--buf", "0.5k", "--json", "-", "-q", cache=cache_dir, check=0)
    doc = json.loads(p.stdout)
    r = doc["results"][0]
    assert r["send_buf_bytes"] == 512
    assert r["runs"][0]["receiver"]["bytes"] == 3 << 19


@pytest.mark.parametrize("option,path,reason", [
    ("--json", "/no/such/dir/out.json", "No such file or directory"),
    ("--csv", "/tmp", "it is a directory"),
])
def test_output_paths_are_checked_before_the_first_run(cache_dir, option, path, reason):
    t0 = time.monotonic()
    p = run(option, path, "-q", "--bytes", "64M", "--buf", "1k", "--repeat", "5",
            cache=cache_dir, check=2, timeout=60)
    assert time.monotonic() - t0 < 5, "the bad path was found after running"
    assert f"cannot write {option} '{path}': {reason}" in p.stderr, p.stderr


def test_a_failed_run_leaves_the_previous_report_and_no_temporary_file(cache_dir, tmp_path):
    out = tmp_path / "out.json"
    out.write_text("previous\n")
    # A server that refuses: the run fails after the file was opened.
    p = run("client", "--connect", "127.0.0.1:1", "--json", str(out), cache=cache_dir, timeout=30)
    assert p.returncode != 0
    assert out.read_text() == "previous\n"
    assert sorted(os.listdir(tmp_path)) == ["out.json"]
    run("--bytes", "1M", "--json", str(out), "-q", cache=cache_dir, check=0)
    assert json.loads(out.read_text())["results"]
    assert sorted(os.listdir(tmp_path)) == ["out.json"]


@pytest.mark.parametrize("option", ["--json", "--out"])
def test_a_target_that_is_not_a_regular_file_is_written_in_place(cache_dir, tmp_path, option):
    """`-o /dev/null` once renamed a regular file onto /dev/null (as root, the host's): a FIFO
    stands in for the device here. It stays a FIFO and its reader gets the whole output."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    args = (("payload", "--bytes", "1M", "--seed", "78", "-o", str(fifo)) if option == "--out"
            else ("--bytes", "1M", "--json", str(fifo)))
    p = run(*args, "-q", cache=cache_dir, timeout=60)
    reader.join(timeout=30)
    assert p.returncode == 0, p.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode), "the FIFO was replaced"
    assert sorted(os.listdir(tmp_path)) == ["fifo"], "a temporary file was left"
    assert len(got[0]) == (1 << 20) if option == "--out" else json.loads(got[0])["results"]


def test_payload_out_is_checked_before_generation(cache_dir):
    p = run("payload", "--bytes", "1M", "--seed", "77", "-o", "/no/such/dir/p.zst",
            cache=cache_dir, check=2, timeout=30)
    assert "cannot write --out '/no/such/dir/p.zst': No such file or directory" in p.stderr
    assert "building" not in p.stderr


def fake_server(answer):
    """A TCP listener that accepts one client and answers `answer` (None: says nothing)."""
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)

    def serve():
        conn, _ = lst.accept()
        with conn:
            if answer is not None:
                conn.recv(4096)
                conn.sendall(answer)
            time.sleep(8)
    threading.Thread(target=serve, daemon=True).start()
    return lst


def test_a_silent_server_is_given_the_hello_timeout_not_the_whole_timeout(cache_dir):
    lst = fake_server(None)
    addr = "127.0.0.1:%d" % lst.getsockname()[1]
    t0 = time.monotonic()
    p = run("client", "--connect", addr, "--bytes", "1M", "--hello-timeout", "1",
            cache=cache_dir, timeout=30)
    took = time.monotonic() - t0
    lst.close()
    assert p.returncode == 1 and took < 4, (took, p.stderr)
    assert f"no answer from server {addr} within 1 s of the HELLO (--hello-timeout)" in p.stderr


def test_a_server_speaking_another_protocol_is_named_not_iobench(cache_dir):
    lst = fake_server(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    addr = "127.0.0.1:%d" % lst.getsockname()[1]
    p = run("client", "--connect", addr, "--bytes", "1M", cache=cache_dir, timeout=30)
    lst.close()
    assert p.returncode == 1
    assert f"{addr} is not an iobench server (first bytes 'HTTP/1.1 400" in p.stderr, p.stderr


def payload_names(cache):
    return sorted(n for n in os.listdir(cache) if n.endswith(".zst"))


def test_the_cache_keeps_the_most_recently_used_within_cache_max(tmp_path):
    cache = str(tmp_path)
    bound = ["--cache-dir", cache, "--cache-max", "7M", "-q", "-o", "/dev/null", "--bytes", "3M"]
    for seed in (1, 2, 3):
        run("payload", "--seed", seed, *bound, check=0)
    # Three 3 MiB payloads do not fit 7 MiB: the oldest (seed 1) went.
    assert [n.split("-")[2] for n in payload_names(cache)] == ["seed2", "seed3"]
    run("payload", "--seed", 2, *bound, check=0)  # used again: now the most recent
    # A dead writer's temporary file is swept with the next eviction.
    open(os.path.join(cache, "x.zst.tmp.999999999"), "w").write("half")
    run("payload", "--seed", 4, *bound, check=0)
    assert [n.split("-")[2] for n in payload_names(cache)] == ["seed2", "seed4"]
    assert not [n for n in os.listdir(cache) if ".tmp." in n]
    listing = run("payload", "--list", "--cache-dir", cache, check=0).stdout.splitlines()
    assert "seed4" in listing[0] and "seed2" in listing[1], listing
    assert listing[-1].startswith(f"2 payload(s), 6.0 MiB in {cache}")
    p = run("payload", "--clear", "--cache-dir", cache, check=0)
    assert p.stdout.startswith("removed 2 payload(s), 6.0 MiB")
    assert payload_names(cache) == []


def test_a_payload_above_cache_max_is_built_but_not_cached(tmp_path):
    cache = str(tmp_path)
    p = run("payload", "--bytes", "2M", "--cache-dir", cache, "--cache-max", "1M", "-o", "/dev/null",
            check=0)
    assert p.stdout.startswith("wrote 2097152 bytes")
    assert payload_names(cache) == []


@pytest.mark.parametrize("args,needle", [
    (["payload"], "payload needs --out FILE, --list or --clear"),
    (["payload", "--list", "--clear"], "--list excludes --clear"),
    (["--cache-max", "2x"], "invalid --cache-max '2x'"),
])
def test_payload_command_inputs(tmp_path, args, needle):
    p = run(*args, "--cache-dir", str(tmp_path), check=2, timeout=10)
    assert needle in p.stderr, p.stderr


def on_a_terminal(args, cache, timeout=120):
    """Runs iobench with stdout and stderr on a pseudo-terminal; returns its exit code and what
    the terminal got. Nothing is typed into that terminal and iobench's stdin is /dev/null
    (script(1), used before, typed its own stdin into it: a ^C byte in it interrupted iobench
    with exit 130, in CI)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([BIN, *map(str, args), "--cache-dir", cache], stdin=subprocess.DEVNULL,
                         stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    got, deadline = b"", time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 0.5)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every writer closed the terminal
                    break
                if not chunk:
                    break
                got += chunk
        rc = p.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(master)
        if p.poll() is None:
            p.kill()
            p.wait()
    return rc, got.decode(errors="replace")  # bytes: keep the \r redraws


@pytest.mark.slow
def test_a_terminal_sees_a_live_line_per_run_and_a_pipe_does_not(cache_dir):
    # 64-byte buffers make 96 MiB take over a second (1.5 million writes; 32 MiB could end
    # within the half second before the first draw on a fast host), whatever the placement.
    args = ["--bytes", "96M", "--buf", "64,64k"]
    rc, screen = on_a_terminal(args, cache_dir)
    assert rc == 0, screen
    assert re.search(r"\riobench: 64 run 1/1 \(size 1/2\): \d+\.\d s, [\d.]+ [KM]iB of 96\.0 MiB, "
                     r"[\d.]+ Gbit/s\x1b\[K", screen), repr(screen[:400])
    assert "iobench: 64 counting run (size 1/2): counting syscalls (no live figures)" in screen
    # The line is erased before the table.
    assert "\r\x1b[K\r\niobench 0.1.0 | loopback" in screen or \
        screen.split("iobench 0.1.0 | loopback")[0].rstrip("\r\n").endswith("\r\x1b[K"), \
        repr(screen[-2000:])
    # Long enough (>0.5 s) that a terminal would have been drawn on; no counting run needed.
    args = ["--bytes", "16M", "--buf", "64", "--syscalls", "off"]
    quiet_rc, quiet = on_a_terminal(args + ["-q"], cache_dir)
    assert quiet_rc == 0 and "run 1/1" not in quiet
    piped = run(*args, cache=cache_dir, check=0)
    assert "run 1/1" not in piped.stderr + piped.stdout
