"""The README's door, walked (issue #77): in a fresh clone of this repository, its first
measurement and its quick start run as written, and its two-host block runs command by command
between two network namespaces standing in for the two hosts (the server's commands in one, the
client's in the other; `replica` and its address replaced by the server namespace's address,
`-t 10s` shortened to 1 s). The machine's setup itself (`scripts/setup`, `scripts/test`) is what
CI ran before this test."""
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from netns import Link, why_unavailable  # noqa: E402

pytestmark = [pytest.mark.netns, pytest.mark.root, pytest.mark.slow]


def block_after(readme, heading):
    """The first ```sh block after `heading`, as its command lines (comments dropped)."""
    text = readme.split(heading, 1)[1]
    body = re.search(r"```sh\n(.*?)```", text, re.S)[1]
    return [line.split("  #")[0].strip() for line in body.splitlines()
            if line.strip() and not line.startswith("#")]


@pytest.fixture
def clone(tmp_path):
    if not os.access(BIN, os.X_OK):
        pytest.skip(f"{BIN} not built")
    d = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(d)], check=True, timeout=120)
    (d / "iobench").unlink(missing_ok=True)
    (d / "iobench").symlink_to(BIN)  # what scripts/setup leaves: a link to the Release build
    return d


def run_here(clone, argv, timeout=300, prefix=()):
    env = {**os.environ, "HOME": str(clone)}  # the payload cache of this clone's user
    return subprocess.run([*prefix, *argv], cwd=clone, capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def test_the_first_measurement_and_the_quick_start_run_as_written(clone):
    readme = (clone / "README.md").read_text()
    first = [c for c in block_after(readme, "## Install") if c.startswith("./iobench")]
    quick = re.search(r"```\n\$ (\./iobench[^\n]*)\n", readme)[1]
    for command in [*first, quick]:
        p = run_here(clone, shlex.split(command))
        assert p.returncode == 0, (command, p.stderr)
        assert "buf side" in p.stdout, (command, p.stdout)


def test_the_two_host_block_runs_between_two_namespaces(clone):
    why = why_unavailable()
    if why:
        pytest.skip(why)
    commands = block_after((clone / "README.md").read_text(), "## Two hosts")
    assert any("--proto tls" in c for c in commands) and any("server" in c for c in commands)
    link = Link(rate="2gbit")
    server = None
    try:
        ip = link.server_ip
        for command in commands:
            argv = [a.replace("replica.example", ip).replace("replica", ip)
                    .replace("10.0.0.5", ip) for a in shlex.split(command.replace(" > ", " "))]
            if argv[:2] == ["openssl", "rand"]:  # "openssl rand -hex 32 > token"
                token = run_here(clone, argv[:-1]).stdout
                (clone / argv[-1]).write_text(token)
                continue
            if argv[0] == "iobench":
                argv[0] = BIN
            argv = ["1s" if a == "10s" and argv[argv.index(a) - 1] == "-t" else a for a in argv]
            if "server" in argv[:2]:
                if server:
                    server.terminate()
                    server.wait(30)
                server = subprocess.Popen([*link.run_in("server"), *argv], cwd=clone,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True, env={**os.environ, "HOME": str(clone)})
                assert "listening on" in server.stdout.readline(), server.stderr.read()
                continue
            prefix = link.run_in("client") if "client" in argv[:2] else ()
            started = time.monotonic()
            p = run_here(clone, argv, prefix=prefix)
            assert p.returncode == 0, (command, p.stderr)
            if "client" in argv[:2]:
                assert "buf side" in p.stdout and " 64K receiver server" in p.stdout, p.stdout
                print(f"{command}: {time.monotonic() - started:.1f} s")
    finally:
        if server:
            server.terminate()
            server.wait(30)
        link.close()
