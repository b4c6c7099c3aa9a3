"""The comparisons of scripts/upstream-evidence (each upstream patch beside the build before it,
at the chunk it concerns), their cells, and the report: per figure both medians, the ratio with
its 95% interval and a verdict, PR #817's way."""
import os
import subprocess

from iobench_tools.lib.kernel import hostid
from iobench_tools.lib.kernel.iobenchlib import ROOT, format_size
from iobench_tools.lib.judging.statslib import ratio_ci
from iobench_tools.lib.sweeps.sweeplib import median

UPSTREAM = os.path.join(ROOT, "build", "valkey", "upstream")


class BuildMissing(Exception):
    pass


def server_of(label):
    """The valkey-server of a build (stock, 0001..0004, or LEVEL-CHUNK: 0003-262144), built and
    cached by scripts/build-valkey-source when it is not there yet; BuildMissing says why not."""
    path = os.path.join(UPSTREAM, label, "valkey-server")
    if not os.access(path, os.X_OK):
        level, _, chunk = label.partition("-")
        p = subprocess.run([os.path.join(ROOT, "scripts", "build-valkey-source"), "--upstream",
                            level, *(["--chunk", chunk] if chunk else [])],
                           capture_output=True, text=True, timeout=1800)
        if p.returncode != 0 or not os.access(path, os.X_OK):
            said = (p.stderr.strip() or p.stdout.strip() or "no output").splitlines()[-1]
            raise BuildMissing(f"the {label} build is not available: {said}")
    return path


# patch: (its build, the build it is measured beside, the modes it changes, the chunks).
PATCHES = {
    "whole": {"patched": "0002", "base": "stock", "modes": ("dual", "diskless"),
              "chunks": (16384,), "says": "whole chunks (0002) beside stock, at 16K"},
    "unsent": {"patched": "0003", "base": "0002", "modes": ("disk",), "chunks": (65536, 262144),
               "says": "keep the unsent bytes (0003) beside whole chunks (0002), at 64K and 256K"},
    "chunk": {"patched": "0004", "base": "stock", "modes": ("dual", "diskless", "disk"),
              "chunks": (65536,), "says": "the series at 64K (0004) beside stock at 16K"},
}
# A change whose whole interval lies within this of no change is parity, however sure: a
# 0.1% rise in bytes read per byte written is not "worse".
TOLERANCE = 0.01
# (key, heading, lower is better: True, False, or None for a descriptive figure)
FIGURES = (("writes", "writes", True), ("bytes_per_write", "bytes/write", None),
           ("read_per_written", "read/written", True),
           ("writer_cpu_s_per_gib", "writer s/GiB", True),
           ("primary_cpu_s_per_gib", "primary s/GiB", True), ("sync_s", "sync s", True))


def label(level, chunk):
    """A build's label: its level, with the chunk it was built at when that is not its own."""
    own = 16384 if level in ("stock", "0001", "0002", "0003") else 65536
    return level if chunk == own else f"{level}-{chunk}"


def comparisons(a):
    for name in a.patches:
        p = PATCHES[name]
        for mode in (m for m in p["modes"] if m in a.modes):
            for chunk in p["chunks"]:
                for proto in a.proto:
                    for n in a.replicas:
                        cell = {"proto": proto, "mode": mode, "replicas": n}
                        base_chunk = 16384 if p["base"] == "stock" else chunk
                        yield (name, dict(cell, build=label(p["base"], base_chunk),
                                          chunk=base_chunk),
                               dict(cell, build=label(p["patched"], chunk), chunk=chunk))


def cell_id(c):
    return f"{c['proto']}-{c['mode']}-n{c['replicas']}-{c['build']}"


def cells(a):
    seen = {}
    for _, base, patched in comparisons(a):
        for c in (base, patched):
            seen.setdefault(cell_id(c), c)
    return list(seen.values())


def traced_cells(todo):
    """The cells strace cross-checks: each build and mode over TLS to the fewest replicas (TLS:
    the records and the re-reads the patches change are there)."""
    fewest = min(c["replicas"] for c in todo)
    proto = "tls" if any(c["proto"] == "tls" for c in todo) else "tcp"
    return [c for c in todo if c["replicas"] == fewest and c["proto"] == proto]


def _value(run, key):
    if key == "read_per_written":
        return run["source_read_bytes"] / run["socket_bytes"] if run["socket_bytes"] else 0.0
    return run[key]


def compare(base_runs, new_runs, key, lower_better):
    a = [_value(r, key) for r in base_runs]
    b = [_value(r, key) for r in new_runs]
    out = {"base": median(a), "base_range": [min(a), max(a)], "patched": median(b),
           "patched_range": [min(b), max(b)], "ratio": None, "ci": None, "verdict": "-"}
    if out["base"] <= 0 or min(a) <= 0:
        return out
    out["ratio"] = out["patched"] / out["base"]
    if len(a) >= 2 and len(b) >= 2:
        low, high = ratio_ci(a, b)
        out["ci"] = [low, high]
        if lower_better is not None:
            out["verdict"] = ("parity within noise" if low <= 1 <= high else
                              f"parity (within {TOLERANCE:.0%})"
                              if max(abs(low - 1), abs(high - 1)) < TOLERANCE else
                              "better" if (high < 1) == lower_better else "worse")
    return out


def document(a, command, rdb, todo, runs, traced):
    doc = {"tool": "iobench", "kind": "upstream-evidence", "command": command,
           "host": hostid.local_host(), "rdb_bytes": rdb,
           "rounds": a.rounds, "cpus": a.cpus, "where": a.where,
           "link": {"rate": a.rate, "mtu": a.mtu} if a.where == "fleet" else None,
           "sources": {"counts": "iobench watch (eBPF on the primary's processes): the socket "
                                 "writer's write calls and bytes, its file and pipe reads, CPU",
                       "cross-check": "strace -f -y -e trace=read,write attached to the primary, "
                                      "one more sync per traced cell",
                       "interval": "95% bootstrap interval of the ratio of medians "
                                   "(statslib.ratio_ci), rounds interleaved"},
           "cells": [dict(c, id=cell_id(c), runs=runs[cell_id(c)],
                          strace=traced.get(cell_id(c))) for c in todo],
           "comparisons": []}
    for name, base, new in comparisons(a):
        rb, rn = runs[cell_id(base)], runs[cell_id(new)]
        doc["comparisons"].append({
            "patch": name, "base": cell_id(base), "patched": cell_id(new),
            "proto": new["proto"], "mode": new["mode"], "replicas": new["replicas"],
            "chunk": new["chunk"],
            "figures": {k: compare(rb, rn, k, lower) for k, _, lower in FIGURES}})
    return doc


def _fmt(x):
    return f"{x:.0f}" if x >= 100 else f"{x:.3f}" if x < 10 else f"{x:.1f}"


def _cell(f):
    text = f"{_fmt(f['base'])} → {_fmt(f['patched'])}"
    if f["ratio"] is not None:
        text += f" ×{f['ratio']:.3f}"
        if f["ci"]:
            text += f" [{f['ci'][0]:.2f}–{f['ci'][1]:.2f}]"
    return text + (f" {f['verdict']}" if f["verdict"] not in ("-", None) else "")


def summary_lines(doc):
    lines = []
    for name, p in PATCHES.items():
        comps = [c for c in doc["comparisons"] if c["patch"] == name]
        if not comps:
            continue
        cpu = [c["figures"]["writer_cpu_s_per_gib"]["verdict"] for c in comps]
        cpu = ["parity within noise" if v.startswith("parity") else v for v in cpu]
        worse = sum(v == "worse" for f in ("writes", "read_per_written")
                    for v in (c["figures"][f]["verdict"] for c in comps))
        lines.append(f"**{name}** ({p['says']}): writer CPU per GiB better in "
                     f"{cpu.count('better')} of {len(comps)} cells, parity within noise in "
                     f"{cpu.count('parity within noise')}, worse in {cpu.count('worse')}; "
                     f"more writes or reads than the base in {worse} cells")
    return lines


def report_md(doc):
    out = ["# The upstream Valkey patches, each beside the build before it", "",
           f"- command: `{doc['command']}`", hostid.host_line(doc.get("host")),
           f"- RDB: {doc['rdb_bytes']} bytes of iobench's replication stream; {doc['rounds']} "
           f"rounds, every cell once per round in a shuffled order; placement --cpus "
           f"{doc['cpus']} (primary, replicas); {doc['where']}"
           + (f" ({doc['link']['rate']}, MTU {doc['link']['mtu']})" if doc["link"] else ""),
           "- each figure: base → patched medians, the ratio patched/base with its 95% interval "
           "and a verdict; writes and bytes are the socket writer's (the main thread, or the "
           "dual-channel save child), summed over the replicas; read/written is what it read "
           "from the RDB file or the pipe per byte it wrote", "", "## Verdicts", ""]
    out += [f"- {line}" for line in summary_lines(doc)]
    heads = [h for _, h, _ in FIGURES]
    for name, p in PATCHES.items():
        comps = [c for c in doc["comparisons"] if c["patch"] == name]
        if not comps:
            continue
        out += ["", f"## {name}: {p['says']}", "",
                "| proto | mode | N | chunk | " + " | ".join(heads) + " |",
                "|---|---|---|---|" + "---|" * len(heads)]
        for c in comps:
            out.append(f"| {c['proto']} | {c['mode']} | {c['replicas']} | "
                       f"{format_size(c['chunk'])} | "
                       + " | ".join(_cell(c["figures"][k]) for k, _, _ in FIGURES) + " |")
    traced = [c for c in doc["cells"] if c.get("strace")]
    if traced:
        out += ["", "## From outside: strace beside iobench watch", "",
                "One more sync per cell with strace attached to the primary (-f -y, reads and "
                "writes); watch's figures are the rounds' medians.", "",
                "| cell | writes watch / strace | bytes/write watch / strace | "
                "read/written watch / strace |", "|---|---|---|---|"]
        for c in traced:
            s = c["strace"]
            w = [median([_value(r, k) for r in c["runs"]])
                 for k in ("writes", "bytes_per_write", "read_per_written")]
            sw = s["socket_bytes"] / max(s["writes"], 1)
            sr = s["source_read_bytes"] / s["socket_bytes"] if s["socket_bytes"] else 0.0
            out.append(f"| {c['id']} | {w[0]:.0f} / {s['writes']} | {w[1]:.0f} / {sw:.0f} | "
                       f"{w[2]:.2f} / {sr:.2f} |")
    return "\n".join(out) + "\n"
