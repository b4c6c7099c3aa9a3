"""scripts/replication-sync's report: real against model per figure (the gaps over 10%
named), the real pattern priced against whole chunks, as markdown, CSV and plots."""
import csv
import os
import statistics

from iobench_tools.lib.kernel import hostid

GAP = 0.10

# The real transfer's time is the primary's, from starting the fork to the RDB's end on the
# socket: serialising included, as a primary pays it; the model's is the data phase.
COMPARED = [("writes", "writes", "{:.0f}"), ("bytes_per_write", "bytes per write", "{:.0f}"),
            ("writer_cpu_s_per_gib", "socket writer CPU s/GiB", "{:.3f}"),
            ("transfer_s", "transfer s", "{:.3f}")]


def compare(cell):
    real, mod = cell["real"], cell["model"]
    gaps = []
    for key, label, _ in COMPARED:
        r, m = real.get(key), mod.get(key)
        if r is None or not m:
            continue
        ratio = r / m
        cell.setdefault("ratios", {})[key] = ratio
        if abs(ratio - 1) > GAP:
            gaps.append(f"{label}: real {ratio:.2f}x the model")
    cell["gaps"] = gaps


def median_real(syncs):
    out = {}
    for k, v in syncs[0].items():
        nums = [s[k] for s in syncs if isinstance(s[k], (int, float))]
        out[k] = statistics.median(nums) if len(nums) == len(syncs) and not isinstance(v, bool) else v
    return out


def report_md(doc):
    lines = ["# Real full syncs beside iobench's model", "",
             f"Command: `{doc['command']}`", "", hostid.host_line(doc.get("host")), "",
             "Each real figure is the median of the syncs; the model is iobench streaming the same "
             "bytes at the chunk size over the same protocol on loopback (its sender's median). "
             f"Gaps over {GAP:.0%} are named.", ""]
    head = "| server | proto | mode | writer | " + " | ".join(
        f"{label} (real / model)" for _, label, _ in COMPARED) + " | REPLICAOF to link up s |" \
        " top write sizes (real) |"
    lines += [head, "|" + " --- |" * (6 + len(COMPARED))]
    for c in doc["cells"]:
        r, m = c["real"], c["model"]
        vals = " | ".join(f"{fmt.format(r[k])} / {fmt.format(m[k])}" if r[k] is not None else "n/a"
                          for k, _, fmt in COMPARED)
        vals += f" | {r['sync_s']:.2f}"
        top = ", ".join(f"{s}: {n}" for s, n in r["top_write_sizes"][:3])
        lines.append(f"| {c['server']} {c['version']} | {c['proto']} | {c['mode']} | "
                     f"{r['writer']} | {vals} | {top} |")
    lines += ["", "## Gaps over 10%", ""]
    for c in doc["cells"]:
        lines.append(f"- {c['server']} {c['proto']} {c['mode']}: "
                     + ("; ".join(c["gaps"]) if c["gaps"] else "none"))
    lines += ["", "## The real pattern, priced", "",
              "iobench writing the real socket writer's sizes (`--write-pattern @watch.json`, "
              "from the first sync's watch) against writing whole chunks, same bytes, one run of "
              "each per round, interleaved: medians [min..max]. Ranges that overlap are parity "
              "within noise.", "",
              "| server | proto | mode | writes (pattern / whole) | segments out (pattern / whole) "
              "| sender CPU s/GiB pattern | whole | whole chunks |", "|" + " --- |" * 8]
    rng = lambda f: f"{f['median']:.3f} [{f['min']:.3f}..{f['max']:.3f}]"  # noqa: E731
    for c in doc["cells"]:
        p = c["pattern"]
        pat, whole = p["pattern"], p["whole"]
        verdict = (f"save {p['cpu_saving']:.0%} of the CPU"
                   if p["cpu_verdict"] == "whole chunks cheaper" else p["cpu_verdict"])
        lines.append(f"| {c['server']} | {c['proto']} | {c['mode']} | "
                     f"{pat['writes']['median']:.0f} / {whole['writes']['median']:.0f} | "
                     f"{pat['segments_out']['median']:.0f} / {whole['segments_out']['median']:.0f} | "
                     f"{rng(pat['writer_cpu_s_per_gib'])} | {rng(whole['writer_cpu_s_per_gib'])} | "
                     f"{verdict} |")
    lines += ["", "## Skipped", ""] + [f"- {s}" for s in doc["skipped"] or ["nothing"]]
    return "\n".join(lines) + "\n"


def plots(doc, out, plt):
    os.makedirs(os.path.join(out, "plots"), exist_ok=True)
    labels = [f"{c['server']}\n{c['proto']} {c['mode']}" for c in doc["cells"]]
    for key, label, _ in COMPARED:
        fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(labels)), 4))
        xs = range(len(labels))
        ax.bar([x - 0.2 for x in xs], [c["real"][key] or 0 for c in doc["cells"]], 0.4, label="real")
        ax.bar([x + 0.2 for x in xs], [c["model"][key] or 0 for c in doc["cells"]], 0.4,
               label="iobench model")
        ax.set_xticks(list(xs), labels, fontsize=8)
        ax.set_ylabel(label)
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out, "plots", f"{key}.png"))
        plt.close(fig)


def write_csv(doc, path):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["server", "version", "proto", "mode", "kind", "sync_s", "transfer_s", "writer",
                    "socket_bytes", "writes", "bytes_per_write", "writer_cpu_s_per_gib",
                    "replica_reads"])
        for c in doc["cells"]:
            for s in c["syncs"]:
                w.writerow([c["server"], c["version"], c["proto"], c["mode"], "real", s["sync_s"],
                            s["transfer_s"], s["writer"], s["socket_bytes"], s["writes"], s["bytes_per_write"],
                            s["writer_cpu_s_per_gib"], s["replica_reads"]])
            m = c["model"]
            w.writerow([c["server"], c["version"], c["proto"], c["mode"], "model", "",
                        m["transfer_s"], "iobench sender", c["real"]["socket_bytes"],
                        m["writes"], m["bytes_per_write"], m["writer_cpu_s_per_gib"], ""])
            p = c["pattern"]["pattern"]
            w.writerow([c["server"], c["version"], c["proto"], c["mode"], "pattern", "", "",
                        "iobench sender, the real sizes", c["real"]["socket_bytes"],
                        p["writes"]["median"], "", p["writer_cpu_s_per_gib"]["median"], ""])
