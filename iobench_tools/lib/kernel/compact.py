"""What a sweep keeps once a cell is done, so that a results folder is one a reader can open
and commit: per-connection figures of a many-connection run summarised (their spread, not
every connection: 64 connections x 6 runs were 2.8 MB per cell), and the per-round files
merged into the cell's JSON removed, with the manifest no longer naming them.

The scripts read a run's group only for its memory and fairness (sweeplib.group_summary) and
fan-out figures (fanoutlib); neither reads the per-connection list."""
import json
import os

from iobench_tools.lib.kernel.iobenchlib import stat

# Runs of up to this many connections keep every connection's figures.
CONNS_KEPT = 8
# Per connection and side, the figures whose spread the summary keeps.
SIDE_FIGURES = ("bytes", "cpu_s", "io_calls", "throughput_gbps", "duration_ns",
                "voluntary_ctxsw", "involuntary_ctxsw")


def summarise_conns(conns):
    """A run's per-connection list as the spread of each figure over its connections."""
    out = {"summarised": f"{len(conns)} connections: min, median and max over them of each "
                         "figure (the list itself is not kept; iobench's own JSON has it)",
           "count": len(conns), "ok": sum(1 for c in conns if c.get("ok")),
           "errors": sorted({c["error"] for c in conns if c.get("error")}),
           "bytes": stat([c.get("bytes") for c in conns])}
    for side in ("sender", "receiver"):
        out[side] = {k: stat([(c.get(side) or {}).get(k) for c in conns])
                     for k in SIDE_FIGURES}
    return out


def compact_run(run):
    """One run (or counting run) with a long per-connection list summarised, in place."""
    group = (run or {}).get("group")
    if isinstance(group, dict) and isinstance(group.get("conns"), list) \
            and len(group["conns"]) > CONNS_KEPT:
        group["conns"] = summarise_conns(group["conns"])
    return run


def compact_doc(doc):
    """A cell's JSON with every run's long per-connection list summarised, in place."""
    for result in doc.get("results", []):
        for run in result.get("runs", []):
            compact_run(run)
        compact_run(result.get("counting_run"))
    return doc


def write_cell(path, doc):
    """A cell's JSON written as a sweep keeps it (compact_doc, unindented), atomically."""
    with open(path + ".tmp", "w") as f:
        json.dump(compact_doc(doc), f)
    os.replace(path + ".tmp", path)


def drop_round_files(rec, out_dir):
    """Once a cell's rounds are merged into its JSON: remove the round files and stop the
    manifest naming them (the merged JSON holds every run, each marked with its round)."""
    for r in rec.get("rounds", {}).values():
        f = r.pop("file", None)
        if f and os.path.exists(os.path.join(out_dir, f)):
            os.remove(os.path.join(out_dir, f))
        r["merged"] = True
