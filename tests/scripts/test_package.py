"""scripts/package: the Debian package builds from the build under test, declares what it links,
and its extracted files run a loopback benchmark on their own."""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))


@pytest.fixture(scope="module")
def deb():
    for tool in ("cpack", "dpkg-deb", "dpkg-shlibdeps"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} not installed (scripts/setup installs cmake and dpkg-dev)")
    build = Path(BIN).resolve().parent
    p = subprocess.run([str(ROOT / "scripts" / "package"), str(build)], capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stderr
    path = Path(p.stdout.strip().splitlines()[-1])
    assert path.is_file() and path.name.startswith("iobench_") and path.suffix == ".deb", p.stdout
    return path


def field(deb, name):
    return subprocess.run(["dpkg-deb", "-f", str(deb), name], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_the_package_names_its_version_and_what_it_links(deb):
    assert field(deb, "Package") == "iobench"
    version = subprocess.run([BIN, "--version"], capture_output=True, text=True,
                             check=True).stdout
    m = re.match(r"iobench (\S+) \(commit (\w+)", version)
    assert m and field(deb, "Version") == f"{m.group(1)}+git{m.group(2)}", version
    depends = field(deb, "Depends")
    # From dpkg-shlibdeps: the libraries the binary links, each with its package's name.
    for lib in ("libssl3", "liburing2", "libzstd1", "libxxhash0", "libfmt9", "openssl"):
        assert lib in depends, depends


def test_the_extracted_package_runs_a_benchmark(deb, tmp_path):
    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    iobench = root / "usr" / "bin" / "iobench"
    assert (root / "usr" / "share" / "man" / "man1" / "iobench.1").is_file()
    assert os.access(root / "usr" / "share" / "iobench" / "tls" / "make-certs", os.X_OK)
    assert os.access(root / "usr" / "bin" / "iobench-floor", os.X_OK)
    v = subprocess.run([str(iobench), "--version"], capture_output=True, text=True, check=True)
    assert v.stdout.startswith("iobench ")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    for proto in ("tcp", "tls"):
        p = subprocess.run([str(iobench), "--proto", proto, "--bytes", "1M", "--buf", "16k",
                            "--syscalls", "off", "--json", "-", "-q"], capture_output=True,
                           text=True, timeout=120, env=env)
        assert p.returncode == 0, p.stderr
        run = json.loads(p.stdout)["results"][0]["runs"][0]
        assert run["receiver"]["bytes"] == 1 << 20
        assert run["sender"]["xxh3"] == run["receiver"]["xxh3"]
