"""04 under repl-compression, priced from a model (issue #78 item 5): the writes Valkey's dual
channel writer makes per LZ4 block, replayed through iobench. Valkey #4075's compressor (a rio
in front of the connset rio) hands the writer one LZ4 block per emit once a block fills: B
compressed bytes and a 4-byte block header. Stock 9.1.2's rioConnsetWrite appends the block and
flushes it in REPL_CHUNK slices, its tail a write of its own (B+4 = 65540: four 16 KiB writes
and one of 4 bytes); 04 writes only whole chunks and carries the tail into the next block.
Each block size is two cells, the stock pattern (--write-pattern) and whole chunks (--buf),
with an A/A twin of whole chunks, interleaved, both sides pinned. A model: no Valkey runs."""
import dataclasses
import sys

from iobench_tools.lib.kernel import axes, experiment, hostid, iobenchjson, iobenchlib
from iobench_tools.lib.kernel import runs as iobench_runs
from iobench_tools.lib.kernel.iobenchlib import GiB, fmt_stat, parse_size, stat

HEADER = 4  # an LZ4 frame's block header (a 4-byte block checksum when enabled is not modelled)
ARMS = ("stock", "04", "04#2")  # 04#2: the A/A twin of 04, the same runs' noise


def stock_pattern(block, chunk):
    """The writes stock 9.1.2's connset writer makes for one emit of `block` bytes (its buffer
    empty, as after every flush): whole slices of `chunk`, then the rest."""
    full, tail = divmod(block, chunk)
    return [chunk] * full + ([tail] if tail else [])


def run_cell(a, cell):
    pattern = ",".join(str(n) for n in cell["pattern"]) if cell["arm"] == "stock" else None
    run = iobench_runs.ClientRun(proto=cell["proto"], buf=str(a.chunk), bytes=a.bytes,
                                 write_pattern=pattern, cpus=a.cpus or None, syscalls="off")
    doc = iobenchlib.run_json(run, "compression-model", iobench=a.iobench, timeout=300,
                              fail=experiment.failed_run)
    s = iobenchjson.read(doc).first_run.sender
    return {"cpu_s_per_gib": s.cpu_s_per_gib, "writes_per_gib": s.io_calls / (s.bytes / GiB),
            "records_per_gib": s.records / (s.bytes / GiB), "host": doc.get("context", {}),
            "command": dataclasses.replace(run, syscalls=None).shown()}


def cells_of(a):
    out = []
    for proto in a.proto.split(","):
        for b in a.blocks:
            pattern = stock_pattern(b + HEADER, a.chunk)
            for arm in ARMS:
                out.append({"id": f"{proto}-{b}-{arm}", "proto": proto, "block": b, "arm": arm,
                            "pattern": pattern})
    return out


def paired_ratios(num, den, key="cpu_s_per_gib"):
    """num's figure over den's, of the two runs of each round (a round that failed in either
    arm is left out of the pair, never paired with the next round's run)."""
    by_round = {r["round"]: r[key] for r in den}
    return [r[key] / by_round[r["round"]] for r in num if by_round.get(r["round"])]


def summarize(a, done):
    rows = []
    for proto in a.proto.split(","):
        for b in a.blocks:
            arm = {k: done[f"{proto}-{b}-{k}"] for k in ARMS}
            cpu = {k: [r["cpu_s_per_gib"] for r in v] for k, v in arm.items()}
            row = {"proto": proto, "block": b, "stock_pattern": stock_pattern(b + HEADER, a.chunk),
                   "commands": {k: v[0]["command"] for k, v in arm.items()}}
            for k in ARMS:
                row[k] = {"cpu_s_per_gib": stat(cpu[k]),
                          "writes_per_gib": stat([r["writes_per_gib"] for r in arm[k]]),
                          "records_per_gib": stat([r["records_per_gib"] for r in arm[k]])}
            row["ratio_04_stock"] = stat(paired_ratios(arm["04"], arm["stock"]))
            row["ratio_aa"] = stat(paired_ratios(arm["04#2"], arm["04"]))
            rows.append(row)
    return rows


def verdict(row):
    """The reading of a row, its A/A twin first: a control that does not cover 1 voids it."""
    r, aa = row["ratio_04_stock"], row["ratio_aa"]
    if not aa["min"] <= 1 <= aa["max"]:
        return "not read: the A/A twin's range does not cover 1"
    if r["min"] <= 1 <= r["max"]:
        return "parity within noise (the paired range crosses 1)"
    if aa["min"] <= r["max"] and r["min"] <= aa["max"]:
        return "not told apart from the A/A twin's spread"
    return "04 cheaper" if r["median"] < 1 else "04 dearer"


def report(doc):
    host = hostid.host_of_context(doc["runs_context"])
    lines = ["# 04 under repl-compression: a model, not a Valkey run", "",
             f"- command: `{doc['command']}`", hostid.host_line(host),
             f"- {doc['rounds']} rounds, interleaved (balanced), {doc['bytes']} a run, "
             + (f"sender on CPU {doc['cpus'].split(',')[0]}, receiver on CPU "
                f"{doc['cpus'].split(',')[-1]}; " if doc["cpus"] else
                "unpinned (a draw of placements, not a measurement); ")
             + 
             "figures are the sender's (the writer's) medians [min-max]; a ratio is the median "
             "of the paired per-round ratios [min-max]", "",
             "Each LZ4 block reaches the dual channel writer as one write of B + 4 bytes "
             "(Valkey #4075's compressor emits a block as it fills). Stock writes it in chunk "
             "slices and its tail; 04 writes whole chunks only. The pipe path is not modelled: "
             "its reads follow the pipe's timing.", "",
             "| proto | block B | stock's writes per block | stock writes/GiB | 04 writes/GiB "
             "| stock CPU s/GiB | 04 CPU s/GiB | 04/stock | A/A (04#2/04) | reading |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in doc["rows"]:
        pat = row["stock_pattern"]
        lines.append(
            f"| {row['proto']} | {row['block']} | {len(pat)} ({', '.join(map(str, pat))}) "
            f"| {row['stock']['writes_per_gib']['median']:.0f} "
            f"| {row['04']['writes_per_gib']['median']:.0f} "
            f"| {fmt_stat(row['stock']['cpu_s_per_gib'])} | {fmt_stat(row['04']['cpu_s_per_gib'])} "
            f"| {fmt_stat(row['ratio_04_stock'])} | {fmt_stat(row['ratio_aa'])} | {verdict(row)} |")
    lines += ["", "Commands (one run of each arm):", ""]
    for row in doc["rows"]:
        for k in ("stock", "04"):
            lines.append(f"- {row['proto']} B={row['block']} {k}: `{row['commands'][k]}`")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    axes.add_proto(ap)
    ap.add_argument("--blocks", default="64k,32k",
                    help="compressed LZ4 block sizes B, a list: 64k is an incompressible block "
                         "(LZ4 stores it raw), 32k one that halves")
    ap.add_argument("--chunk", default="16k", help="REPL_CHUNK_SIZE, the writers' chunk")
    axes.add_bytes(ap, "100M")
    axes.add_rounds(ap, 5)
    axes.add_cpus(ap, "0,1", note="none: unpinned")
    ap.add_argument("--out", metavar="DIR", help="write results.json and report.md here "
                    "(and keep the progress: the same command resumes)")
    iobenchlib.add_binary_option(ap)
    a = ap.parse_args(argv)
    a.cpus = "" if a.cpus == "none" else a.cpus
    for opt, parse in (("blocks", iobenchlib.parse_size_list), ("chunk", parse_size)):
        try:
            setattr(a, opt, parse(getattr(a, opt)))
        except ValueError as e:
            ap.error(f"--{opt}: {e}")
    if any(b > 64 << 20 for b in a.blocks) or a.chunk > 64 << 20:
        ap.error(f"--blocks {a.blocks} and --chunk {a.chunk}: sizes up to 64M")
    iobenchlib.require_binary("compression-model", a.iobench)
    done, failed = experiment.run_scenario(
        "compression-model", cells_of(a), a.rounds, lambda c, rnd, attempt: run_cell(a, c),
        out_dir=a.out, identity={"bytes": a.bytes, "cpus": a.cpus, "chunk": a.chunk})
    if failed:
        sys.exit("compression-model: error: " + "; ".join(failed))
    first = next(iter(done.values()))[0]
    doc = {"kind": "compression-model", "command": iobenchlib.recorded_command("compression-model"),
           "rounds": a.rounds, "bytes": a.bytes, "cpus": a.cpus, "chunk": a.chunk,
           "runs_context": first["host"], "host": hostid.host_of_context(first["host"]),
           "rows": summarize(a, done),
           "sources": {"cpu_s_per_gib": "iobench's sender CPU (user+sys, CLOCK_PROCESS_CPUTIME_ID"
                       ") per GiB sent, one run per arm per round",
                       "writes_per_gib": "iobench's sender write calls per GiB (its own count)",
                       "records_per_gib": "TLS records the sender wrote per GiB (OpenSSL)",
                       "stock_pattern": "stock_pattern(): 9.1.2 rio.c rioConnsetWrite's slices of "
                                        "one emitted LZ4 block, B + 4 bytes"}}
    iobenchlib.write_or_print("compression-model", a.out, doc, report(doc))


if __name__ == "__main__":
    main()
