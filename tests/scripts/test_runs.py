"""iobench_tools/lib/kernel/runs.py, the one place the Python half spells iobench's command line: each
typed run gives the argv iobench reads (checked by iobench itself), and no other module writes
an iobench flag."""
import ast
import os
import subprocess
from dataclasses import fields
from pathlib import Path

import pytest

from iobench_tools.lib.kernel import runs

# Shares no namespace name, netns lock, package or host-wide check with the other script tests:
# a lane apart (scripts/test).
pytestmark = pytest.mark.apart

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))

# Flags of other programs that an iobench flag also spells, where a module writes them.
OTHERS = {
    ("iobench_tools/commands/conns_scenario.py", f) for f in
    ("--conns", "--budget", "--bytes", "--repeat", "--warmup", "--proto", "--engine",
     "--bytes-spread", "--stagger")  # scripts/sweep's own options
} | {
    ("iobench_tools/commands/host_answer.py", f) for f in
    ("--proto", "--repeat", "--bytes")  # scripts/sweep's own options, as host-answer runs it
} | {
    ("iobench_tools/commands/replication_sync.py", "--proto"),  # its own option, in its error
    ("iobench_tools/lib/valkey/valkeytests.py", "--timeout"),  # Valkey's Tcl test runner's
}


def iobench_flags():
    flags = {"-q"}
    for cls in (runs.ClientRun, runs.ServerRun, runs.WatchRun, runs.PayloadRun):
        flags |= {f.metadata.get("flag") or "--" + f.name.replace("_", "-") for f in fields(cls)
                  if f.name != "extra"}
    return flags


def test_runs_spell_the_command_line_iobench_reads():
    r = runs.ClientRun(proto="tls", buf="4k,16k", bytes="1M", repeat=2, warmup=0, syscalls="off",
                       engine="epoll", cpus="0,1", no_nodelay=True, json="-")
    assert r.argv("ib") == ["ib", "--proto", "tls", "--buf", "4k,16k", "--bytes", "1M",
                            "--engine", "epoll", "--repeat", "2", "--warmup", "0", "--syscalls",
                            "off", "--cpus", "0,1", "--no-nodelay", "--json", "-", "-q"]
    assert r.shown() == ("./iobench --proto tls --buf 4k,16k --bytes 1M --engine epoll --repeat 2 "
                         "--warmup 0 --syscalls off --cpus 0,1 --no-nodelay")
    remote = runs.ClientRun(connect="h:5201", buf="16k", tls_ca="ca.crt", reverse=True)
    assert remote.argv()[:4] == ["iobench", "client", "--connect", "h:5201"]
    assert "--connect" not in remote.argv()[4:] and "--reverse" in remote.argv()
    assert runs.WatchRun(pid=(1, 2), json="w.json").argv() == [
        "iobench", "watch", "--pid", "1", "--pid", "2", "--json", "w.json"]
    assert runs.ServerRun(listen="a:1", quiet=True, stdin_lease=30).argv() == [
        "iobench", "server", "--listen", "a:1", "--quiet", "--stdin-lease", "30"]
    # iobench itself accepts what they spell: a real run of each kind of option.
    p = subprocess.run(r.argv(BIN), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert subprocess.run(runs.PayloadRun(bytes="1M", out=os.devnull, quiet=True).argv(BIN),
                          capture_output=True, timeout=60).returncode == 0


def test_no_other_module_writes_an_iobench_flag():
    flags, found = iobench_flags(), []
    for path in sorted((ROOT / "iobench_tools").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "iobench_tools/lib/kernel/runs.py":
            continue
        tree = ast.parse(path.read_text())
        own = set()  # a script's own options (argparse) are not iobench's
        for node in ast.walk(tree):
            called = getattr(node, "func", None)
            name = getattr(called, "attr", None) or getattr(called, "id", "")
            if isinstance(node, ast.Call) and name in ("add_argument", "error",
                                                       "add_renamed_option"):
                own |= {id(sub) for sub in ast.walk(node)}
        found += [f"{rel}:{n.lineno} {n.value}" for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and n.value in flags and id(n) not in own
                  and (rel, n.value) not in OTHERS]
    assert not found, "iobench flags spelled outside lib/kernel/runs.py:\n" + "\n".join(found)
