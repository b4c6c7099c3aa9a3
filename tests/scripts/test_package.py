"""scripts/package: the Debian package builds from the build under test, declares what it links,
and its extracted files run a loopback benchmark on their own."""
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

# Builds the Debian package into build/release/package (scripts/package), as the other file marked
# package does: one lane for both (scripts/test).
pytestmark = pytest.mark.package

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))


@pytest.fixture(scope="module")
def deb():
    for tool in ("cpack", "dpkg-deb", "dpkg-shlibdeps"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} not installed (scripts/setup installs cmake, scripts/setup --studies dpkg-dev)")
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


def test_apt_resolves_it_as_apt_install_would(deb):
    # `apt install ./iobench_*.deb` simulated: its Depends are satisfiable from this release's
    # archive (installed or installable), and nothing is changed.
    if not shutil.which("apt-get"):
        pytest.skip("apt-get not installed")
    p = subprocess.run(["apt-get", "install", "-s", "--no-install-recommends", str(deb)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"^Inst iobench ", p.stdout, re.M), p.stdout


def test_the_extracted_package_runs_a_benchmark(deb, tmp_path):
    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    iobench = root / "usr" / "bin" / "iobench"
    assert (root / "usr" / "share" / "man" / "man1" / "iobench.1").is_file()
    assert os.access(root / "usr" / "share" / "iobench" / "tls" / "make-certs", os.X_OK)
    assert os.access(root / "usr" / "bin" / "iobench-floor", os.X_OK)
    # What a fleet's primary runs, beside make-certs as in a checkout.
    for script in ("sweep", "recommend", "fanout-scenario"):
        path = root / "usr" / "share" / "iobench" / "scripts" / script
        # Every module it imports is in the package: --help imports them all.
        h = subprocess.run([str(path), "--help"], capture_output=True, text=True, timeout=60)
        assert h.returncode == 0 and "usage" in h.stdout, (script, h.stderr)
    assert (root / "etc" / "default" / "iobench").is_file()
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


# --- the server as a service (packaging/systemd, /etc/default/iobench) ------------------------

def unit_settings(path):
    """[Service] key -> list of values, as systemd reads a unit (comments and blanks skipped)."""
    out, section = {}, None
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
        elif section == "Service":
            key, _, value = line.partition("=")
            out.setdefault(key, []).append(value)
    return out


def default_args(root):
    """IOBENCH_SERVER_ARGS as /etc/default/iobench sets it (a shell assignment)."""
    p = subprocess.run(["sh", "-c", f". {root}/etc/default/iobench && printf %s "
                                    "\"$IOBENCH_SERVER_ARGS\""], capture_output=True, text=True,
                       check=True)
    return p.stdout.split()


@pytest.fixture(scope="module")
def root(deb, tmp_path_factory):
    r = tmp_path_factory.mktemp("pkgroot")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(r)], check=True)
    os.chmod(r, 0o755)  # the unprivileged server below runs the extracted binary
    return r


def test_the_units_are_valid_and_hardened(root, tmp_path):
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze not installed")
    units = root / "usr" / "lib" / "systemd" / "system"
    # verify checks ExecStart's binary exists: the extracted one stands for /usr/bin/iobench.
    for name in ("iobench.service", "iobench.socket"):
        text = (units / name).read_text().replace("/usr/bin/iobench", f"{root}/usr/bin/iobench")
        (tmp_path / name).write_text(text)
    p = subprocess.run(["systemd-analyze", "verify", "--man=no", str(tmp_path / "iobench.service"),
                        str(tmp_path / "iobench.socket")], capture_output=True, text=True)
    assert p.returncode == 0 and p.stderr.strip() == "", p.stderr  # unknown keys only warn
    s = unit_settings(units / "iobench.service")
    assert s["User"] == ["iobench"] and s["NoNewPrivileges"] == ["yes"]
    assert s["ProtectSystem"] == ["strict"] and s["CapabilityBoundingSet"] == [""]
    sock = (units / "iobench.socket").read_text()
    assert "ListenStream=5210" in sock and "ListenStream=5211" in sock
    p = subprocess.run(["systemd-analyze", "security", "--offline=yes",
                        str(tmp_path / "iobench.service")], capture_output=True, text=True)
    if p.returncode == 0 and "exposure level" in p.stdout:
        level = float(re.search(r"exposure level for \S+: ([\d.]+)", p.stdout).group(1))
        assert level < 3.0, p.stdout.splitlines()[-1]


def unprivileged(caps):
    """setpriv: nobody, no supplementary groups, with only these capabilities (ambient)."""
    spec = ",".join(f"+{c.lower().removeprefix('cap_')}" for c in caps) or "-all"
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
            f"--inh-caps={spec}", f"--ambient-caps={spec}",
            *([] if caps else ["--bounding-set=-all"])]


def serve_and_count(root, tmp_path, caps, server_args, client_args, port=5210):
    """Runs `iobench server SERVER_ARGS` as the unit does (unprivileged, with `caps`, its cache
    where the unit's Environment puts it) in a private network namespace, so the unit's own
    --listen 0.0.0.0:5210 binds here; one client run; returns (client's JSON, server log)."""
    # nobody cannot reach pytest's 0700 directories: the binary and the cache go where it can.
    tmp_path.mkdir(parents=True, exist_ok=True)
    shared = Path(tempfile.mkdtemp(prefix="iobench-unit-"))
    shared.chmod(0o755)
    iobench = shared / "iobench"
    shutil.copy2(root / "usr" / "bin" / "iobench", iobench)
    cache = shared / "cache"
    cache.mkdir(mode=0o777)
    cache.chmod(0o777)  # nobody's, as CacheDirectory= makes /var/cache/iobench the user's
    server = shlex.join([*unprivileged(caps), "env", f"XDG_CACHE_HOME={cache}", str(iobench),
                         "server", *server_args])
    client = shlex.join([str(iobench), "client", "--connect", f"127.0.0.1:{port}", "--bytes", "2M",
                         "--json", str(tmp_path / "run.json"), "-q", *client_args])
    script = (f"ip link set lo up && {server} > {tmp_path}/server.log 2>&1 & srv=$!; "
              f"for i in $(seq 50); do grep -q listening {tmp_path}/server.log && break; "
              f"sleep 0.1; done; {client}; rc=$?; kill $srv; wait $srv; exit $rc")
    try:
        p = subprocess.run(["unshare", "--net", "sh", "-c", script], capture_output=True,
                           text=True, timeout=120)
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    log = (tmp_path / "server.log").read_text()
    assert p.returncode == 0, p.stderr + log
    return json.loads((tmp_path / "run.json").read_text()), log


needs_root = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                reason="needs root (a network namespace, setpriv)")


@needs_root
def test_the_units_command_serves_unprivileged_with_its_default_options(root, tmp_path):
    s = unit_settings(root / "usr" / "lib" / "systemd" / "system" / "iobench.service")
    (start,) = s["ExecStart"]
    assert start == "/usr/bin/iobench server $IOBENCH_SERVER_ARGS"
    assert "XDG_CACHE_HOME=/var/cache" in s["Environment"] and s["CacheDirectory"] == ["iobench"]
    args = default_args(root)
    # TCP on 5210 and, by default, TLS on 5211 with postinst's certificate.
    assert args[:4] == ["--listen", "0.0.0.0:5210", "--tls-listen", "0.0.0.0:5211"], args
    assert "/etc/iobench/tls/server.crt" in args and "/etc/iobench/tls/server.key" in args
    token = subprocess.run(["sh", "-c", f". {root}/etc/default/iobench && printf %s "
                            "\"$IOBENCH_AUTH_TOKEN\""], capture_output=True, text=True).stdout
    assert token == "@/etc/iobench/auth-token", "the unit must require postinst's token"
    # postinst's certificate stands in at a path the unprivileged server can read.
    certs = Path(tempfile.mkdtemp(prefix="iobench-unit-certs-"))
    try:
        subprocess.run([str(root / "usr" / "share" / "iobench" / "tls" / "make-certs"),
                        str(certs)], check=True, capture_output=True)
        for path in [certs, *certs.iterdir()]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        args = [str(certs / a.rsplit("/", 1)[1]) if a.startswith("/etc/iobench/tls/") else a
                for a in args]
        doc, log = serve_and_count(root, tmp_path, [], args, ["--syscalls", "taskio"])
        tls, _ = serve_and_count(root, tmp_path / "tls", [], args,
                                 ["--proto", "tls", "--tls-ca", str(certs / "ca.crt")], port=5211)
    finally:
        shutil.rmtree(certs, ignore_errors=True)
    run = doc["results"][0]["runs"][0]
    assert run["receiver"]["bytes"] == 2 << 20 and run["receiver"]["syscalls"]["read"] > 0
    assert "listening on 0.0.0.0:5210 (tcp) and 0.0.0.0:5211 (tls" in log, log
    assert "ok: received" in log, log
    assert tls["results"][0]["runs"][0]["sender"]["tls"]["verified"] is True


@needs_root
def test_the_bpf_drop_in_grants_what_the_ebpf_counter_needs(root, tmp_path):
    conf = unit_settings(root / "usr" / "share" / "iobench" / "systemd" / "bpf.conf")
    caps = conf["AmbientCapabilities"][0].split()
    assert conf["CapabilityBoundingSet"][0].split() == caps == ["CAP_BPF", "CAP_PERFMON"]
    args = ["--listen", "0.0.0.0:5210", "--kernel-counter", "bpf"]
    with_caps, _ = serve_and_count(root, tmp_path / "with", caps, args, ["--syscalls", "bpf"])
    syscalls = with_caps["results"][0]["runs"][0]["receiver"]["syscalls"]
    if "bpf" not in syscalls.get("note", "") and syscalls["source"] != "bpf":
        pytest.skip(f"eBPF counting unavailable on this kernel even as root: {syscalls}")
    assert syscalls["source"] == "bpf", syscalls
    without, _ = serve_and_count(root, tmp_path / "without", [], args, ["--syscalls", "bpf"])
    syscalls = without["results"][0]["runs"][0]["receiver"]["syscalls"]
    assert syscalls["source"] != "bpf" and "CAP_BPF and CAP_PERFMON" in syscalls["note"], syscalls


@needs_root
def test_postinst_makes_the_service_user_once(deb, tmp_path):
    # Run against a copy of /etc bind-mounted over it in a private mount namespace: the user and
    # /etc/iobench/tls land in the copy, not on this machine.
    control = tmp_path / "control"
    subprocess.run(["dpkg-deb", "-e", str(deb), str(control)], check=True)
    etc = tmp_path / "etc"
    subprocess.run(["cp", "-a", "/etc", str(etc)], check=True)
    script = (f"mount --bind {etc} /etc && export IOBENCH_MAKE_CERTS={ROOT}/tls/make-certs && "
              f"sh {control}/postinst configure && "
              f"cp /etc/iobench/auth-token {tmp_path}/first && "
              f"sh {control}/postinst configure && getent passwd iobench && "
              f"cmp /etc/iobench/auth-token {tmp_path}/first && "
              f"stat -c '%a %U %G' /etc/iobench/auth-token && cat /etc/iobench/auth-token && "
              f"stat -c '%a %U %G' /etc/iobench/tls && "
              f"openssl verify -CAfile /etc/iobench/tls/ca.crt /etc/iobench/tls/server.crt && "
              f"ls /etc/iobench/tls && stat -c '%a %U %G' /etc/iobench/tls/server.key")
    p = subprocess.run(["unshare", "--mount", "sh", "-c", script], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.strip().splitlines()
    user, token_mode, token, mode, verified, *files, key_mode = lines[-9:]
    # The TLS port's certificate, signed by a CA whose key is gone; its key the service's only.
    assert verified == "/etc/iobench/tls/server.crt: OK", lines
    assert files == ["ca.crt", "server.crt", "server.key"], lines
    assert key_mode == "640 root iobench", lines
    assert user.startswith("iobench:") and user.endswith(":/nonexistent:/usr/sbin/nologin"), user
    assert mode == "750 root iobench", mode
    # A token made once (kept by the second configure), readable by the service's group only.
    assert token_mode == "640 root iobench" and re.fullmatch(r"[0-9a-f]{64}", token), token
    assert "iobench:" not in Path("/etc/passwd").read_text(), "postinst reached the real /etc"
