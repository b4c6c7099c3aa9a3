"""The many-connections scenario: 1, 4, 16 and 64 connections, each streaming --bytes, with
buffers fixed at 4K, 16K, 64K or adaptive within one --budget per side, then one table: CPU per
GiB, syscalls per GiB, peak buffer memory, slowest connection's throughput. Runs through
scripts/sweep (resumable, same --where/--server-host choices), so raw JSON lands in
results/<name>/ and the table in results/<name>/conns.md.

  scripts/conns-scenario NAME [--conns 1,4,16,64] [--bufs 4k,16k,64k,adaptive] [--budget 256k]
                              [--bytes 32M] [--repeat 3] [--proto tcp] [--engine blocking]
                              [--bytes-spread 0.5] [--stagger 0] [sweep options...]
"""
import os
import subprocess
import sys

from iobench_tools.lib.kernel import axes
from iobench_tools.lib.kernel import iobenchlib
from iobench_tools.lib.kernel.iobenchlib import ROOT
from iobench_tools.lib.sweeps import fanoutlib
from iobench_tools.lib.sweeps import sweeplib

def answer(rows):
    """The verdicts: per N rule v2's statement on the fixed sizes (sender + receiver CPU per
    GiB), and adaptive's step over each N's answer in CPU and memory (fanoutlib)."""
    verdicts = fanoutlib.conns_verdicts(rows)
    return "\n".join(["## The answer", ""] + [f"- {fanoutlib.answer_text(v)}" for v in verdicts]
                     + ["", "Recommendation:", ""]
                     + [f"- {fanoutlib.recommendation(v)}" for v in verdicts]) + "\n"


def main(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    ap.add_argument("name", type=iobenchlib.result_name,
                    help="the scenario's name: its sweep goes to RESULTS/NAME/")
    ap.add_argument("--conns", default="1,4,16,64",
                    help="connections at once, a list (each moves --bytes)")
    axes.add_bufs(ap, "4k,16k,64k,adaptive", "'adaptive' sizes each buffer by live connections")
    ap.add_argument("--budget", default="256k",
                    help="buffer memory per side the adaptive cells share")
    axes.add_bytes(ap, "32M", per="connection")
    ap.add_argument("--repeat", default="3",
                    help="measured runs per cell (scripts/sweep --repeat: a number or auto)")
    ap.add_argument("--warmup", default="1",
                    help="unmeasured runs per cell first")
    axes.add_proto(ap, "tcp")
    ap.add_argument("--engine", default="blocking",
                    help="iobench engines, a list: blocking, epoll, uring")
    ap.add_argument("--bytes-spread", default="0.5",
                    help="iobench --bytes-spread: connections move up to this fraction less, so "
                         "they end at different times and the live count falls")
    ap.add_argument("--stagger", default="0",
                    help="iobench --stagger: the delay between connections' starts")
    ap.add_argument("--results", default=os.path.join(ROOT, "results"),
                    help="the folder the scenario's folder NAME goes under")
    a, rest = ap.parse_known_args(argv)
    cmd = [os.path.join(ROOT, "scripts", "sweep"), a.name, "--conns", a.conns, "--bufs", a.bufs,
           "--budget", a.budget, "--bytes", a.bytes, "--repeat", a.repeat, "--warmup", a.warmup,
           "--proto", a.proto, "--engine", a.engine, "--bytes-spread", a.bytes_spread,
           "--stagger", a.stagger, "--results", a.results, *rest]
    rc = subprocess.run(cmd).returncode
    out_dir = os.path.join(a.results, a.name)
    if not os.path.exists(os.path.join(out_dir, "manifest.json")):
        sys.exit(rc or 1)
    manifest, rows = sweeplib.load(out_dir, "conns-scenario")
    text = (f"# Many connections: {a.conns} x {a.bufs}, budget {a.budget} per side\n\n"
            f"Each connection moves {a.bytes} (spread down by up to {a.bytes_spread}); "
            f"{a.repeat} runs per cell, medians. Command: `{manifest['command']}`\n\n"
            "Peak buffer memory is the largest sum of the connections' buffer sizes on that side "
            "(a fixed size's is conns x size; adaptive may briefly exceed its budget while a "
            "connection blocked in a call still holds its old size).\n\n"
            + sweeplib.conns_table(rows) + "\n" + answer(rows))
    with open(os.path.join(out_dir, "conns.md"), "w") as f:
        f.write(text)
    print(text)
    sys.exit(rc)


if __name__ == "__main__":
    main()
