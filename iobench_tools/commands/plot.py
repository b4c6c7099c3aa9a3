"""Turns a sweep (results/<name>/) into PNGs under results/<name>/plots/: CPU s per GiB vs
buffer size per side (TCP vs TLS), syscalls per GiB vs buffer size (log-log), throughput vs
buffer size; bars span the repeats' min..max. A fan-out scenario (fanout.json, written by
scripts/fanout-scenario) gets the writer's CPU per GiB delivered and the time until the last
replica is done, against the number of replicas, one line per chunk size.

  scripts/plot results/<name>"""
import json
import os
import sys

from iobench_tools.lib.kernel import iobenchlib
from iobench_tools.lib.kernel import needs
from iobench_tools.lib.sweeps import sweeplib

plt = None  # matplotlib.pyplot, imported by main() (needs.pyplot), so --help needs no matplotlib


def series(rows):
    """One line per proto/engine, and per placement when the sweep has several."""
    several = len({r["placement"] for r in rows}) > 1
    out = {}
    for r in rows:
        key = f"{r['proto']}/{r['engine']}" + (f" {r['placement']}" if several else "")
        out.setdefault(key, []).append(r)
    return out


def plot(rows, title, path, ylabel, value, logy=False):
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for name, rs in sorted(series(rows).items()):
        for side, style in (("sender", "-"), ("receiver", "--")):
            xs = [r["buf"] for r in rs]
            med = [value(r, side, "median") for r in rs]
            lo = [m - value(r, side, "min") for r, m in zip(rs, med)]
            hi = [value(r, side, "max") - m for r, m in zip(rs, med)]
            ax.errorbar(xs, med, yerr=[lo, hi], marker="o", linestyle=style, capsize=3,
                        label=f"{name} {side}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted({r["buf"] for r in rows}))
    ax.set_xticklabels([sweeplib.size_label(b) for b in sorted({r["buf"] for r in rows})])
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel("buffer size")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")


def plot_fanout(doc, out):
    """One panel per shape and protocol: a figure against N, a line per chunk size."""
    pairs = [(s, p) for s in doc["shapes"] for p in doc["protos"]]
    where = doc.get("where", "loopback") + (f" ({doc['rate']} per replica)" if doc.get("rate") else "")
    for key, label, name in (("writer_cpu_s_per_gib", "writer CPU s / GiB delivered",
                              "fanout_writer_cpu.png"),
                             ("last_done_s", "s until the last replica is done",
                              "fanout_last_done.png")):
        fig, axes = plt.subplots(1, len(pairs), figsize=(4.5 * len(pairs), 4.5), squeeze=False)
        for ax, (shape, proto) in zip(axes[0], pairs):
            for buf in doc["bufs"]:
                ns, med, lo, hi = [], [], [], []
                for n in doc["replicas"]:
                    vals = [r[key] for r in doc["cells"].get(f"{shape}-{proto}-n{n}-{buf}", [])]
                    if not vals:
                        continue
                    m = sweeplib.median(vals)
                    ns.append(n), med.append(m), lo.append(m - min(vals)), hi.append(max(vals) - m)
                ax.errorbar(ns, med, yerr=[lo, hi], marker="o", capsize=3, label=buf)
            ax.set_xscale("log", base=2)
            ax.set_xticks(doc["replicas"])
            ax.set_xticklabels([str(n) for n in doc["replicas"]])
            ax.set_xlabel("replicas (N)")
            ax.set_title(f"{shape}, {proto}", fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
        axes[0][0].set_ylabel(label)
        axes[0][0].legend(fontsize=8, title="chunk")
        fig.suptitle(f"One writer, N replicas: {label} ({doc['bytes_per_replica']} per replica, "
                     f"{doc['rounds']} rounds, {where})", fontsize=10)
        fig.tight_layout()
        path = os.path.join(out, name)
        fig.savefig(path, dpi=100)
        plt.close(fig)
        print(f"wrote {path}")


def parse_args(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    ap.check_before_run(lambda a: sweeplib.missing_folder(a.sweep_dir, "plot"))
    ap.add_argument("sweep_dir", metavar="results/NAME",
                    help="a sweep's or fan-out scenario's folder; the PNGs go to its plots/")
    return ap.parse_args(argv)


def main(argv=None):
    global plt
    sweep_dir = parse_args(argv).sweep_dir
    plt = needs.pyplot("plot")
    fanout = os.path.join(sweep_dir, "fanout.json")
    if os.path.exists(fanout):
        out = os.path.join(sweep_dir, "plots")
        os.makedirs(out, exist_ok=True)
        plot_fanout(json.load(open(fanout)), out)
        return
    manifest, rows = sweeplib.load(sweep_dir, "plot")
    rows = [r for r in rows if r["group"] is None]  # one connection, fixed sizes
    if not rows:
        sys.exit(f"plot: no finished cells in {sweep_dir}")
    ctx = rows[0]["context"]
    where = manifest["where"]
    if manifest.get("netns"):
        where += f" (veth MTU {manifest['netns']['mtu']}, tbf {manifest['netns']['rate']})"
    sub = (f"{manifest['name']}: {manifest['bytes']} per run, {rows[0]['runs']} runs per point, "
           f"{where}\n{ctx['cpu_model']}, {ctx['cpus_online']} CPUs, {ctx['kernel']}")
    out = os.path.join(sweep_dir, "plots")
    os.makedirs(out, exist_ok=True)
    plot(rows, f"CPU seconds per GiB moved (user+sys, exact)\n{sub}",
         os.path.join(out, "cpu_per_gib.png"), "CPU s / GiB",
         lambda r, side, st: r[side]["cpu_s_per_gib"][st])
    plot(rows, f"Syscalls per GiB (data phase, every syscall of the side)\n{sub}",
         os.path.join(out, "syscalls_per_gib.png"), "syscalls / GiB",
         lambda r, side, st: r[side]["syscalls_per_mib"][st] * 1024, logy=True)
    plot(rows, f"Throughput (data phase)\n{sub}", os.path.join(out, "throughput.png"), "Gbit/s",
         lambda r, side, st: r[side]["throughput_gbps"][st])


if __name__ == "__main__":
    main()
