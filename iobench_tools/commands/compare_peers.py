"""Runs iobench, its peer tools and the floor on loopback, interleaved, every tool measured the
same way: all of its processes in one cgroup, from fork to the last exit (waited for or not).

  TCP: iperf3 -n BYTES -l SIZE -N (client and a one-shot server), and the floor: iobench-floor,
       a minimal C write(B)/read(B) loop in two processes, from one hot buffer (as iperf3 sends)
       and from the payload file's pages (as iobench sends without --source-window); and
       floor-xxh3, the hot floor whose receiver hashes every byte it reads (XXH3-64, as iobench's
       receiver verifies): the least a tool that checks every byte can do.
  TLS: socat -b SIZE streaming the payload file over OPENSSL (TLS 1.3, AES-128-GCM forced through
       OPENSSL_CONF, nodelay), against iobench --proto tls --cipher AES-128-GCM; beside them the
       bound: the TCP floor (payload) plus one AES-128-GCM encrypt and decrypt (openssl speed).

Each round runs every tool once per size and placement, in the experiment kernel's balanced order
(a Williams square over them all, relabelled by --seed; recorded). With --out a stopped comparison
resumes with the same command. A ratio is taken
per round (iobench / peer measured in that round), and shown as median [min-max]: a spread that
crosses 1.0 is parity within noise, not a win or a loss. Beside each TCP tool that can say
(iobench from its JSON, the floors from TCP_INFO), segs/write: the sender's TCP segments per
write() — near 1 when the receiver keeps up and every write leaves alone, well below 1 when the
receiver falls behind and writes coalesce in the send queue (a cheaper regime at small sizes:
a comparison across regimes is not a comparison of tools). Host segs/write counts the same for
every tool, iperf3 included, from outside: the host's TCP segments sent over the measurement
(/proc/net/snmp OutSegs: both directions, ACKs included) per write of the size moved.

Placements (--placement, default shared,split), every tool placed alike: shared, every process
on CPU 0; split, the sender on CPU 0 and the receiver on CPU 1 (iobench --cpus 0,1, iperf3 -A
0,1, IOBENCH_FLOOR_CPUS=0,1, socat under taskset), all processes confined to CPUs 0 and 1;
unpinned, anywhere (a draw between those two, reported as such). --confine LIST instead confines
every process to LIST with no per-side pinning.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from iobench_tools.lib.kernel import axes
from iobench_tools.lib.kernel import cgroup_cpu, experiment
from iobench_tools.lib.kernel import iobenchjson
from iobench_tools.lib.kernel import iobenchlib
from iobench_tools.lib.kernel import runs as iobench_runs
from iobench_tools.lib.kernel.iobenchlib import GiB, ROOT, fmt_stat, free_port, stat

OPENSSL_CONF = """openssl_conf = openssl_init
[openssl_init]
ssl_conf = ssl_sect
[ssl_sect]
system_default = system_default_sect
[system_default_sect]
Ciphersuites = TLS_AES_128_GCM_SHA256
MinProtocol = TLSv1.3
"""
TOOLS = {"tcp": ["iobench", "iperf3", "floor-hot", "floor-xxh3", "floor-payload"],
         "tls": ["iobench", "socat"]}


def parse_size(text):
    try:
        return iobenchlib.parse_size(text)
    except ValueError as e:
        sys.exit(f"compare-peers: {e}")


def wait_listening(port, proc, timeout=10):
    """Waits for a listener without connecting to it (a probe would use up a one-shot server)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True,
                             text=True).stdout
        if out.strip():
            return
        if proc.poll() is not None:
            raise RuntimeError("peer server exited before listening")
        time.sleep(0.01)
    raise RuntimeError(f"nothing listens on port {port}")


CPUS = None  # the CPU set every process of every measurement is confined to (None: anywhere)
SIDES = None  # (sender CPU, receiver CPU) each tool pins its two sides to, or None
PLACEMENTS = {"shared": ({0}, (0, 0)), "split": ({0, 1}, (0, 1)), "unpinned": (None, None)}


def host_tcp_out_segs():
    """The host's TCP segments sent so far (/proc/net/snmp Tcp OutSegs): both sides' data
    segments and ACKs, whichever tool sent them."""
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Tcp:")]
    return int(rows[1][rows[0].index("OutSegs")])


def measured(fn):
    """Runs fn(group) with every process it starts in one cgroup; adds the group's CPU and the
    host's TCP segments over the measurement."""
    with cgroup_cpu.CpuGroup(cpus=CPUS) as g:
        segs0 = host_tcp_out_segs()
        t0 = time.monotonic()
        r = fn(g)
        r["wall_s"] = time.monotonic() - t0
        r["host_segs"] = host_tcp_out_segs() - segs0
    r.update(cpu_s=g.cpu_s, user_s=g.user_s, sys_s=g.sys_s, stragglers=g.stragglers)
    return r


def iobench(a, size, nbytes, proto):
    tls = proto == "tls"
    argv = iobench_runs.ClientRun(
        buf=str(size), bytes=str(nbytes // a.iobench_runs), repeat=a.iobench_runs,
        syscalls="off", json="-", proto="tls" if tls else None,
        cipher="AES-128-GCM" if tls else None, no_nodelay=a.nagle,
        cpus=f"{SIDES[0]},{SIDES[1]}" if SIDES else None,
        source_window=a.iobench_window if a.iobench_window != "payload" else None,
    ).argv(a.iobench)

    def go(g):
        p = g.run(argv, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"iobench failed: {p.stderr.strip()}")
        runs = iobenchjson.loads(p.stdout).results[0].runs
        moved = sum(r.sender.bytes for r in runs)
        wall = sum(max(r.sender.duration_ns, r.receiver.duration_ns) for r in runs)
        data = sum(r.sender.cpu_s + r.receiver.cpu_s for r in runs)
        segs = [r.sender.segments_out for r in runs]
        calls = sum(r.sender.io_calls for r in runs)
        return {"bytes": moved, "gbps": moved * 8 / wall, "data_cpu_s": data,
                "segs_per_write": sum(segs) / calls if None not in segs and calls else None}
    return measured(go)


def iperf3(a, size, nbytes):
    port = free_port()

    def go(g):
        server = g.popen(["iperf3", "-s", "-1", "--forceflush", "-p", str(port)],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            for line in server.stdout:  # its banner: then it accepts exactly one test
                if "Server listening" in line:
                    break
            else:
                raise RuntimeError("iperf3 server exited before the test")
            pin = ["-A", f"{SIDES[0]},{SIDES[1]}"] if SIDES else []  # client, server
            p = g.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-n", str(nbytes), "-l",
                       str(size), "-J", *([] if a.nagle else ["-N"]), *pin],
                      capture_output=True, text=True, timeout=600)
            server.wait(timeout=30)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
        doc = json.loads(p.stdout)
        if "error" in doc:
            raise RuntimeError(f"iperf3 failed: {doc['error']}")
        end = doc["end"]
        cpu, sent, recv = end["cpu_utilization_percent"], end["sum_sent"], end["sum_received"]
        data = cpu["host_total"] / 100 * sent["seconds"] + cpu["remote_total"] / 100 * recv["seconds"]
        return {"bytes": recv["bytes"], "gbps": recv["bytes"] * 8 / recv["seconds"] / 1e9,
                "data_cpu_s": data}
    return measured(go)


def floor(a, size, nbytes, payload_file, xxh3=False):
    argv = [a.floor, str(size), str(nbytes)] + ([payload_file] if payload_file else [])
    env = dict(os.environ, IOBENCH_FLOOR_XXH3="1" if xxh3 else "0")
    if SIDES:
        env["IOBENCH_FLOOR_CPUS"] = f"{SIDES[0]},{SIDES[1]}"

    def go(g):
        t0 = time.monotonic()
        p = g.run(argv, capture_output=True, text=True, timeout=600, env=env)
        if p.returncode != 0:
            raise RuntimeError(f"iobench-floor failed: {p.stderr.strip()}")
        m = re.match(r"writes (\d+) segments (\d+)", p.stdout)
        return {"bytes": nbytes, "gbps": nbytes * 8 / (time.monotonic() - t0) / 1e9,
                "data_cpu_s": None,
                "segs_per_write": int(m.group(2)) / int(m.group(1)) if m else None}
    return measured(go)


def socat(a, size, nbytes, env, pem, payload_file):
    port = free_port()
    nodelay = "" if a.nagle else ",nodelay"

    def taskset(side):
        return ["taskset", "-c", str(SIDES[side])] if SIDES else []

    def go(g):
        server = g.popen([*taskset(1), "socat", "-u", "-b", str(size),
                          f"OPENSSL-LISTEN:{port},reuseaddr{nodelay},cert={pem},verify=0",
                          "OPEN:/dev/null,wronly"], env=env, stderr=subprocess.PIPE, text=True)
        try:
            wait_listening(port, server)
            t0 = time.monotonic()
            p = g.run([*taskset(0), "socat", "-u", "-b", str(size), f"OPEN:{payload_file}",
                       f"OPENSSL:127.0.0.1:{port},verify=0{nodelay}"], env=env,
                      capture_output=True, text=True, timeout=600)
            server.wait(timeout=30)
            wall = time.monotonic() - t0
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
        if p.returncode != 0 or server.returncode != 0:
            raise RuntimeError(f"socat failed: {p.stderr.strip()} {server.stderr.read().strip()}")
        return {"bytes": nbytes, "gbps": nbytes * 8 / wall / 1e9, "data_cpu_s": None}
    return measured(go)


def crypto_floor():
    """openssl speed AES-128-GCM at 16 KiB, encrypt and decrypt: CPU s per GiB for one of each."""
    rates = []
    for extra in ([], ["-decrypt"]):
        out = subprocess.run(["openssl", "speed", "-seconds", "1", "-bytes", "16384", *extra,
                              "-evp", "aes-128-gcm"], capture_output=True, text=True).stdout
        m = re.search(r"^aes-128-gcm\s+([\d.]+)k", out, re.M | re.I)
        if not m:
            return None
        rates.append(float(m.group(1)) * 1000)  # bytes per second
    return GiB / rates[0] + GiB / rates[1]


def per_gib(r, key):
    return None if r[key] is None else r[key] / (r["bytes"] / GiB)


def host_segs_per_write(r, size):
    """The host's TCP segments (both directions, ACKs included) per size-byte write moved: the
    same count for every tool, iperf3 included, so the regime of each is visible."""
    writes = r["bytes"] / size
    return r["host_segs"] / writes if r.get("host_segs") is not None and writes else None


def verdict(ratio):
    lo, hi = ratio["min"], ratio["max"]
    if hi < 1:
        return "iobench lower"
    if lo > 1:
        return "iobench higher"
    return "parity within noise"


def print_proto(proto, results, a, bound):
    tools = TOOLS[proto]
    print(f"{proto.upper()} loopback, {a.bytes} per measurement (iobench: {a.iobench_runs} runs, "
          f"source {'--source-window ' + a.iobench_window if a.iobench_window != 'payload' else 'the payload'}), "
          f"{a.rounds} interleaved rounds, TCP_NODELAY {'off' if a.nagle else 'on'} for all; "
          "medians [min-max]")
    print(f"{'size':>6} {'tool':<14} {'Gbit/s':>22} {'cpu s/GiB, all processes':>26} "
          f"{'cpu s/GiB, data (own)':>24} {'segs/write':>18} {'host segs/write':>18}")
    for size, runs in results.items():
        for t in tools:
            rs = runs[t]
            print(f"{size // 1024:>5}K {t:<14} {fmt_stat(stat([r['gbps'] for r in rs]), 2):>22} "
                  f"{fmt_stat(stat([per_gib(r, 'cpu_s') for r in rs])):>26} "
                  f"{fmt_stat(stat([per_gib(r, 'data_cpu_s') for r in rs])):>24} "
                  f"{fmt_stat(stat([r.get('segs_per_write') for r in rs]), 2):>18} "
                  f"{fmt_stat(stat([host_segs_per_write(r, size) for r in rs]), 2):>18}")
        if bound and size in bound:
            print(f"{'':>6} {'bound':<14} {'':>22} {bound[size]:>7.3f} (TCP floor-payload + "
                  "AES-128-GCM)")
        for t in tools[1:]:
            ratio = stat([i["cpu_s"] / p["cpu_s"] for i, p in zip(runs["iobench"], runs[t])])
            print(f"{'':>6} iobench/{t:<14} cpu {fmt_stat(ratio, 2)}  {verdict(ratio)}")
    print()


def prepare_tls(tmp):
    subprocess.run([os.path.join(ROOT, "tls", "make-certs"), tmp], check=True, capture_output=True)
    pem = os.path.join(tmp, "server.pem")
    with open(pem, "w") as f:
        for part in ("server.crt", "server.key"):
            with open(os.path.join(tmp, part)) as src:
                f.write(src.read())
    conf = os.path.join(tmp, "openssl.cnf")
    with open(conf, "w") as f:
        f.write(OPENSSL_CONF)
    return pem, dict(os.environ, OPENSSL_CONF=conf)


def placement_text(cpus, sides):
    if sides:
        where = ("every process on CPU " + str(sides[0]) if sides[0] == sides[1] else
                 f"sender on CPU {sides[0]}, receiver on CPU {sides[1]}")
        return f"{where} (all processes confined to CPUs {','.join(map(str, sorted(cpus)))})"
    return f"confined to CPUs {','.join(map(str, sorted(cpus)))}" if cpus else "unpinned"


def placements_of(a):
    """{name: (CPU set of the cgroup, (sender CPU, receiver CPU) or None)} to measure."""
    allowed = os.sched_getaffinity(0)
    if a.confine:
        try:
            cpus = {int(c) for c in a.confine.split(",")}
        except ValueError:
            sys.exit(f"compare-peers: invalid --confine '{a.confine}': expected CPU numbers like "
                     f"0 or 0,1")
        if not cpus <= allowed:
            sys.exit(f"compare-peers: invalid --confine '{a.confine}': allowed CPUs are "
                     f"{sorted(allowed)}")
        return {f"cpus {a.confine}": (cpus, None)}
    out = {}
    for name in a.placement.split(","):
        if name not in PLACEMENTS:
            sys.exit(f"compare-peers: invalid --placement '{name}': expected shared, split or "
                     "unpinned")
        cpus, _ = PLACEMENTS[name]
        if cpus and not cpus <= allowed:
            sys.exit(f"compare-peers: --placement {name} needs CPUs {sorted(cpus)}; this process "
                     f"may use {sorted(allowed)}")
        out[name] = PLACEMENTS[name]
    return out


def parse_args(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    ap.epilog = __doc__.split("\n\n", 1)[1]  # how each tool is run
    axes.add_proto(ap)
    axes.add_bufs(ap, "4k,16k,64k", "each tool moves --bytes in writes of this size")
    iobenchlib.add_renamed_option(ap, "--sizes", "--bufs", "the buffer-size axis has one name "
                                  "in every script")
    axes.add_rounds(ap, 5)
    axes.add_bytes(ap, "1000M", per="measurement")
    ap.add_argument("--iobench-runs", type=int,
                    help="iobench moves --bytes as this many runs (--repeat); default 1 with a "
                         "source window (its payload is the window), 10 with 'payload'")
    ap.add_argument("--iobench-window", default="256K",
                    help="iobench's sender source: --source-window SIZE (default 256K: a hot "
                         "source, as iperf3 and floor-hot send from one hot buffer), or "
                         "'payload' (the whole payload once, cold pages: as floor-payload)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the balanced order (the cells' relabelling)")
    iobenchlib.add_binary_option(ap)
    ap.add_argument("--floor", default=os.path.join(ROOT, "build", "release", "iobench-floor"),
                    help="the floor binary: a minimal C write/read loop (built beside iobench)")
    ap.add_argument("--json", help="write every measurement here")
    axes.add_progress_out(ap)
    ap.add_argument("--placement", default="shared,split",
                    help="placements, each measured for every tool alike: shared (all on CPU "
                         "0), split (sender CPU 0, receiver CPU 1), unpinned; default "
                         "shared,split")
    iobenchlib.add_confine_option(
        ap, "instead of --placement: confine every process of every tool to these CPUs, no "
            "per-side pinning (e.g. 0 or 0,1)")
    ap.add_argument("--nagle", action="store_true",
                    help="all tools leave Nagle on (default: all set TCP_NODELAY, as iobench and "
                         "Valkey's replication link do)")
    a = ap.parse_args(argv)
    iobenchlib.refuse_renamed(ap, a)
    if a.iobench_runs is None:
        a.iobench_runs = 10 if a.iobench_window == "payload" else 1
    return a


def check_tools(a, protos):
    """Exits with one line when an argument is bad or a tool or the cgroup is missing; returns
    how CPU is measured."""
    if a.rounds < 1 or a.iobench_runs < 1 or any(p not in TOOLS for p in protos):
        sys.exit(f"compare-peers: invalid --rounds {a.rounds}, --iobench-runs {a.iobench_runs} "
                 f"or --proto '{a.proto}'")
    for tool, proto in (("iperf3", "tcp"), ("socat", "tls"), ("ss", "tls")):
        if proto in protos and not shutil.which(tool):
            sys.exit(f"compare-peers: {tool} not found (scripts/setup --studies installs it)")
    if not os.access(a.floor, os.X_OK):
        sys.exit(f"compare-peers: no floor program '{a.floor}' (scripts/setup builds it)")
    iobenchlib.require_binary("compare-peers", a.iobench)
    try:
        return cgroup_cpu.describe()
    except cgroup_cpu.CgroupUnavailable as e:
        sys.exit(f"compare-peers: {e}")


def measure(a, protos, sizes, nbytes, placements):
    """Every tool at every size and placement, a.rounds interleaved rounds (each placement's
    order shuffled per round). Returns the results, the orders run and the crypto floor."""
    tmp = tempfile.mkdtemp(prefix="compare-peers-")
    try:
        payload_file = os.path.join(tmp, "payload.zst")
        # Built outside every measurement: iobench's cached payload (one run's, or the window's),
        # and the same stream at the measurement's full size, which socat sends and the floor
        # cycles through.
        own = (nbytes // a.iobench_runs if a.iobench_window == "payload"
               else parse_size(a.iobench_window))
        for size, out in ((own, os.path.join(tmp, "run.zst")),
                          (nbytes, payload_file)):
            subprocess.run(iobench_runs.PayloadRun(bytes=size, out=out).argv(a.iobench),
                           check=True, capture_output=True)
        os.unlink(os.path.join(tmp, "run.zst"))
        pem, env = prepare_tls(tmp) if "tls" in protos else (None, None)
        run = {
            "iobench": lambda s, p: iobench(a, s, nbytes, p),
            "iperf3": lambda s, p: iperf3(a, s, nbytes),
            "floor-hot": lambda s, p: floor(a, s, nbytes, None),
            "floor-xxh3": lambda s, p: floor(a, s, nbytes, None, xxh3=True),
            "floor-payload": lambda s, p: floor(a, s, nbytes, payload_file),
            "socat": lambda s, p: socat(a, s, nbytes, env, pem, payload_file),
        }
        cells = [{"id": f"{pl}-{p}-{s}-{t}", "placement": pl, "proto": p, "size": s, "tool": t}
                 for pl in placements for p in protos for s in sizes for t in TOOLS[p]]

        def run_one(c, rnd, attempt):
            global CPUS, SIDES
            CPUS, SIDES = placements[c["placement"]]
            try:
                return run[c["tool"]](c["size"], c["proto"])
            except (RuntimeError, OSError, subprocess.SubprocessError, ValueError) as e:
                raise experiment.RunFailed(f"{c['tool']}: {e}") from None

        # Every placement, protocol, size and tool once per round, in the kernel's balanced
        # order (a Williams square over them all, relabelled by --seed).
        done, failed = experiment.run_scenario(
            "compare-peers", cells, a.rounds, run_one, out_dir=a.out, seed=a.seed,
            identity={"bytes": nbytes, "placements": sorted(placements),
                      "window": a.iobench_window, "runs": a.iobench_runs})
        if failed:
            sys.exit("compare-peers: error: " + "; ".join(failed))
        results = {pl: {p: {s: {t: [] for t in TOOLS[p]} for s in sizes} for p in protos}
                   for pl in placements}
        for c in cells:
            results[c["placement"]][c["proto"]][c["size"]][c["tool"]] = [
                {k: v for k, v in r.items() if k != "round"} for r in done.get(c["id"], [])]
        orders = experiment.rounds_order(len(cells), a.rounds, "balanced", a.seed)
        orders = [[cells[i]["id"] for i in one] for one in orders]
        crypto = crypto_floor() if "tls" in protos else None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return results, orders, crypto


def print_report(a, how, protos, sizes, placements, results, crypto):
    print(f"CPU: {how}; every process of each measurement, waited for or not\n")
    for pl, (cpus, sides) in placements.items():
        print(f"Placement {pl}: {placement_text(cpus, sides)}\n")
        for p in protos:
            bound = None
            if p == "tls" and crypto and "tcp" in protos:
                bound = {s: iobenchlib.median(per_gib(r, "cpu_s")
                                              for r in results[pl]["tcp"][s]["floor-payload"])
                         + crypto for s in sizes}
            print_proto(p, results[pl][p], a, bound)
    if crypto:
        print(f"crypto (openssl speed -evp aes-128-gcm, 16 KiB): {crypto:.3f} cpu s/GiB for one "
              "encrypt + one decrypt")


def main(argv=None):
    a = parse_args(argv)
    protos = a.proto.split(",")
    how = check_tools(a, protos)
    placements = placements_of(a)
    nbytes = parse_size(a.bytes)
    sizes = [parse_size(s) for s in a.bufs.split(",")]
    results, orders, crypto = measure(a, protos, sizes, nbytes, placements)
    print_report(a, how, protos, sizes, placements, results, crypto)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"bytes": nbytes, "rounds": a.rounds, "seed": a.seed, "cpu_source": how,
                       "iobench_window": a.iobench_window,
                       "placements": {pl: placement_text(*v) for pl, v in placements.items()},
                       "orders": orders, "crypto_cpu_s_per_gib": crypto,
                       "results": {pl: {p: {str(k): v for k, v in r.items()}
                                        for p, r in res.items()}
                                   for pl, res in results.items()}}, f, indent=2)


if __name__ == "__main__":
    main()
