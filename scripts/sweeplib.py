"""Reading a sweep directory (results/<name>/) written by scripts/sweep: shared by plot and
recommend, which know nothing of iobench's internals beyond its JSON."""
import json
import os

GiB = 1 << 30


def load(sweep_dir):
    """Returns (manifest, rows): one row per finished cell with medians and min/max per side."""
    manifest = json.load(open(os.path.join(sweep_dir, "manifest.json")))
    rows = []
    for cell in manifest["cells"]:
        if cell.get("status") != "ok":
            continue
        doc = json.load(open(os.path.join(sweep_dir, cell["file"])))
        for result in doc["results"]:
            row = {"proto": cell["proto"], "engine": cell["engine"], "conns": cell["conns"],
                   "buf": result["send_buf_bytes"], "label": result["label"],
                   "context": doc["context"], "runs": len(result["runs"])}
            for side in ("sender", "receiver"):
                summary = result["summary"][side]
                row[side] = {k: summary[k] for k in summary}
            rows.append(row)
    rows.sort(key=lambda r: (r["proto"], r["engine"], r["conns"], r["buf"]))
    return manifest, rows


def total_cpu_per_gib(row, stat="median"):
    return row["sender"]["cpu_s_per_gib"][stat] + row["receiver"]["cpu_s_per_gib"][stat]


def knee(rows, tolerance):
    """The smallest buffer whose total CPU per GiB is within `tolerance` of the lowest."""
    best = min(total_cpu_per_gib(r) for r in rows)
    for r in sorted(rows, key=lambda r: r["buf"]):
        if total_cpu_per_gib(r) <= best * (1 + tolerance):
            return r
    return None


def size_label(n):
    for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
        if n % div == 0:
            return f"{n // div}{unit}"
    return str(n)
