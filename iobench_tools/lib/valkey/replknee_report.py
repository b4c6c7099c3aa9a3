"""scripts/replication-knee's judgement and report: the knee of the real writer and of iobench's
model per protocol x mode x replicas x chunking, judged with scripts/recommend's rules
(studyjudge, rule v2 on one study), set side by side; the patch's variants priced
against stock at the same chunk."""
import os

from iobench_tools.lib.kernel import hostid
from iobench_tools.lib.kernel.iobenchlib import fmt_stat, format_size, stat
from iobench_tools.lib.judging import studyjudge
from iobench_tools.lib.sweeps import sweeplib


def _label(cell):
    return "adaptive" if cell["chunking"] == "adaptive" else format_size(cell["chunk"])


def _rows(cells, side):
    """sweeplib's row shape: a chunk and its runs' writer CPU per GiB delivered."""
    return [{"buf": c["chunk"], "label": _label(c),
             "total_cpu_runs": [r["writer_cpu_s_per_gib"] for r in c[side]
                                if r.get("writer_cpu_s_per_gib")]}
            for c in cells if c[side]]


def judge(rows, proto):
    """The statement of these rows (studyjudge: rule v2 on the rounds, each cell run once per
    round in the experiment kernel's order) and how sure: {knee, sure, why}; `sure` when the
    sequence ended at a step that cannot pass, inside the range."""
    rows = [r for r in rows if r["total_cpu_runs"]]
    if not rows:
        return {"knee": None, "sure": False, "why": "no runs"}
    v = studyjudge.judge({proto: studyjudge.of_runs([(r["buf"], r["total_cpu_runs"])
                                                     for r in rows])})
    if v.state == "unread":
        return {"knee": None, "sure": False, "why": v.words() + " (runs of unequal counts "
                "cannot be paired by round)"}
    return {"knee": v.size, "sure": v.state == "ended", "why": v.words(),
            **({"edge": True} if v.state == "all" else {})}


def verdict(real_rows, real, model, tolerance):
    """same: one knee; within noise: the real server cannot tell the model's knee from its own
    (the 95% interval of the real cost at the model's knee over the real knee's reaches below
    1 + tolerance); differs: it can."""
    if real["knee"] is None or model["knee"] is None:
        return "not judged"
    if real["knee"] == model["knee"]:
        return "same"
    runs = {r["buf"]: r["total_cpu_runs"] for r in real_rows}
    if model["knee"] not in runs:
        return "not judged"
    low, high = sweeplib.ratio_ci(runs[real["knee"]], runs[model["knee"]])
    return "within noise" if low <= 1 + tolerance else "differs"


def knees(doc):
    """Per protocol x mode x replicas x fixed chunking (stock, whole): real and model knees and
    the verdict."""
    groups = {}
    for c in doc["cells"]:
        if c["chunking"] != "adaptive":
            groups.setdefault((c["proto"], c["mode"], c["replicas"], c["chunking"]), []).append(c)
    out = []
    for (proto, mode, n, chunking), cs in sorted(groups.items()):
        real_rows = _rows(cs, "real")
        real = judge(real_rows, proto)
        model = judge(_rows(cs, "model"), proto)
        out.append({"proto": proto, "mode": mode, "replicas": n, "chunking": chunking,
                    "real": real, "model": model,
                    "verdict": verdict(real_rows, real, model, doc["tolerance"])})
    return out


def _cost(cell, side, key="writer_cpu_s_per_gib"):
    vals = [r[key] for r in cell[side] if r.get(key) is not None]
    return stat(vals) if vals else None


def _ratio(base, other):
    """other / base with its 95% interval, as text."""
    a = [r["writer_cpu_s_per_gib"] for r in base["real"]]
    b = [r["writer_cpu_s_per_gib"] for r in other["real"]]
    if len(a) < 2 or len(b) < 2:
        return "-"
    low, high = sweeplib.ratio_ci(a, b)
    word = "parity within noise" if low <= 1 <= high else ("cheaper" if high < 1 else "dearer")
    return f"x{sweeplib.median(b) / sweeplib.median(a):.3f} [{low:.3f}-{high:.3f}] {word}"


def _read_ratio(runs):
    """The writer's file or pipe reads over its socket writes (median; - when it read none)."""
    vals = [r["source_read_bytes"] / r["socket_bytes"] for r in runs
            if r.get("source_read_bytes") and r["socket_bytes"]]
    return f"{sweeplib.median(vals):.2f}" if vals else "-"


def _knee_text(j):
    if j["knee"] is None:
        return "-"
    return (f"{format_size(j['knee'])}" + (" (sure)" if j["sure"] else " (not sure)"))


# How a study ordered its rounds, as its record names it (the studies before the experiment
# kernel shuffled each round and did not say so).
ORDERS = {"shuffle": "a shuffled order", "balanced": "a balanced order (a Williams square)"}


def report_md(doc):
    tol = doc["tolerance"]
    lines = ["# The replication chunk's knee on the real server", "",
             f"- command: `{doc['command']}`",
             "- what this is: one study's knees by the design's rule on its rounds, not a design "
             "default; the design's chunk is the host's campaign by rule v2 "
             "(docs/design-rule-v2.md): results/design-answer/README.md",
             hostid.host_line(doc.get("host")),
             f"- server: {doc['server']} (Debian's source, TLS, iobench's chunk patch: "
             "docs/valkey-patch.md)",
             f"- RDB: {doc['rdb_bytes']} bytes of iobench's replication stream; {doc['rounds']} "
             f"rounds, every cell once per round in {ORDERS[doc.get('order', 'shuffle')]}; "
             "placement --cpus "
             f"{doc['cpus']} (primary, replicas); "
             + (f"the emulated fleet: each replica its own namespace and veth, tbf {doc['link']['rate']}, "
                f"MTU {doc['link']['mtu']}" if doc.get("link") else "loopback"),
             f"- cost: the socket writer's CPU per GiB delivered to all replicas (the main "
             f"thread, or the dual-channel save child), median [min-max]; the knee is rule "
             f"v2's statement on the study's rounds (studyjudge, as scripts/recommend reads "
             f"a sweep: a larger chunk taken only when shown cheaper by more than 10%); the "
             f"verdict sets the model's knee against the real one at {tol:.0%}", ""]
    lines += ["## Predicted beside real", "",
              "| proto | mode | N | chunking | real knee | model knee | verdict | why (real) |",
              "|---|---|---|---|---|---|---|---|"]
    for k in knees(doc):  # judged again from the cells: the one judge of today, not the run's
        lines.append(f"| {k['proto']} | {k['mode']} | {k['replicas']} | {k['chunking']} | "
                     f"{_knee_text(k['real'])} | {_knee_text(k['model'])} | {k['verdict']} | "
                     f"{k['real']['why']} |")
    # Studies before the writer's reads were counted carry no read/written figure.
    reads = any("source_read_bytes" in x for c in doc["cells"] for x in c["real"])
    lines += ["", "## Every cell", "",
              "| cell | writer | writes | bytes/write | " + ("read/written | " if reads else "")
              + "writer s/GiB real | model s/GiB | primary s/GiB | replicas s/GiB | sync s | "
              "BGSAVEs |", "|---|---|---|---|" + ("---|" if reads else "") + "---|" * 6]
    for c in doc["cells"]:
        r = c["real"]
        med = lambda key: sweeplib.median([x[key] for x in r])  # noqa: E731
        lines.append(
            f"| {c['id']} | {r[0]['writer'] if r else '-'} | {med('writes'):.0f} | "
            f"{med('bytes_per_write'):.0f} | " + (f"{_read_ratio(r)} | " if reads else "")
            + f"{fmt_stat(_cost(c, 'real'))} | "
            f"{fmt_stat(_cost(c, 'model'))} | "
            f"{fmt_stat(_cost(c, 'real', 'primary_cpu_s_per_gib'))} | "
            f"{fmt_stat(_cost(c, 'real', 'replica_cpu_s_per_gib'))} | "
            f"{fmt_stat(stat([x['sync_s'] for x in r]), 2)} | "
            f"{max((x['bgsaves'] for x in r), default='-')} |")
    priced = _variants(doc)
    if priced:
        lines += ["", "## The patch's variants against stock (real writer CPU per GiB, "
                  "ratio with its 95% interval)", "", "| against | variant | ratio |",
                  "|---|---|---|"] + priced
    if doc.get("failures"):
        lines += ["", "## Syncs that failed every attempt (not in the figures)", ""]
        lines += [f"- {x}" for x in doc["failures"]]
    return "\n".join(lines) + "\n"


def _variants(doc):
    by = {(c["proto"], c["mode"], c["replicas"], c["chunking"], c["chunk"]): c
          for c in doc["cells"]}
    out = []
    for c in doc["cells"]:
        key = (c["proto"], c["mode"], c["replicas"])
        if c["chunking"] == "whole" and (*key, "stock", c["chunk"]) in by:
            base = by[(*key, "stock", c["chunk"])]
            out.append(f"| {base['id']} | whole | {_ratio(base, c)} |")
        if c["chunking"] == "adaptive":
            for size in (16384, 65536):
                if (*key, "stock", size) in by:
                    base = by[(*key, "stock", size)]
                    out.append(f"| {base['id']} | adaptive | {_ratio(base, c)} |")
    return out


def plots(doc, out_dir, plt):
    """plots/<proto>-<mode>.png: writer CPU per GiB against the chunk, real and model, a line
    per N."""
    os.makedirs(os.path.join(out_dir, "plots"), exist_ok=True)
    pairs = sorted({(c["proto"], c["mode"]) for c in doc["cells"]})
    for proto, mode in pairs:
        fig, ax = plt.subplots(figsize=(7, 4))
        for k, n in enumerate(sorted({c["replicas"] for c in doc["cells"]})):
            cs = sorted((c for c in doc["cells"] if (c["proto"], c["mode"], c["replicas"],
                         c["chunking"]) == (proto, mode, n, "stock")), key=lambda c: c["chunk"])
            for side, style in (("real", "-o"), ("model", "--x")):
                pts = [(c["chunk"], _cost(c, side)["median"]) for c in cs if _cost(c, side)]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style, color=f"C{k}",
                            label=f"{side}, N={n}")
        ax.set_xscale("log", base=2)
        sizes = sorted({c["chunk"] for c in doc["cells"] if c["chunking"] == "stock"})
        ax.set_xticks(sizes, [format_size(x) for x in sizes])
        ax.set_xlabel("chunk (bytes)")
        ax.set_ylabel("writer CPU s per GiB delivered")
        ax.set_title(f"Valkey {mode} full sync over {proto.upper()}: real and model")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "plots", f"{proto}-{mode}.png"), dpi=90)
        plt.close(fig)
