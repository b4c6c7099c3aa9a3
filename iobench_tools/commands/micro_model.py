"""Accounts for an end-to-end run with the microbenchmarks' cost curve:
    CPU ~= calls x cost per call + bytes x cost per byte
Fits cost(size) = per_call + size x per_byte to iobench-micro's BM_TcpLoopbackWriteRead (one
write + its reads per iteration, both ends in one thread), then predicts each buffer size of an
iobench JSON run and prints the prediction beside the measured CPU (sender + receiver)."""
import json
import re
import sys
from iobench_tools.lib.kernel import iobenchjson
from iobench_tools.lib.kernel import iobenchlib
from iobench_tools.lib.judging import costmodel


def parse_args(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    ap.add_argument("micro_json", metavar="MICRO.json",
                    help="iobench-micro's Google Benchmark JSON (scripts/micro writes it)")
    ap.add_argument("run_json", metavar="IOBENCH.json", help="an iobench run's --json output")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    micro = json.load(open(args.micro_json))
    pts = []
    for bench in micro["benchmarks"]:
        m = re.match(r"^BM_TcpLoopbackWriteRead/(\d+)$", bench["name"])
        if m and bench.get("run_type", "iteration") == "iteration":
            unit = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[bench["time_unit"]]
            pts.append((int(m.group(1)), bench["cpu_time"] * unit, bench.get("syscalls", 2.0)))
    if len(pts) < 2:
        sys.exit("micro-model: BM_TcpLoopbackWriteRead results missing from " + args.micro_json)
    per_iter, per_byte = costmodel.line_fit([(s, t) for s, t, _ in pts])
    calls_per_iter = sum(c for _, _, c in pts) / len(pts)
    per_call = per_iter / calls_per_iter
    print(f"fit over {len(pts)} sizes: {per_call:.0f} ns per syscall "
          f"({calls_per_iter:.2f} syscalls per write+read), {per_byte * 1e3:.1f} ps per byte "
          f"(copied in and out once)")
    run = iobenchjson.load(args.run_json)
    print(f"{'buf':>6} {'calls':>8} {'bytes':>11} {'predicted s':>12} {'measured s':>11} {'ratio':>6}")
    for r in run.results:
        s, v = r.runs[0].sender, r.runs[0].receiver
        calls = s.syscalls.total + v.syscalls.total
        predicted = (calls * per_call + s.bytes * per_byte) / 1e9
        cpu = sorted(x.sender.cpu_s + x.receiver.cpu_s for x in r.runs)
        measured = cpu[len(cpu) // 2]
        print(f"{r.label:>6} {calls:>8.0f} {s.bytes:>11} {predicted:>12.4f} {measured:>11.4f} "
              f"{measured / predicted:>6.2f}")


if __name__ == "__main__":
    main()
