"""Plots ns per byte against buffer size, one line per benchmark family, from iobench-micro's
Google Benchmark JSON (scripts/micro writes it)."""
import json
import re
import sys
from collections import defaultdict

from iobench_tools.lib.kernel import iobenchlib
from iobench_tools.lib.kernel import needs


def parse_args(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    ap.add_argument("micro_json", metavar="IN.json", help="iobench-micro's Google Benchmark JSON")
    ap.add_argument("png", metavar="OUT.png", help="the plot to write")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    plt = needs.pyplot("plot-micro")
    doc = json.load(open(args.micro_json))
    series = defaultdict(list)
    for b in doc["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        m = re.match(r"^(.*)/(\d+)(?:_median)?$", b["run_name"] if "run_name" in b else b["name"])
        if not m or "error_occurred" in b:
            continue
        size = int(m.group(2))
        ns = b["real_time"] * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b["time_unit"]]
        series[m.group(1).removeprefix("BM_")].append((size, ns / size))
    if not series:
        sys.exit("plot-micro: no sized benchmarks in the input")
    fig, ax = plt.subplots(figsize=(10, 6))
    styles = ["-", "--", ":", "-."]
    for i, (name, pts) in enumerate(sorted(series.items())):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name,
                linestyle=styles[i // 10 % len(styles)])
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("buffer size (bytes)")
    ax.set_ylabel("ns per byte (wall, per iteration / size)")
    ctx = doc.get("context", {})
    ax.set_title(f"iobench-micro on {ctx.get('host_name', '?')}, {ctx.get('num_cpus', '?')} CPUs "
                 f"({ctx.get('date', '')})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
