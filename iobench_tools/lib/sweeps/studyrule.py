"""Rule v2 on one study (issue #66 item 6): a fan-out scenario at each N, or one sweep per
protocol, its fixed sizes judged by the one judge of a study (studyjudge: rule v2's sequence on
the CPU per GiB, each cell's rounds paired, Student's t on rounds - 1 df), and whether the design's
answer holds there (designlinks.holds: not replaced by a larger size, its CPU shown below x1.10
of every smaller size's). The real server's harms are not measured in a sweep or a fan-out, so
no step between 16K, 64K and 256K passes: a larger size's CPU gain is reported, not taken."""
from iobench_tools.lib.judging import designlinks
from iobench_tools.lib.judging import designrule2 as rule
from iobench_tools.lib.judging import studyjudge
from iobench_tools.lib.kernel.iobenchlib import parse_size, size_label
from iobench_tools.lib.sweeps import designinputs
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


def verdict(s, proto, design):
    """(the sequence's answer, designlinks.holds) of one study's {size: {round: cost}} in one
    protocol, or None with fewer than two sizes of two rounds or more."""
    v = studyjudge.judge({proto: s})
    if v.state == "unread":
        return None
    s = studyjudge.readable(s)
    sizes, rounds = sorted(s), min(len(c) for c in s.values())
    return v.size, designlinks.holds({proto: [s]}, sizes, design, rounds)


def per_n(runs, replicas, bufs, shape, proto, design):
    """[(N, the sequence's answer, designlinks.holds)] at each N with two sizes or more."""
    out = []
    for n in replicas:
        v = verdict(series(runs, shape, proto, n, bufs), proto, design)
        if v is not None:
            out.append((n, *v))
    return out


def why_not(h):
    if h["missing"]:
        return "not measured"
    if any(s["ok"] for s in h["beaten"]):
        return "replaced by " + ", ".join(size_label(s["large"]) for s in h["beaten"] if s["ok"])
    return "; ".join(f"not shown below x{1 + rule.DELTA:.2f} of {size_label(small)}"
                     for _, small, _, _, _ in h["failed"]) or "no smaller size"


def preamble(sizes, cost, study, design, holds_where=""):
    """What a section reads and what "holds" means: one text for a fan-out and a sweep."""
    return (f"{sizes} by rule v2's sequence on the {cost} (its rounds paired, one study: t on "
            f"rounds - 1 df). The real server's memory and p99 are not measured in a {study}, so "
            f"no step from 16K up passes; {size_label(design)} holds{holds_where} when no larger "
            f"size replaces it and its CPU is shown below x{1 + rule.DELTA:.2f} of every smaller "
            "size's.")


def held(h, design=None):
    """'holds', or why not in bold; the design's size named first when given."""
    name = f"{size_label(design)} " if design else ""
    return f"{name}holds" if h["holds"] else f"{name}**{why_not(h)}**"


def lines(doc, design):
    """The report's section: one row per shape and protocol, each N's answer and whether the
    design's answer holds there."""
    out = ["## Rule v2 at each N (the design's rule, this scenario alone)", "",
           preamble("Each N's fixed sizes", "writer's CPU per GiB", "fan-out", design,
                    " at an N"), "",
           f"| shape | protocol | each N: rule v2's answer ({size_label(design)} holds?) |",
           "|---|---|---|"]
    for shape in doc["shapes"]:
        for proto in doc["protos"]:
            got = per_n(doc["cells"], doc["replicas"], doc["bufs"], shape, proto, design)
            cells = "; ".join(f"N={n}: {size_label(a)} ({held(h)})"
                              for n, a, h in got) or "no rounds recorded"
            out.append(f"| {shape} | {proto.upper()} | {cells} |")
    return out + [""]


def sweep_lines(rows, design):
    """One sweep's section: each protocol's one-connection sizes by rule v2's sequence on the
    total CPU per GiB, and whether the design's answer holds in this sweep."""
    out = ["### Rule v2 on this sweep alone (the design's rule, one study)", "",
           preamble("Each protocol's one-connection sizes", "total CPU per GiB", "sweep", design)
           + " One sweep is one study: the design pools a host's campaign "
           "(results/design-answer/README.md).", ""]
    for proto, s in sorted(designinputs.sweep_series(rows).items()):
        v = verdict(s, proto, design)
        if v is None:
            out.append(f"- {proto.upper()}: no two sizes with rounds recorded (an older sweep's "
                       "cells do not record their rounds, or one run each)")
            continue
        answer, h = v
        out.append(f"- {proto.upper()}: rule v2 names {size_label(answer)}; {held(h, design)}")
    return out + [""]
