"""The fleet playbook end to end (fleet/playbook.yml through scripts/fleet) on an emulated fleet:
six namespace hosts with an sshd each stand in for EC2 instances, plus one host that cannot be
reached. Pairs a and b sweep in full; c's replica is unreachable; d's server dies mid-sweep.
The package is unpacked per host (the hosts share this filesystem) and the servers run as
processes (no systemd as PID 1 here)."""
import glob
import json
import re
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

# Builds the Debian package into build/release/package (scripts/package), as the other file marked
# package does: one lane for both (scripts/test).
pytestmark = pytest.mark.package

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))
PLAYBOOK = ROOT / "build" / "ansible" / "bin" / "ansible-playbook"
from emulated_hosts import emulated_hosts, why_not


def why_no_fleet():
    if why_not():
        return why_not()
    if not PLAYBOOK.exists():
        return "no ansible-core in build/ansible (scripts/install-ansible could not reach PyPI)"
    for tool in ("cpack", "dpkg-deb", "dpkg-shlibdeps"):
        if not shutil.which(tool):
            return f"{tool} not installed (scripts/setup installs cmake, scripts/setup --studies dpkg-dev)"
    return None


HOSTS = ["p1", "r1", "p2", "r2", "p3", "r3", "p4"]
PAIRS = [
    {"name": "a", "instance_type": "emu.small", "primary": "p1", "replicas": ["r1"]},
    {"name": "b", "instance_type": "emu.large", "primary": "p2", "replicas": ["r2"]},
    # r1 leads c while it serves a: c must wait for the next wave.
    {"name": "c", "instance_type": "emu.small", "primary": "r1", "replicas": ["ghost"]},
    {"name": "d", "instance_type": "emu.large", "primary": "p3", "replicas": ["r3"]},
    # One primary, two replicas: the one-writer scenario; shares r1 with a and c, r2 with b.
    {"name": "e", "instance_type": "emu.small", "primary": "p4", "replicas": ["r1", "r2"]},
]
SWEEP = "--proto tcp,tls --bufs 4k,64k --bytes 1M --repeat 3 --warmup 0 --retries 0"
FANOUT = "--bufs 16k,64k --shapes connset --proto tcp,tls --bytes 1M --rounds 2"


def inventory(tmp_path, addresses, config):
    hosts = {}
    for name, address in zip(HOSTS, addresses):
        base = tmp_path / "hosts" / name
        hosts[name] = {"ansible_host": address, "iobench_install": "unpack",
                       "iobench_prefix": str(base / "root"), "iobench_work": str(base / "work"),
                       "iobench_service": "process"}
    # Nothing listens on port 1: ssh is refused at once, as with a stopped instance.
    hosts["ghost"] = {"ansible_host": "127.0.0.1", "ansible_port": 1}
    doc = {"all": {"hosts": hosts, "vars": {
        "ansible_user": "root", "ansible_ssh_common_args": f"-F {config}",
        "ansible_python_interpreter": "/usr/bin/python3",
        "fleet_pairs": PAIRS, "fleet_sweep_args": SWEEP, "fleet_fanout_args": FANOUT}}}
    path = tmp_path / "inventory.yml"
    path.write_text(json.dumps(doc, indent=2))  # JSON is YAML
    return path


def secrets_under(folder):
    """Files under `folder` holding a private key or a token."""
    return [str(f) for f in Path(folder).rglob("*") if f.is_file() and (
        f.suffix == ".key" or f.name == "token" or f.name.endswith("-token")
        or b"PRIVATE KEY" in f.read_bytes())]


def kill_after_first_cell(tmp_path, stop):
    """d's server dies once d's first run has landed: its sweep goes on, its cells fail."""
    # Each host's files of this run are in a private folder of its work folder: work/run.*.
    cells = tmp_path / "hosts" / "p3" / "work" / "run.*" / "results" / "d" / "cells"
    pid_files = str(tmp_path / "hosts" / "r3" / "work" / "run.*" / "server.pid")
    while not stop.is_set():
        if glob.glob(str(cells / "*.r1.json")) and glob.glob(pid_files):
            os.kill(int(Path(glob.glob(pid_files)[0]).read_text()), signal.SIGKILL)
            return
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.netns
@pytest.mark.root
@pytest.mark.skipif(why_no_fleet() is not None, reason=str(why_no_fleet()))
def test_the_playbook_sweeps_the_pairs_and_recommends_across_them(tmp_path):
    build = Path(BIN).resolve().parent
    deb = subprocess.run([str(ROOT / "scripts" / "package"), str(build)], capture_output=True,
                         text=True, timeout=900, check=True).stdout.split()[-1]
    results = tmp_path / "results"
    with emulated_hosts(tmp_path, len(HOSTS)) as (addresses, config):
        stop = threading.Event()
        killer = threading.Thread(target=kill_after_first_cell, args=(tmp_path, stop))
        killer.start()
        try:
            p = subprocess.run([str(ROOT / "scripts" / "fleet"), str(inventory(
                tmp_path, addresses, config)), "--name", "emu", "--deb", deb, "--results",
                str(results)], capture_output=True, text=True, timeout=900)
        finally:
            stop.set()
            killer.join()
        left = subprocess.run(["pgrep", "-a", "-f", f"{tmp_path}/hosts/.*iobench server"],
                              capture_output=True, text=True).stdout
    (tmp_path / "ansible.log").write_text(p.stdout + p.stderr)
    log = p.stdout[-6000:] + p.stderr[-2000:]
    # ansible-playbook exits 4 when a host was unreachable (ghost); nothing may fail otherwise.
    assert p.returncode in (0, 4), log
    assert left == "", f"the playbook must stop the servers it started: {left}\n{log}"
    fleet = results / "emu"
    doc = json.loads((fleet / "fleet.json").read_text())
    assert doc["waves"] == [["a", "b", "d"], ["c"], ["e"]], doc["waves"]
    record = {n: json.loads((fleet / n / "pair.json").read_text()) for n in "abcde"}
    for n in "ab":
        assert record[n]["status"] == "ok", (record[n], log)
        m = json.loads((fleet / n / "manifest.json").read_text())
        # Four cells and the A/A control's twin (the pair's noise floor).
        assert [c["status"] for c in m["cells"]] == ["ok"] * 5, m["cells"]
        assert m["cells"][-1]["id"].endswith("-aa"), m["cells"]
        assert m["where"] == f"{record[n]['replica_addresses'][0]}:5210"
        tls = json.loads((fleet / n / "cells" / "tls-blocking-c1-4k-cpus0-1.json").read_text())
        assert tls["results"][0]["runs"][0]["sender"]["tls"]["verified"] is True
        assert (fleet / n / "recommendation.md").exists()
    # The run's servers took only its own sweeps (a fresh token), and no secret is left: none in
    # the results (each replica's CA certificate only), in git's view of them, or on the hosts;
    # the controller's private folder is gone.
    for host in ("r1", "r2"):
        run_dirs = glob.glob(str(tmp_path / "hosts" / host / "work" / "run.*"))
        assert len(run_dirs) == 1 and os.stat(run_dirs[0]).st_mode & 0o077 == 0, run_dirs
        assert os.stat(tmp_path / "hosts" / host / "work").st_mode & 0o777 == 0o700
        served = (Path(run_dirs[0]) / "server.log").read_text()
        assert "clients must present the auth token" in served, served
    assert sorted(str(p.relative_to(fleet / "certs")) for p in (fleet / "certs").rglob("*")
                  if p.is_file()) == [f"{r}/ca.crt" for r in ("ghost", "r1", "r2", "r3")]
    assert not secrets_under(fleet)
    for host in HOSTS:
        assert not secrets_under(tmp_path / "hosts" / host), host
    assert "iobench-fleet-secrets." not in " ".join(os.listdir(tempfile.gettempdir()))
    assert "no_log" not in p.stdout and "PRIVATE KEY" not in p.stdout + p.stderr
    assert record["c"]["status"] == "not run" and "ghost" in record["c"]["error"], record["c"]
    assert not (fleet / "c" / "manifest.json").exists()
    # d: the runs before its server died are kept; the cells after it are failed, not lost.
    assert record["d"]["status"] == "partial", record["d"]
    cells = json.loads((fleet / "d" / "manifest.json").read_text())["cells"]
    assert any(c["status"] == "failed" for c in cells), cells
    assert glob.glob(str(fleet / "d" / "cells" / "*.r1.json")), "d's first run must be kept"
    # e: one writer to r1 and r2, TCP and TLS, each server checked against its own CA.
    assert record["e"]["status"] == "ok", (record["e"], log)
    fanout = json.loads((fleet / "e" / "fanout.json").read_text())
    assert fanout["where"] == "servers " + ",".join(
        f"{a}:5210" for a in record["e"]["replica_addresses"]), fanout["where"]
    assert all(len(runs) == 2 for runs in fanout["cells"].values()), fanout["cells"]
    assert "one writer" in (fleet / "e" / "recommendation.md").read_text().lower()
    text = (fleet / "recommendation.md").read_text()
    assert "## Per instance type" in text and "## Across the fleet" in text, text
    assert "### emu.small: a, c, e" in text and "### emu.large: b, d" in text, text
    assert "## One primary, several replicas" in text and "- e: connset, tls:" in text, text
    assert "not run: replica ghost" in text and "| d | emu.large | p3 → r3 | partial" in text
    # Pairs are hosts: a size is named for a group only when every pair names it, never pooled.
    assert "the pairs do not name one size" in text or "every pair's own statement names" \
        in text, text
    assert "pooled" not in text.split("## Per instance type")[1], text


# --- the playbook's pieces, without hosts --------------------------------------------------

sys.path.insert(0, str(ROOT / "fleet" / "filter_plugins"))
import fleet as fleet_filters  # noqa: E402


def pair(name, primary, replica):
    return {"name": name, "instance_type": "t", "primary": primary, "replicas": [replica]}


def test_pairs_sharing_a_host_go_to_later_waves():
    pairs = [pair("a", "h1", "h2"), pair("b", "h3", "h4"), pair("c", "h2", "h5"),
             pair("d", "h5", "h6"), pair("e", "h7", "h1")]
    waves = fleet_filters.fleet_waves(pairs)
    assert [[p["name"] for p in w] for w in waves] == [["a", "b", "d"], ["c", "e"]]
    for w in waves:  # no host twice in a wave
        hosts = [h for p in w for h in (p["primary"], *p["replicas"])]
        assert len(hosts) == len(set(hosts))
    assert fleet_filters.fleet_pair_of(waves, 1, "h7")["name"] == "e"
    assert fleet_filters.fleet_pair_of(waves, 0, "h7") == {}
    assert fleet_filters.fleet_servers(pairs) == ["h2", "h4", "h5", "h6", "h1"]


@pytest.mark.parametrize("pairs,error", [
    ([], "expected a list of pairs"),
    ([pair("a b", "h1", "h2")], "invalid or repeated pair name 'a b'"),
    ([pair("a", "h1", "h2"), pair("a", "h3", "h4")], "invalid or repeated pair name 'a'"),
    ([pair("a", "h1", "nohost")], "'nohost' is not in the inventory"),
    ([pair("a", "h1", "h1")], "the primary is its own replica"),
    ([dict(pair("a", "h1", "h2"), replicas=["h2", "h2"])], "replicas must list distinct hosts"),
    ([{"name": "a", "primary": "h1", "replicas": ["h2"]}], "pair 'a' has no instance_type"),
])
def test_bad_pairs_are_named(pairs, error):
    with pytest.raises(fleet_filters.FilterError, match=re.escape(error)):
        fleet_filters.fleet_check(pairs, ["h1", "h2", "h3", "h4"])


@pytest.mark.skipif(not PLAYBOOK.exists(), reason="no ansible-core in build/ansible")
def test_the_playbook_and_its_tasks_parse(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "build" / "ansible"),
               ANSIBLE_CONFIG=str(ROOT / "fleet" / "ansible.cfg"))
    p = subprocess.run(["/usr/bin/python3", str(PLAYBOOK), "--syntax-check", "-i",
                        str(ROOT / "fleet" / "inventory.example.yml"),
                        str(ROOT / "fleet" / "playbook.yml")], capture_output=True, text=True,
                       env=env, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    import yaml
    for f in (ROOT / "fleet" / "tasks").glob("*.yml"):  # included at run time: not checked above
        assert isinstance(yaml.safe_load(f.read_text()), list), f


def test_fleet_script_refuses_bad_arguments(tmp_path):
    fleet = str(ROOT / "scripts" / "fleet")
    inv = ROOT / "fleet" / "inventory.example.yml"
    p = subprocess.run([fleet, str(tmp_path / "none.yml"), "--name", "x"], capture_output=True,
                       text=True)
    assert p.returncode == 2 and "no inventory at" in p.stderr, p.stderr
    p = subprocess.run([fleet, str(inv), "--name", "a/b"], capture_output=True, text=True)
    assert p.returncode == 2 and "invalid --name 'a/b'" in p.stderr, p.stderr
    p = subprocess.run([fleet, str(inv), "--name", "x", "--deb", str(tmp_path / "no.deb")],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "no package at" in p.stderr, p.stderr
    p = subprocess.run([fleet, str(inv), "--stop", "--name", "x"], capture_output=True, text=True)
    assert p.returncode == 2 and "--stop takes no --name" in p.stderr, p.stderr


# --- the work folder root installs from -------------------------------------------------

INSTALL_ONLY = """
- hosts: localhost
  connection: local
  gather_facts: false
  vars: {prefix: "", work: "%(work)s", bin: /bin/true, fleet_deb: /nonexistent.deb,
         ansible_python_interpreter: /usr/bin/python3%(extra)s}
  tasks:
    - ansible.builtin.set_fact:
        fleet_deb_arch: {stdout: "%(arch)s"}
    - ansible.builtin.include_tasks: %(tasks)s/install.yml
    - ansible.builtin.copy:
        content: "{{ fleet_failed | default('') }}"
        dest: "%(out)s"
"""


def ansible_env():
    return dict(os.environ, PYTHONPATH=str(ROOT / "build" / "ansible"),
                ANSIBLE_CONFIG=str(ROOT / "fleet" / "ansible.cfg"))


def install_only(tmp_path, work, extra=""):
    """fleet/tasks/install.yml alone on this host with `work` as iobench_work: what it recorded
    as failed (fleet_failed), the play itself succeeding."""
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                          check=True).stdout.strip()
    out = tmp_path / "failed.txt"
    play = tmp_path / "play.yml"
    play.write_text(INSTALL_ONLY % {"work": work, "arch": arch, "tasks": ROOT / "fleet" / "tasks",
                                    "out": out, "extra": extra})
    p = subprocess.run(["/usr/bin/python3", str(PLAYBOOK), "-i", "localhost,", str(play)],
                       capture_output=True, text=True, env=ansible_env(), timeout=120)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    return out.read_text()


@pytest.mark.root
@pytest.mark.skipif(not PLAYBOOK.exists(), reason="no ansible-core in build/ansible")
@pytest.mark.parametrize("made", ["by-another-user", "open-to-others", "a-symlink"])
def test_a_work_folder_another_user_could_write_is_refused(tmp_path, made):
    """iobench_work made first by someone else (nobody, uid 65534), or ours but writable by
    others, or a symlink: the install refuses it in one line before anything is copied into it,
    and leaves it as it was."""
    work = tmp_path / "work"
    if made == "a-symlink":
        (tmp_path / "elsewhere").mkdir()
        work.symlink_to(tmp_path / "elsewhere")
    else:
        work.mkdir()
        os.chmod(work, 0o777)
        if made == "by-another-user":
            os.chown(work, 65534, 65534)
    before = os.lstat(work)
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                          check=True).stdout.strip()
    out = tmp_path / "failed.txt"
    play = tmp_path / "play.yml"
    failed = install_only(tmp_path, work)
    assert f"iobench_work {work} is " in failed and "refused" in failed, failed
    assert ("a symlink" if made == "a-symlink" else
            "owned by uid 65534" if made == "by-another-user" else "owned by uid 0") in failed
    after = os.lstat(work)
    assert (after.st_uid, after.st_mode) == (before.st_uid, before.st_mode)
    assert not os.listdir(work), os.listdir(work)


@pytest.mark.root
@pytest.mark.skipif(not PLAYBOOK.exists(), reason="no ansible-core in build/ansible")
def test_a_link_swapped_in_after_the_check_is_refused(tmp_path):
    """Another user wins the window between the check and the creation (the play's test hook
    makes the link there): the creation neither follows it nor changes its target, and the
    install stops in one line. Ansible's file module, as the play used it before, followed it
    and made the target root's, 0700."""
    work, target = tmp_path / "work", tmp_path / "elsewhere"
    target.mkdir()
    os.chmod(target, 0o755)
    os.chown(target, 65534, 65534)
    failed = install_only(tmp_path, work, f", fleet_test_link_after_check: {target}")
    assert "install on localhost" in failed and "File exists" in failed, failed
    assert os.path.islink(work)
    st = os.stat(target)
    assert (st.st_uid, st.st_mode & 0o777) == (65534, 0o755), (st.st_uid, oct(st.st_mode))
    assert not os.listdir(target)


def test_the_default_work_folder_is_roots_own():
    play = (ROOT / "fleet" / "playbook.yml").read_text()
    assert "default('/var/lib/iobench-fleet')" in play
    assert "/var/tmp" not in play and "/var/tmp" not in (ROOT / "fleet" / "stop.yml").read_text()


@pytest.mark.root
@pytest.mark.skipif(not PLAYBOOK.exists(), reason="no ansible-core in build/ansible")
def test_the_stop_play_cleans_up_after_an_interrupted_run(tmp_path):
    """What an interrupted run leaves on a host (its server running from a run.* folder, the
    token and key under the prefix) is stopped and removed by scripts/fleet INVENTORY --stop
    alone; a process that is not the installed iobench is not signalled."""
    prefix, work = tmp_path / "root", tmp_path / "work"
    (prefix / "usr" / "bin").mkdir(parents=True)
    (prefix / "usr" / "bin" / "iobench").symlink_to(Path(BIN).resolve())
    tls = prefix / "etc" / "iobench" / "tls"
    tls.mkdir(parents=True)
    for f in ("token", "server.key", "server.crt"):
        (tls / f).write_text("secret\n")
    run_dir = work / "run.abc123"
    run_dir.mkdir(parents=True)
    server = subprocess.Popen([str(prefix / "usr" / "bin" / "iobench"), "server", "--listen",
                               "127.0.0.1:0", "-q"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    other = subprocess.Popen(["sleep", "60"])
    (run_dir / "server.pid").write_text(f"{server.pid}\n")
    (work / "run.def456").mkdir()
    (work / "run.def456" / "server.pid").write_text(f"{other.pid}\n")  # not iobench
    inv = tmp_path / "inventory.json"
    inv.write_text(json.dumps({"all": {"hosts": {"replica": {
        "ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3",
        "iobench_service": "process", "iobench_prefix": str(prefix),
        "iobench_work": str(work)}}}}))
    try:
        p = subprocess.run([str(ROOT / "scripts" / "fleet"), str(inv), "--stop"],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
        assert server.wait(timeout=10) is not None  # stopped
        assert other.poll() is None, "a process that is not iobench was signalled"
        assert not (tls / "token").exists() and not (tls / "server.key").exists()
        assert (tls / "server.crt").exists()
    finally:
        for proc in (server, other):
            proc.kill()
            proc.wait()
