"""Does counting change what it measures? Runs iobench with kernel syscall counting on and off,
interleaved, and prints total CPU seconds per GiB (sender + receiver) for each, per size."""
import sys

from iobench_tools.lib.iobenchlib import GiB, fmt_stat, require_binary, run_json, stat
from iobench_tools.lib import iobenchlib
from iobench_tools.lib import runs as iobench_runs


def cpu_per_gib(iobench, size, nbytes, syscalls, proto, cpus):
    doc = run_json(iobench_runs.ClientRun(buf=size, bytes=nbytes, syscalls=syscalls, proto=proto),
                   "counting-overhead", iobench=iobench, cpus=cpus, timeout=300)
    size = doc["results"][0]
    run = size["runs"][0]
    s, r = run["sender"], run["receiver"]
    # auto counts in a separate run per size (its measured runs count nothing): check that one.
    counted = size["counting_run"]["sender"] if syscalls == "auto" else s
    if syscalls != "off" and counted["syscalls"]["source"] not in ("bpf", "perf_event", "task_io"):
        sys.exit(f"counting-overhead: kernel counting unavailable: {counted['syscalls']['note']}")
    return (s["cpu_s"] + r["cpu_s"]) / (s["bytes"] / GiB)


def main(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    ap.add_argument("--bufs", default="1k,64k",
                    help="buffer sizes, a list")
    iobenchlib.add_renamed_option(ap, "--sizes", "--bufs", "the buffer-size axis has one name "
                                  "in every script")
    ap.add_argument("--pairs", type=int, default=7,
                    help="interleaved on/off pairs of runs per size")
    ap.add_argument("--bytes", default="100M",
                    help="payload per run")
    ap.add_argument("--proto", default="tcp",
                    help="tcp or tls")
    iobenchlib.add_confine_option(
        ap, "run both sides under taskset -c CPUS (e.g. 0): on a small VM the CPU per GiB of "
            "unpinned loopback runs spreads 5x with scheduling alone")
    ap.add_argument("--counter", default="auto", choices=["auto", "bpf", "tracepoints", "taskio"],
                    help="the kernel counter measured (--syscalls of the 'on' runs); auto counts "
                         "in a run of its own, so its on/off is what the default costs the "
                         "measured runs")
    iobenchlib.add_binary_option(ap)
    a = ap.parse_args(argv)
    iobenchlib.refuse_renamed(ap, a)
    require_binary("counting-overhead", a.iobench)
    print(f"{a.proto}, {a.bytes} per run, {a.pairs} interleaved pairs, counter {a.counter}"
          f"{', confined to CPUs ' + a.confine if a.confine else ''}; cpu s/GiB medians [min-max]")
    print(f"{'size':>6} {'counting on':>24} {'counting off':>24} {'on/off':>8}")
    for size in a.bufs.split(","):
        on, off = [], []
        for i in range(a.pairs):
            order = [(a.counter, on), ("off", off)] if i % 2 == 0 else [("off", off), (a.counter, on)]
            for mode, dest in order:
                dest.append(cpu_per_gib(a.iobench, size, a.bytes, mode, a.proto, a.confine))
        son, soff = stat(on), stat(off)
        print(f"{size:>6} {fmt_stat(son):>24} {fmt_stat(soff):>24} "
              f"{son['median'] / soff['median']:>8.3f}")


if __name__ == "__main__":
    main()
