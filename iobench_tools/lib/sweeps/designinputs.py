"""What the design's answer reads (scripts/design-answer, docs/design-rule.md and
design-rule-v2.md): each sweep's CPU series and A/A twins, the real server's cells, the sweeps
themselves (folders or archives), the rule page's commits, and the one host they all ran on."""
import functools
import os
import re
import subprocess
import sys

from iobench_tools.lib.kernel import hostid
from iobench_tools.lib.kernel import iobenchlib
from iobench_tools.lib.sweeps import repeatability as rep
from iobench_tools.lib.sweeps import sweeplib

PROG = "design-answer"
# What each real-server criterion reads from a valkey-evidence run.
REAL_FIGURES = {"memory": "child_private_dirty_bytes", "p99": "p99_ms"}


def sweep_series(rows):
    """{proto: {size: {round: total CPU per GiB}}} of a sweep's one-connection cells, and the
    A/A's {"cell": {round: cost}, "twin": {round: cost}} (None without a control)."""
    out = {}
    for r in rows:
        if r["conns"] != 1 or r["group"] is not None or r.get("control_of") or not r["rounds"]:
            continue
        out.setdefault(r["proto"], {})[r["buf"]] = dict(zip(r["rounds"], r["total_cpu_runs"]))
    return out


def cpu_series(sweeps):
    """{proto: [each sweep's {size: {round: cost}}]} of loaded sweeps (load_sweeps): what the
    rule reads, one series per sweep and protocol."""
    cpu = {}
    for _, _, rows in sweeps:
        for proto, series in sweep_series(rows).items():
            cpu.setdefault(proto, []).append(series)
    return cpu


def aa_series(manifest):
    pairs = manifest.get("control_pairs") or []
    if not pairs or not pairs[0][0]["rounds"] or not pairs[0][1]["rounds"]:
        return None
    cell, twin = pairs[0]
    return {0: dict(zip(cell["rounds"], cell["total_cpu_runs"])),
            1: dict(zip(twin["rounds"], twin["total_cpu_runs"]))}


def size_of_build(name):
    """series@64k or series~64k -> 65536 (valkey-evidence's build names; an A/A twin's #K
    ignored)."""
    try:
        return iobenchlib.parse_size(re.split("[@~]", name.partition("#")[0])[-1])
    except ValueError:
        sys.exit(f"{PROG}: error: build '{name}' does not name a chunk (series@SIZE)")


REAL_CELLS = ("all", "sync", "idle")


def real_series(evidence, cells_of="all", names=None):
    """{proto: {criterion: [{size: {round: value}} per cell (mode, replicas)]}} of a
    valkey-evidence run. `cells_of`: "all" (v1 pooled the cell without a sync with the rest),
    "sync" (v2's conditions) or "idle" (v2's control: the chunk does no work there); `names`,
    when given, gets {proto: [each cell's "mode, N replica(s)"]}."""
    assert cells_of in REAL_CELLS, cells_of
    cells = {}
    for c in evidence.get("cells", []):
        if cells_of != "all" and (c["mode"] == "idle") != (cells_of == "idle"):
            continue
        key = (c["proto"], c["mode"], c["replicas"])
        size = size_of_build(c["build"])
        for crit, figure in REAL_FIGURES.items():
            values = {r["round"]: r[figure] for r in c["runs"] if r.get(figure)}
            cells.setdefault(key, {}).setdefault(crit, {})[size] = values
    out = {}
    for (proto, mode, replicas), crits in sorted(cells.items()):
        if names is not None:
            names.setdefault(proto, []).append(f"{mode}, {replicas} replica(s)")
        for crit, series in crits.items():
            out.setdefault(proto, {}).setdefault(crit, []).append(series)
    return out


def load_sweeps(paths, tmp):
    sweeps = []
    for i, d in enumerate(paths):
        if d.endswith(".tar.xz"):
            d = rep.unpack(d, os.path.join(tmp, str(i)), PROG)
        manifest, rows = sweeplib.load(d, PROG)
        sweeps.append((manifest.get("name") or os.path.basename(os.path.normpath(d)), manifest,
                       rows))
    return sweeps


def rounds_of(manifest, rows):
    """The rounds a sweep ran: --repeat auto records them; a fixed --repeat's are its cells'."""
    return manifest.get("rounds_run") or max((len(r["rounds"] or []) for r in rows), default=0)


@functools.lru_cache(maxsize=None)
def rule_commits(page="docs/design-rule.md"):
    """The commits of a rule's page, oldest first: ((hash, time), ...); git is asked once per
    page and process."""
    try:
        out = subprocess.run(["git", "-C", iobenchlib.ROOT, "log", "--format=%h %cI",
                              "--", page], capture_output=True, text=True,
                             timeout=30).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(tuple(line.split(" ", 1)) for line in out if line.strip())[::-1]  # oldest first


def one_host(sweeps, evidence):
    """The one host every sweep's cells ran on (and the evidence's, when it names one), or the
    command stops: two hosts are never pooled as one (docs/design-rule-v2.md)."""
    by_host = {}
    for name, manifest, _ in sweeps:
        for key in manifest.get("hosts_seen") or ["unknown"]:
            by_host.setdefault(key, []).append(name)
    if len(by_host) > 1:
        sys.exit(f"{PROG}: error: the sweeps ran on {len(by_host)} hosts: " + "; ".join(
            f"{', '.join(names)} on {key}" for key, names in sorted(by_host.items()))
            + ": the rule judges one host's sweeps at a time (give each host's alone)")
    key = next(iter(by_host))
    if evidence.get("host") and not hostid.same_host(hostid.host_key(evidence["host"]), key):
        sys.exit(f"{PROG}: error: the real server's evidence ran on "
                 f"{hostid.host_key(evidence['host'])}, the sweeps on {key}: one host's only")
    return key


def one_link(sweeps):
    """The one link every sweep ran on (its manifest's netns rate and MTU, or where it ran), or
    the command stops: two links are read apart (scripts/design-table groups them)."""
    by_link = {}
    for name, manifest, _ in sweeps:
        netns = manifest.get("netns") or {}
        key = f"{netns['rate']}:{netns['mtu']}" if netns else manifest.get("where") or "unknown"
        by_link.setdefault(key, []).append(name)
    if len(by_link) > 1:
        sys.exit(f"{PROG}: error: the sweeps ran on {len(by_link)} links: " + "; ".join(
            f"{', '.join(names)} on {key}" for key, names in sorted(by_link.items()))
            + ": give each link's alone, or scripts/design-table reads them side by side")
    return next(iter(by_link))
