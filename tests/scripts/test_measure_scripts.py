"""The measuring scripts behind the README's tables, on tiny runs: they run, print the table's
shape with numbers in it, and refuse bad arguments."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
BIN = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))


def script(name, *args):
    return subprocess.run([str(SCRIPTS / name), "--iobench", BIN, *args], capture_output=True,
                          text=True, timeout=300)


def test_counting_overhead_prints_on_off_per_size():
    # task I/O accounting needs no privilege, so this runs anywhere.
    p = script("counting-overhead", "--pairs", "1", "--bytes", "1M", "--bufs", "4k,16k",
               "--counter", "taskio")
    assert p.returncode == 0, p.stderr
    assert "counter taskio" in p.stdout
    rows = [l for l in p.stdout.splitlines() if re.match(r"\s+(4k|16k) ", l)]
    assert len(rows) == 2, p.stdout
    for row in rows:
        nums = [float(x) for x in re.findall(r"\d+\.\d+", row)]
        assert len(nums) == 7 and all(n > 0 for n in nums), row  # 2 x (median, min, max), ratio


def test_counting_overhead_refuses_an_unknown_counter():
    p = script("counting-overhead", "--counter", "ebpf")
    assert p.returncode == 2 and "invalid choice: 'ebpf'" in p.stderr


def test_engines_compare_prints_a_row_per_size_and_setup(tmp_path):
    p = script("engines-compare", "--rounds", "1", "--bufs", "4k,16k", "--bytes", "1M",
               "--out", str(tmp_path), "blocking=--engine blocking", "epoll=--engine epoll")
    assert p.returncode == 0, p.stderr
    table, against = p.stdout.split("\n\n")
    rows = [l for l in table.splitlines() if l.startswith("| 4K") or l.startswith("| 16K")]
    assert [r.split("|")[2].strip() for r in rows] == ["blocking", "epoll", "blocking", "epoll"]
    # Against the first set-up: one round pairs nothing, and says so.
    assert [l.split("|")[1:3] for l in against.splitlines()[2:]] == [
        [" 4K ", " epoll "], [" 16K ", " epoll "]] and "unpaired" in against, against
    # syscalls/GiB: the kernel's (or iobench's) counts, never empty: 4K is >= 2 x 256 K calls/GiB.
    assert float(rows[0].split("|")[4].strip().removesuffix(" k")) >= 500, rows[0]
    assert sorted(f.name for f in tmp_path.iterdir()) == ["blocking-round0.json",
                                                          "epoll-round0.json", "progress.json"]
    # The experiment kernel ran it: the same command finds every run done and runs none.
    again = script("engines-compare", "--rounds", "1", "--bufs", "4k,16k", "--bytes", "1M",
                   "--out", str(tmp_path), "blocking=--engine blocking", "epoll=--engine epoll")
    assert again.returncode == 0 and "resuming: 2 run(s) already done" in again.stderr
    assert again.stdout == p.stdout


def test_engines_compare_sets_two_builds_side_by_side_paired(tmp_path):
    # One build under two labels (an A/A of the data path): the same work, and a ratio whose
    # interval is printed beside its verdict.
    p = script("engines-compare", "--rounds", "5", "--bufs", "16k", "--bytes", "1M",
               "--binary", f"after={BIN}", "before=--engine blocking", "after=--engine blocking")
    assert p.returncode == 0, p.stderr
    row = next(l for l in p.stdout.splitlines() if l.startswith("| 16K | after | x"))
    # ... and the rounds a ±5% interval would need at the spread these rounds show.
    assert re.search(r"x\d\.\d{3} \[\d\.\d{3}-\d\.\d{3}\] paired over 5 rounds: "
                     r"(parity within noise|cheaper|dearer) \| yes \| \d+ \(sd \d\.\d{3}\) \|$",
                     row), row
    sizes = next(l for l in p.stdout.splitlines() if l.startswith("| 16K | before |"))
    assert re.search(r"\| \d+ \[\d+-\d+\] \|$", sizes), sizes  # the receiver's sleeps/GiB
    bad = script("engines-compare", "--binary", f"other={BIN}", "a=--engine blocking")
    assert bad.returncode != 0 and "invalid --binary 'other=" in bad.stderr
    missing = script("engines-compare", "--binary", f"a={tmp_path}/none", "a=--engine blocking")
    assert missing.returncode != 0 and f"no iobench at {tmp_path}/none" in missing.stderr


def test_engines_compare_does_not_retry_a_refused_setup():
    p = script("engines-compare", "--rounds", "1", "--bytes", "1M", "bad=--engine bogus")
    assert p.returncode == 1, p.stderr
    assert "bad round 1 attempt 1 failed: iobench failed (exit 2)" in p.stderr
    assert "attempt 2" not in p.stderr and "engines-compare: failed: bad round 0" in p.stderr


def test_engines_compare_refuses_a_setup_without_label():
    p = script("engines-compare", "--rounds", "1", "--engine uring")
    assert p.returncode != 0 and "invalid set-up '--engine uring'" in p.stderr



def cgroup_cpu_or_skip():
    """iobench_tools.lib.kernel.cgroup_cpu, or a skip naming why this host has no usable cgroup."""
    from iobench_tools.lib.kernel import cgroup_cpu
    try:
        cgroup_cpu.cgroup_root()
    except cgroup_cpu.CgroupUnavailable as e:
        pytest.skip(f"needs a cgroup: {e}")
    return cgroup_cpu


def test_compare_peers_measures_every_tool_in_a_cgroup():
    cgroup_cpu_or_skip()
    for tool in ("iperf3", "socat"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} not installed (scripts/setup --studies installs it)")
    floor = ROOT / "build" / "release" / "iobench-floor"
    p = subprocess.run([str(SCRIPTS / "compare-peers"), "--iobench", BIN, "--floor", str(floor),
                        "--rounds", "2", "--bytes", "8M", "--iobench-runs", "2", "--bufs", "16k"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert "cgroup" in p.stdout.splitlines()[0]
    # Both placements by default, every tool in each: shared (CPU 0), split (sender 0, receiver 1).
    assert "Placement shared: every process on CPU 0" in p.stdout, p.stdout
    assert "Placement split: sender on CPU 0, receiver on CPU 1" in p.stdout, p.stdout
    tools = [l.split()[1] for l in p.stdout.splitlines() if re.match(r"\s+16K \S+", l)]
    assert tools == ["iobench", "iperf3", "floor-hot", "floor-xxh3", "floor-payload", "iobench",
                     "socat"] * 2, p.stdout
    # The sender's segments per write: iobench (its JSON) and the floors (TCP_INFO) say it; the
    # host's segments per write (both directions, from /proc/net/snmp) are there for every tool.
    rows = {l.split()[1]: re.findall(r"n/a|\d+\.\d+ \[[^\]]+\]", l)
            for l in p.stdout.splitlines() if re.match(r"\s+16K \S+", l)}
    for tool in ("floor-hot", "floor-xxh3", "floor-payload"):
        segs = rows[tool][-2].split()[0]
        assert re.fullmatch(r"\d+\.\d\d", segs) and 0 < float(segs) < 4, p.stdout
    for tool in ("iobench", "iperf3", "floor-hot", "socat"):
        host = rows[tool][-1].split()[0]
        # At least the sender's data segments. No upper bound: /proc/net/snmp counts the whole
        # host's segments, and scripts/test runs the e2e suite beside this one (socat read 9.63
        # per write in one CI run).
        assert re.fullmatch(r"\d+\.\d\d", host) and float(host) > 0, (tool, p.stdout)
    ratios = [l for l in p.stdout.splitlines() if l.strip().startswith("iobench/")]
    assert len(ratios) == 10 and all(
        re.search(r"(iobench lower|iobench higher|parity within noise)$", r) for r in ratios), ratios
    assert re.search(r"bound\s+\d+\.\d+ \(TCP floor-payload \+ AES-128-GCM\)", p.stdout), p.stdout


def test_cgroup_counts_a_child_nobody_waits_for():
    """The property compare-peers relies on: a process outliving its parent is still counted."""
    cgroup_cpu = cgroup_cpu_or_skip()
    # The parent exits at once; its orphan burns ~0.3 s of CPU after that.
    orphan = ("import os,time\nif os.fork()==0:\n t=time.process_time()\n"
              " while time.process_time()-t<0.3: pass\n os._exit(0)\n")
    with cgroup_cpu.CpuGroup() as g:
        g.run(["python3", "-c", orphan], check=True)
    assert g.cpu_s >= 0.3, g.cpu_s


def test_a_confined_group_confines_everything_it_starts():
    """compare-peers --confine: every process of a measurement, children included, on those CPUs;
    --cpus, its old name, is refused with the new one."""
    cgroup_cpu = cgroup_cpu_or_skip()
    cpu = min(os.sched_getaffinity(0))
    child = "import os\nif os.fork()==0:\n print(sorted(os.sched_getaffinity(0)))\n os._exit(0)\nos.wait()"
    with cgroup_cpu.CpuGroup(cpus={cpu}) as g:
        p = g.run(["python3", "-c", child], capture_output=True, text=True, check=True)
    assert p.stdout.strip() == f"[{cpu}]"
    bad = subprocess.run([str(SCRIPTS / "compare-peers"), "--confine", "x"], capture_output=True,
                         text=True)
    assert bad.returncode == 1 and "invalid --confine 'x'" in bad.stderr
    for script in ("compare-peers", "counting-overhead", "engines-compare"):
        old = subprocess.run([str(SCRIPTS / script), "--cpus", "0"], capture_output=True, text=True)
        assert old.returncode == 2 and "--cpus is --confine now" in old.stderr \
            and "use --confine 0" in old.stderr, (script, old.stderr)


def test_micro_model_predicts_each_size_of_a_committed_run():
    # The committed reference pair (scripts/micro and one iobench run), read by iobenchjson.
    micro = ROOT / "results" / "micro"
    p = subprocess.run([str(SCRIPTS / "micro-model"), str(micro / "reference.json"),
                        str(micro / "reference-iobench-run.json")], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    rows = [line.split() for line in p.stdout.splitlines()[2:]]
    assert [r[0] for r in rows] == ["1K", "4K", "16K", "64K"][:len(rows)] and len(rows) >= 2, p.stdout
    for r in rows:  # calls, bytes, predicted, measured and their ratio, all numbers
        assert int(r[1]) > 0 and int(r[2]) > 0 and float(r[3]) > 0 and float(r[4]) > 0
        assert float(r[5]) == pytest.approx(float(r[4]) / float(r[3]), abs=0.011)


def test_micro_builds_its_binary_when_missing_then_runs_it(tmp_path):
    """scripts/setup builds ./iobench alone: scripts/micro builds iobench-micro first (here a
    stand-in cmake in an empty tree records the build and makes a stand-in binary)."""
    bin_dir, build = tmp_path / "bin", tmp_path / "build"
    bin_dir.mkdir()
    (bin_dir / "cmake").write_text(f"""#!/bin/sh
echo "$@" >> {tmp_path}/cmake.log
mkdir -p {build}
case "$*" in *--target*) printf '#!/bin/sh\\nfor a; do case $a in --benchmark_out=*) echo '"'"'{{"context": {{}}, "benchmarks": []}}'"'"' > "${{a#*=}}";; esac; done\\n' > {build}/iobench-micro; chmod +x {build}/iobench-micro;; esac
""")
    os.chmod(bin_dir / "cmake", 0o755)
    name = f"test-micro-{os.getpid()}"
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", IOBENCH_BUILD=str(build),
               IOBENCH_MICRO_NAME=name)
    try:
        p = subprocess.run([str(ROOT / "scripts" / "micro")], capture_output=True, text=True,
                           env=env, timeout=120)
        log = (tmp_path / "cmake.log").read_text()
        assert "iobench-micro is missing: building it first" in p.stderr, p.stderr
        assert "-DCMAKE_BUILD_TYPE=Release" in log and "--target iobench-micro" in log, log
        assert (ROOT / "results" / "micro" / f"{name}.json").is_file(), p.stderr
    finally:
        for ext in ("json", "png"):
            (ROOT / "results" / "micro" / f"{name}.{ext}").unlink(missing_ok=True)


@pytest.mark.skipif(not (ROOT / "build" / "release" / "iobench-micro").exists(),
                    reason="no build/release/iobench-micro (scripts/setup --all builds it)")
def test_micro_runs_one_benchmark_and_plots_it():
    name = f"test-micro-real-{os.getpid()}"
    env = dict(os.environ, IOBENCH_MICRO_NAME=name)
    try:
        p = subprocess.run([str(ROOT / "scripts" / "micro"), "--benchmark_filter=^BM_SocketpairWriteRead/4096$",
                            "--benchmark_min_time=0.01"], capture_output=True, text=True,
                           env=env, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        doc = json.loads((ROOT / "results" / "micro" / f"{name}.json").read_text())
        assert [b["name"] for b in doc["benchmarks"]] == ["BM_SocketpairWriteRead/4096"], doc["benchmarks"]
    finally:
        for ext in ("json", "png"):
            (ROOT / "results" / "micro" / f"{name}.{ext}").unlink(missing_ok=True)


# A stand-in cmake for the clone: configure is the real cmake; a build step is recorded and
# copies the binaries this suite's own build made (what each target compiles to is CI's setup
# --all in its fresh clone; compiling iobench again here was 159 CPU-s of a 2-CPU CI at -O0).
CMAKE_SHIM = """#!/bin/sh
case " $* " in *" --build "*) ;; *) exec {real} "$@" ;; esac
echo "$*" >> {log}
dir="" targets="" prev=""
for a; do
  case "$prev" in --build) dir=$a ;; --target) targets="$targets $a" ;; esac
  prev=$a
done
[ -n "$targets" ] || targets="iobench iobench-micro"
for t in $targets; do cp {built}/$t "$dir/$t" || exit 1; done
"""


@pytest.mark.apart  # its own clone and build tree: shares nothing with the others
def test_micro_works_in_a_clone_where_only_setup_ran(tmp_path):
    """Issue #67: the README's first hour is `scripts/setup`, which builds ./iobench alone; then
    `scripts/micro` (one of the tool's named parts) must work: in a fresh clone of this commit,
    setup (its packages already here, the measurement skipped) then one benchmark, each build
    step the stand-in's (CMAKE_SHIM)."""
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode:
        pytest.skip("not a git checkout")
    built = Path(BIN).resolve().parent
    if not (built / "iobench-micro").exists():
        pytest.skip(f"no {built}/iobench-micro to stand in for the clone's build "
                    "(scripts/setup --all builds it)")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(clone)], check=True,
                   timeout=300)
    shim, log = tmp_path / "bin", tmp_path / "cmake-builds.log"
    shim.mkdir()
    (shim / "cmake").write_text(CMAKE_SHIM.format(real=shutil.which("cmake"), log=log,
                                                  built=built))
    (shim / "cmake").chmod(0o755)
    env = dict(os.environ, IOBENCH_SETUP_NO_RUN="1", IOBENCH_MICRO_NAME="fresh",
               PATH=f"{shim}:{os.environ['PATH']}")
    env.pop("IOBENCH_BUILD", None)
    p = subprocess.run([str(clone / "scripts" / "setup")], cwd=clone, capture_output=True,
                       text=True, env=env, timeout=1200)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert (clone / "build" / "release" / "CMakeCache.txt").is_file()  # configured for real
    assert log.read_text().splitlines() == ["--build build/release --target iobench"]
    assert (clone / "iobench").resolve() == clone / "build" / "release" / "iobench"
    assert not (clone / "build" / "release" / "iobench-micro").exists()
    p = subprocess.run([str(clone / "scripts" / "micro"),
                        "--benchmark_filter=^BM_SocketpairWriteRead/4096$",
                        "--benchmark_min_time=0.01"], cwd=clone, capture_output=True, text=True,
                       env=env, timeout=1200)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "building it first" in p.stderr
    assert log.read_text().splitlines()[1:] == ["--build build/release --target iobench-micro"]
    doc = json.loads((clone / "results" / "micro" / "fresh.json").read_text())
    assert [b["name"] for b in doc["benchmarks"]] == ["BM_SocketpairWriteRead/4096"]
