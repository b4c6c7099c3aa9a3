"""Does counting change what it measures? Runs iobench with kernel syscall counting on and off,
interleaved (the experiment kernel's balanced rounds over every size's on and off cells), and
prints total CPU seconds per GiB (sender + receiver) for each, per size. With --out the same
command resumes a stopped comparison."""
import sys

from iobench_tools.lib.kernel import axes
from iobench_tools.lib.kernel import experiment
from iobench_tools.lib.kernel import iobenchjson, iobenchlib
from iobench_tools.lib.kernel import runs as iobench_runs
from iobench_tools.lib.kernel.iobenchlib import GiB, fmt_stat, require_binary, run_json, stat


def cpu_per_gib(iobench, size, nbytes, syscalls, proto, cpus):
    doc = run_json(iobench_runs.ClientRun(buf=size, bytes=nbytes, syscalls=syscalls, proto=proto),
                   "counting-overhead", iobench=iobench, cpus=cpus, timeout=300,
                   fail=experiment.failed_run)
    size = iobenchjson.read(doc).results[0]
    s, r = size.runs[0].sender, size.runs[0].receiver
    # auto counts in a separate run per size (its measured runs count nothing): check that one.
    counted = size.counted("sender")
    if syscalls != "off" and counted.syscalls.source not in ("bpf", "perf_event", "task_io"):
        raise experiment.RunFailed(
            f"kernel counting unavailable: {counted.syscalls.note}", refused=True)
    return (s.cpu_s + r.cpu_s) / (s.bytes / GiB)


def main(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    axes.add_bufs(ap, "1k,64k")
    iobenchlib.add_renamed_option(ap, "--sizes", "--bufs", "the buffer-size axis has one name "
                                  "in every script")
    ap.add_argument("--pairs", type=int, default=7,
                    help="interleaved on/off pairs of runs per size")
    axes.add_bytes(ap, "100M")
    axes.add_proto(ap, "tcp", "one of them")
    iobenchlib.add_confine_option(
        ap, "run both sides under taskset -c CPUS (e.g. 0): on a small VM the CPU per GiB of "
            "unpinned loopback runs spreads 5x with scheduling alone")
    ap.add_argument("--counter", default="auto", choices=["auto", "bpf", "tracepoints", "taskio"],
                    help="the kernel counter measured (--syscalls of the 'on' runs); auto counts "
                         "in a run of its own, so its on/off is what the default costs the "
                         "measured runs")
    axes.add_progress_out(ap)
    iobenchlib.add_binary_option(ap)
    a = ap.parse_args(argv)
    iobenchlib.refuse_renamed(ap, a)
    require_binary("counting-overhead", a.iobench)
    print(f"{a.proto}, {a.bytes} per run, {a.pairs} interleaved pairs, counter {a.counter}"
          f"{', confined to CPUs ' + a.confine if a.confine else ''}; cpu s/GiB medians [min-max]")
    print(f"{'size':>6} {'counting on':>24} {'counting off':>24} {'on/off':>8}")
    sizes = a.bufs.split(",")
    cells = [{"id": f"{size}-{mode}", "size": size, "mode": a.counter if mode == "on" else "off"}
             for size in sizes for mode in ("on", "off")]
    done, failed = experiment.run_scenario(
        "counting-overhead", cells, a.pairs,
        lambda c, rnd, attempt: {"cpu": cpu_per_gib(a.iobench, c["size"], a.bytes, c["mode"],
                                                    a.proto, a.confine)},
        out_dir=a.out, identity={"bytes": a.bytes, "proto": a.proto, "confine": a.confine,
                                 "counter": a.counter})
    if failed:
        sys.exit("counting-overhead: error: " + "; ".join(failed))
    for size in sizes:
        on = [r["cpu"] for r in done[f"{size}-on"]]
        off = [r["cpu"] for r in done[f"{size}-off"]]
        son, soff = stat(on), stat(off)
        print(f"{size:>6} {fmt_stat(son):>24} {fmt_stat(soff):>24} "
              f"{son['median'] / soff['median']:>8.3f}")


if __name__ == "__main__":
    main()
