"""Rule v2 on a fan-out scenario (issue #66 item 6): at each N, the fixed sizes judged by
designrule2's sequence on the writer's CPU per GiB (this scenario alone: each cell's rounds
paired, one study, Student's t on rounds - 1 df), and whether the design's answer holds there
(designlinks.holds: not replaced by a larger size, its CPU shown below x1.10 of every smaller
size's). The real server's harms are not measured in a fan-out, so no step between 16K, 64K and
256K passes: a larger size's CPU gain is reported, not taken."""
from iobench_tools.lib.judging import designlinks
from iobench_tools.lib.judging import designrule2 as rule
from iobench_tools.lib.kernel.iobenchlib import parse_size, size_label
from iobench_tools.lib.sweeps.fanoutcells import cell_id

KEY = "writer_cpu_s_per_gib"


def series(runs, shape, proto, n, bufs):
    """{size: {round: writer CPU per GiB}} of the fixed sizes at N (cells whose runs record
    their round; an older scenario's do not, and gives nothing)."""
    out = {}
    for b in bufs:
        if b == "adaptive":
            continue
        rs = runs.get(cell_id({"shape": shape, "proto": proto, "replicas": n, "buf": b}), [])
        if rs and all(r.get("round") is not None and r.get(KEY) for r in rs):
            out[parse_size(b)] = {r["round"]: r[KEY] for r in rs}
    return out


def per_n(runs, replicas, bufs, shape, proto, design):
    """[(N, the sequence's answer, designlinks.holds)] at each N with two sizes or more."""
    out = []
    for n in replicas:
        s = series(runs, shape, proto, n, bufs)
        if len(s) < 2:
            continue
        cpu, sizes = {proto: [s]}, sorted(s)
        rounds = min(len(v) for v in s.values())
        out.append((n, rule.answer(cpu, {}, sizes, (proto,))[0],
                    designlinks.holds(cpu, sizes, design, rounds)))
    return out


def why_not(h):
    if h["missing"]:
        return "not measured"
    if any(s["ok"] for s in h["beaten"]):
        return "replaced by " + ", ".join(size_label(s["large"]) for s in h["beaten"] if s["ok"])
    return "; ".join(f"not shown below x{1 + rule.DELTA:.2f} of {size_label(small)}"
                     for _, small, _, _, _ in h["failed"]) or "no smaller size"


def lines(doc, design):
    """The report's section: one row per shape and protocol, each N's answer and whether the
    design's answer holds there."""
    out = [f"## Rule v2 at each N (the design's rule, this scenario alone)", "",
           "Each N's fixed sizes by rule v2's sequence on the writer's CPU per GiB (its rounds "
           "paired, one study: t on rounds - 1 df). The real server's memory and p99 are not "
           "measured in a fan-out, so no step from 16K up passes; "
           f"{size_label(design)} holds at an N when no larger size replaces it and its CPU is "
           f"shown below x{1 + rule.DELTA:.2f} of every smaller size's.", "",
           f"| shape | protocol | each N: rule v2's answer ({size_label(design)} holds?) |",
           "|---|---|---|"]
    for shape in doc["shapes"]:
        for proto in doc["protos"]:
            got = per_n(doc["cells"], doc["replicas"], doc["bufs"], shape, proto, design)
            cells = "; ".join(f"N={n}: {size_label(a)} ("
                              + ("holds" if h["holds"] else "**" + why_not(h) + "**") + ")"
                              for n, a, h in got) or "no rounds recorded"
            out.append(f"| {shape} | {proto.upper()} | {cells} |")
    return out + [""]
