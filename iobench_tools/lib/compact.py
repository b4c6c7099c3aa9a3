"""What a sweep keeps once a cell is done, so that a results folder is one a reader can open
and commit: per-connection figures of a many-connection run summarised (their spread, not
every connection: 64 connections x 6 runs were 2.8 MB per cell), and the per-round files
merged into the cell's JSON removed, with the manifest no longer naming them.

The scripts read a run's group only for its memory and fairness (sweeplib.group_summary) and
fan-out figures (fanoutlib); neither reads the per-connection list."""
import json
import os

from iobench_tools.lib.iobenchlib import median

# Runs of up to this many connections keep every connection's figures.
CONNS_KEPT = 8
# Per connection and side, the figures whose spread the summary keeps.
SIDE_FIGURES = ("bytes", "cpu_s", "io_calls", "throughput_gbps", "duration_ns",
                "voluntary_ctxsw", "involuntary_ctxsw")


def spread(values):
    values = [v for v in values if isinstance(v, (int, float))]
    if not values:
        return None
    return {"min": min(values), "median": median(values), "max": max(values)}


def summarise_conns(conns):
    """A run's per-connection list as the spread of each figure over its connections."""
    out = {"summarised": f"{len(conns)} connections: min, median and max over them of each "
                         "figure (the list itself is not kept; iobench's own JSON has it)",
           "count": len(conns), "ok": sum(1 for c in conns if c.get("ok")),
           "errors": sorted({c["error"] for c in conns if c.get("error")}),
           "bytes": spread([c.get("bytes") for c in conns])}
    for side in ("sender", "receiver"):
        out[side] = {k: spread([(c.get(side) or {}).get(k) for c in conns])
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


def drop_round_files(rec, out_dir):
    """Once a cell's rounds are merged into its JSON: remove the round files and stop the
    manifest naming them (the merged JSON holds every run, each marked with its round)."""
    for r in rec.get("rounds", {}).values():
        f = r.pop("file", None)
        if f and os.path.exists(os.path.join(out_dir, f)):
            os.remove(os.path.join(out_dir, f))
        r["merged"] = True


def compact_folder(out_dir):
    """An existing sweep folder compacted as a sweep now leaves it: each cell's JSON and the
    manifest rewritten. Returns the bytes saved."""
    before = folder_bytes(out_dir)
    mpath = os.path.join(out_dir, "manifest.json")
    manifest = json.load(open(mpath))
    for rec in manifest.get("cells", []):
        path = os.path.join(out_dir, rec["file"])
        if os.path.exists(path):
            doc = compact_doc(json.load(open(path)))
            with open(path, "w") as f:
                json.dump(doc, f)
        if rec.get("status") == "ok":
            drop_round_files(rec, out_dir)
    with open(mpath, "w") as f:
        json.dump(manifest, f, indent=2)
    return before - folder_bytes(out_dir)


def folder_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
