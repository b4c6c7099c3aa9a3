"""docs/architecture.md against the code: every folder of src/ (and tls/) is on the page with a
floor, an include never points to a higher floor or across to another folder of the same one,
no folder holds more than 15% of src/, no code downcasts a Stream, and the scripts find the
binary, sizes and statistics through iobench_tools.lib.kernel.iobenchlib."""
import re
from pathlib import Path

import pytest

# Shares no namespace name, netns lock, package or host-wide check with the other script tests:
# a lane apart (scripts/test).
pytestmark = pytest.mark.apart

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*`((?:src|tls)[^`]*)`\s*\|", re.M)
INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)
SOURCES = ("*.h", "*.cc")


def floors():
    """folder (as the doc names it, without a trailing slash) -> floor."""
    return {name.rstrip("/"): int(floor) for floor, name in ROW.findall(DOC.read_text())}


def folder_of(path):
    rel = path.relative_to(ROOT).as_posix()
    parts = rel.split("/")
    return "/".join(parts[:2]) if parts[0] == "src" and len(parts) > 2 else (
        parts[0] if parts[0] == "tls" else rel)


def sources():
    for top in ("src", "tls"):
        for pattern in SOURCES:
            yield from (ROOT / top).rglob(pattern)


def include_folder(include):
    first = include.split("/")[0]
    return "tls" if first == "tls" else f"src/{first}"


def test_every_folder_is_on_the_page_and_every_row_is_a_folder():
    table = floors()
    on_disk = {f"src/{p.name}" for p in (ROOT / "src").iterdir() if p.is_dir()} | {"tls"}
    assert on_disk - set(table) == set(), "folders missing from docs/architecture.md"
    rows = {name for name in table if name != "src/main.cc"}
    assert rows - on_disk == set(), "rows of docs/architecture.md with no folder"


def test_includes_point_only_down():
    table = floors()
    upward = []
    for path in sources():
        mine = folder_of(path)
        for include in INCLUDE.findall(path.read_text()):
            theirs = include_folder(include)
            if theirs == mine or theirs not in table:
                continue
            if table[theirs] >= table[mine]:
                upward.append(f"{path.relative_to(ROOT)} (floor {table[mine]}) includes "
                              f"{include} (floor {table[theirs]})")
    assert not upward, "\n".join(upward)


def test_no_folder_holds_more_than_15_percent_of_src():
    lines = {}
    for path in (ROOT / "src").rglob("*"):
        if path.is_file() and path.suffix in (".h", ".cc"):
            lines[folder_of(path)] = lines.get(folder_of(path), 0) + len(
                path.read_text().splitlines())
    total = sum(lines.values())
    big = {f: f"{n / total:.0%}" for f, n in lines.items() if n > 0.15 * total}
    assert not big, big


def test_no_stream_is_downcast():
    casts = [f"{p.relative_to(ROOT)}: {m}" for p in sources() for m in re.findall(
        r"dynamic_cast<[^>]*Stream[^>]*>", p.read_text())]
    assert not casts, "a Stream virtual should stand for: " + ", ".join(casts)


def test_the_scripts_share_iobenchlib():
    """The binary's path, the repository root, sizes and median/min/max live in iobenchlib.py;
    a script that spells them again drifts from the others."""
    twins, scanned = [], 0
    for path in (ROOT / "iobench_tools").rglob("*.py"):
        if path.name == "iobenchlib.py":
            continue
        scanned += 1
        text = path.read_text()
        for what, pattern in [
                ("the repository root", r"os\.path\.dirname\(os\.path\.dirname\(os\.path\.abspath"),
                ("the binary's path", r"[\"']build[\"'],\s*[\"']release[\"'],\s*[\"']iobench[\"']"),
                ("the binary's variable", r"environ(?:\.get\(|\[)[\"']IOBENCH[\"']"),
                ("a size parser", r"\{[^}]*[\"']k[\"']:\s*1\s*<<\s*10"),
                ("median/min/max", r"[\"']median[\"']:\s*(?:statistics\.)?median\(")]:
            if re.search(pattern, text):
                twins.append(f"{path.relative_to(ROOT)}: {what}")
    assert scanned > 20, "the package moved: this test reads no script"  # it once read python/
    assert not twins, "\n".join(twins)


def test_no_option_is_declared_by_hand():
    """Every option of every command is a field of a described block (its flag, bounds, help,
    JSON and CSV follow from the one entry): no file of cli/ or config/ declares one itself."""
    described = ROOT / "src" / "cli" / "described_options.h"
    assert re.search(r"app\.add_(?:option|flag)\(", described.read_text()), \
        "the pattern no longer matches the one place that declares options"
    by_hand = []
    for folder in ("cli", "config"):
        for path in sorted((ROOT / "src" / folder).iterdir()):
            if path == described:
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"add_(?:option|flag|flag_function)\(", line):
                    by_hand.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not by_hand, "declared by hand:\n" + "\n".join(by_hand)



def test_no_script_loops_over_rounds_outside_the_kernel():
    # A loop statement over a count of rounds (range(a.rounds), range(pairs), ...) or over a
    # schedule's rounds (enumerate(rounds)); comprehensions that only read a schedule are not.
    loop = re.compile(r"^\s*for \w+(?:, \w+)? in (?:range\([\w.]*\b(?:rounds|pairs|repeat|"
                      r"price_rounds)\)|enumerate\(rounds\b)")
    found, scanned = set(), 0
    for path in (ROOT / "iobench_tools").rglob("*.py"):
        rel = str(path.relative_to(ROOT))
        if rel == "iobench_tools/lib/kernel/experiment.py":
            continue
        scanned += 1
        if any(loop.search(line) for line in path.read_text().splitlines()
               if not line.lstrip().startswith("#")):
            found.add(rel)
    assert scanned > 20
    assert not found, f"rounds looped outside the kernel (lib/kernel/experiment.py): {sorted(found)}"


def test_each_shared_axis_is_declared_once():
    """--proto, --bufs, --bytes, --rounds and --cpus (pinning) mean one thing in every script:
    lib/kernel/axes.py declares them, and no command spells its own."""
    declared = re.compile(r"add_argument\(\s*[\"'](--proto|--protos|--bufs|--sizes|--chunks|"
                          r"--bytes|--rounds|--cpus)[\"']")
    twins = [f"{p.relative_to(ROOT)}: {m}" for p in (ROOT / "iobench_tools").rglob("*.py")
             if p.name != "axes.py" for m in declared.findall(p.read_text())]
    assert not twins, "declared outside lib/kernel/axes.py: " + ", ".join(twins)


# Keys only iobench's JSON has (its sizes, runs, sides and groups): indexing one is reading that
# format, which only lib/kernel/iobenchjson.py does. The sweep's rows and work counts (their own
# records, made from the reader's values) share some figure names and are not iobench's JSON.
IOBENCH_JSON_KEYS = ("results", "counting_run", "send_buf_bytes", "duration_ns", "host_busy",
                     "writer_cpu_s_per_gib_delivered", "sender_cpu", "receiver_cpu",
                     "replicas_detail", "segments", "fairness",
                     "schema_version", "watch", "tls", "vol_ctxsw")
# The format's writers, beside its reader: they keep a document as iobench wrote it.
IOBENCH_JSON_WRITERS = {
    "iobench_tools/lib/kernel/compact.py": "summarises a kept cell's per-connection lists in place",
}


def test_only_the_reader_indexes_iobench_json():
    keys = "|".join(IOBENCH_JSON_KEYS)
    index = re.compile(rf'\[["\']({keys})["\']\]|\.get\(["\']({keys})["\'][,)]'
                       r'|\[["\']runs["\']\]\[0\]')
    found, scanned = [], 0
    for path in (ROOT / "iobench_tools").rglob("*.py"):
        rel = str(path.relative_to(ROOT))
        if rel == "iobench_tools/lib/kernel/iobenchjson.py" or rel in IOBENCH_JSON_WRITERS:
            continue
        scanned += 1
        found += [f"{rel}:{n}: {line.strip()}"
                  for n, line in enumerate(path.read_text().splitlines(), 1) if index.search(line)]
    assert scanned > 20
    assert not found, "iobench's JSON read outside lib/kernel/iobenchjson.py:\n" + "\n".join(found)


def test_the_reader_reads_what_iobench_writes():
    """The reader's keys are iobench's: a key it reads that a fresh run does not write would read
    None forever. Checked on the committed JSON of a sweep cell (no run needed)."""
    import json
    import sys
    sys.path.insert(0, str(ROOT))
    from iobench_tools.lib.kernel import iobenchjson
    cell = next((ROOT / "results" / "ec2-emulated" / "cells").glob("*.json"), None) or \
        next(p for p in (ROOT / "results").rglob("*.json") if '"counting_run"' in p.read_text())
    report = iobenchjson.read(json.loads(cell.read_text()))
    run = report.first_run
    for side in (run.sender, run.receiver):
        for name in ("bytes", "duration_ns", "cpu_s", "cpu_s_per_gib", "io_calls",
                     "bytes_per_call", "throughput_gbps"):
            assert getattr(side, name) is not None, (cell, side.role, name)
        assert side.syscalls is not None and side.syscalls.source, (cell, side.role)


def test_out_names_a_folder_in_every_script():
    """--out is a folder wherever a script declares it (a one-file output is --report, or
    --json): its help begins "the folder", or its metavar is DIR."""
    decl = re.compile(r'add_argument\(\s*"--out"(.*?)\)\n', re.S)
    found, not_folder = 0, []
    for path in (ROOT / "iobench_tools").rglob("*.py"):
        for m in decl.finditer(path.read_text()):
            found += 1
            if not re.search(r'help="the folder |metavar="DIR"', m.group(1)):
                not_folder.append(f"{path.relative_to(ROOT)}: --out{m.group(1)[:80]}")
    assert found >= 6, "the pattern no longer finds the --out declarations"
    assert not not_folder, "\n".join(not_folder)


TRIP = re.compile(r"<!-- buf-trip -->\n(.*?)<!-- /buf-trip -->", re.S)
TRIP_ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*`([^`]+)` \((\d+)(, up)?\)\s*\|\s*([^|]+)\|", re.M)
TRIP_COUNTS = re.compile(r"(\d+) stops\s+in (\d+) files and (\d+) climbs back up a floor")


def defines(text, function):
    """Whether `text` defines `function` (`Holder::member` as written out of line, or inside
    the holder's struct or class)."""
    holder, _, name = function.rpartition("::")
    if holder and re.search(rf"\b{holder}::{name}\(", text):
        return True
    if holder and not re.search(rf"^\s*(?:struct|class) {holder}\b", text, re.M):
        return False
    return re.search(rf"^[^\s/#][^;(=]*\b{name}\(|^\s+[^;(=]*\b{name}\([^;]*\{{?$", text,
                     re.M) is not None


def test_the_buf_trip_is_the_code_s():
    """The page's trip of --buf from the client command to write(2): each stop's functions are
    defined in its file, each floor is its folder's, a climb is marked where the floor rises,
    and the counts in the prose are the table's."""
    doc = DOC.read_text()
    rows = TRIP_ROW.findall(TRIP.search(doc).group(1))
    table = floors()
    wrong, climbs, previous = [], 0, None
    for number, path, floor, up, functions in rows:
        text = (ROOT / path).read_text()
        for function in re.findall(r"`([^`]+)`", functions):
            if not defines(text, function):
                wrong.append(f"stop {number}: {function} is not defined in {path}")
        if table[folder_of(ROOT / path)] != int(floor):
            wrong.append(f"stop {number}: {path} is on floor {table[folder_of(ROOT / path)]}")
        rises = previous is not None and int(floor) > previous
        if rises != bool(up):
            wrong.append(f"stop {number}: the climb mark is wrong")
        climbs += rises
        previous = int(floor)
    assert not wrong, "\n".join(wrong)
    assert [int(r[0]) for r in rows] == list(range(1, len(rows) + 1))
    assert "`FdStream::write`" in rows[-1][4], "the trip ends at the write(2)"
    stops, files, stated_climbs = map(int, TRIP_COUNTS.search(doc).groups())
    assert (stops, files, stated_climbs) == (len(rows), len({r[1] for r in rows}), climbs)
    assert stops <= 15 and climbs <= 4, "issue #47's bound for this trip"


def test_only_the_plan_reads_the_client_options():
    """The client's files read the plan; ClientOptions is read by plan_client alone (the door
    takes it to hand it over)."""
    readers = [p.name for p in (ROOT / "src" / "client").glob("*.cc")
               if "ClientOptions" in p.read_text()]
    assert sorted(readers) == ["client.cc", "client_plan.cc"]
    door = (ROOT / "src" / "client" / "client.cc").read_text()
    assert re.findall(r"\bo\.\w+", door) == [], "the door reads no option itself"
