"""For the resume tests of the experiment kernel's scenarios: what a scenario's progress.json
says has finished, and a wait until its first run lands."""
import json
import os
import time


def finished(progress):
    """{(cell id, round): ended} of the runs progress.json records as done ({} if unreadable)."""
    try:
        cells = json.loads(progress.read_text())["cells"]
    except (OSError, ValueError, KeyError):
        return {}
    return {(c, r): x["ended"] for c, rounds in cells.items() for r, x in rounds.items()
            if x["status"] == "ok"}


def wait_for_first_run(progress, proc, timeout_s):
    """Polls until a run has landed (or `proc` ended, or the time is up); returns finished()."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        kept = finished(progress)
        if kept:
            return kept
        time.sleep(0.05)
    return finished(progress)


def servers_in(marker):
    """Every live server process (Valkey, Redis) whose working directory's path holds `marker`
    (a server renames itself to "BINARY ADDR:PORT", so its command line does not say where it
    runs; its cwd does, even once that folder is deleted)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            comm = open(f"/proc/{pid}/comm").read().strip()
            cwd = os.readlink(f"/proc/{pid}/cwd")
            state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if comm.startswith(("valkey-server", "redis-server")) and marker in cwd and state != "Z":
            found.append(f"{pid} {comm} in {cwd}")
    return found
