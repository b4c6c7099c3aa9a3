"""Signals keep the figures and leave nothing behind: Ctrl-C on a client prints what it measured
so far, marked partial, and exits 130; SIGTERM on a server aborts the sessions in flight, logs
each, and exits 0 with no process or socket left."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import BIN, Server

pytestmark = [pytest.mark.concurrency]

MiB = 1 << 20


def wait_for_loopback_data_phase(proc_pid, timeout=20):
    """Until a loopback run's data phase has surely begun: its first 4 MiB written (/proc/PID/io:
    a loopback run has no Server of the tests' to ask, as Server.wait_for_data_phase does)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            io = open(f"/proc/{proc_pid}/io").read()
        except FileNotFoundError:
            return False
        wchar = int(io.split("wchar:")[1].split()[0])
        if wchar > 4 * MiB:
            return True
        time.sleep(0.05)
    return False


def test_ctrl_c_prints_a_partial_report_and_exits_130(cache_dir, tmp_path):
    # 64-byte buffers make 64 MiB take seconds; the payload is generated (cached) first.
    subprocess.run([BIN, "payload", "--bytes", "64M", "--out", os.devnull, "--cache-dir", cache_dir],
                   check=True, capture_output=True)
    out = tmp_path / "run.json"
    csv_out = tmp_path / "run.csv"
    p = subprocess.Popen([BIN, "--bytes", "64M", "--buf", "64", "--json", str(out),
                          "--csv", str(csv_out), "--cache-dir", cache_dir], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert wait_for_loopback_data_phase(p.pid), "the data phase never started"
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=30)
    assert p.returncode == 130, stderr
    assert "PARTIAL: buf 64 run 0 was interrupted by SIGINT after" in stdout
    assert "interrupted by SIGINT: run 0 of buf 64 is partial" in stderr
    doc = json.loads(out.read_text())
    assert doc["interrupted"] == "SIGINT"
    run = doc["results"][0]["runs"][0]
    assert run["partial"] is True
    s = run["sender"]
    assert 0 < s["bytes"] < 64 * MiB
    assert s["duration_ns"] > 0 and s["cpu_s"] > 0
    # The receiver never reported: no zeros passed off as figures, anywhere.
    assert run["receiver"] is None
    assert "receiver server         n/a   not reported" in stdout, stdout
    assert "SO_SNDBUF 0 B" not in stdout and "MTU 0" not in stdout
    assert "receiver not reported: the run was interrupted before the server sent" in stdout
    rows = csv_out.read_text().splitlines()
    assert len(rows) == 2 and ",sender,client," in rows[1], rows
    # The loopback server went with the client.
    time.sleep(0.5)
    left = subprocess.run(["pgrep", "-f", f"--cache-dir {cache_dir}"], capture_output=True, text=True)
    assert left.stdout.strip() == ""


def test_sigterm_aborts_sessions_and_exits_cleanly(cache_dir):
    s = Server(cache=cache_dir)
    try:
        c = subprocess.Popen([BIN, "client", "--connect", s.addr, "--bytes", "64M", "--buf", "64",
                              "--cache-dir", cache_dir], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        s.wait_for_data_phase(c, at_least=4 * MiB)
        t0 = time.monotonic()
        s.proc.send_signal(signal.SIGTERM)
        assert s.proc.wait(timeout=10) == 0
        # The client learns at once (a reset), not at its 30 s timeout.
        _, stderr = c.communicate(timeout=10)
        assert time.monotonic() - t0 < 5
        assert c.returncode == 1
        assert "failed after" in stderr
        lines = []
        while True:
            try:
                lines.append(s.read_line(timeout=2))
            except AssertionError:
                break
        text = "".join(lines)
        assert "aborted: server stopping on SIGTERM" in text, text
        assert "stopping on SIGTERM: 1 session(s) were in flight, 0 still ending" in text, text
    finally:
        s.stop()


def test_sigterm_on_an_idle_server(cache_dir):
    s = Server(cache=cache_dir)
    try:
        s.proc.send_signal(signal.SIGTERM)
        assert s.proc.wait(timeout=5) == 0
        assert "stopping on SIGTERM: 0 session(s)" in s.read_line()
    finally:
        s.stop()
