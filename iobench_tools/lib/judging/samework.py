"""Cells that are the same work: two buffer sizes whose runs moved their bytes in as many write
syscalls and TLS records per byte, and read them in as many reads within a tolerance, put the same
load on the kernel and the wire, whatever the buffer is called (TLS above 16K writes 16 KiB
records whatever the SSL_write size; an adaptive writer whose chunk is 64K is 64K). The
recommender treats them as one workload, named by its smallest size with the counts that show
it: no step is asked between them."""
from iobench_tools.lib.kernel.iobenchlib import median, work_counts

# The sender's write syscalls and the TLS records are set by the buffer and the record size:
# equal cells agree to rounding. The receiver's reads depend on how the bytes arrive, too: a TLS
# record that arrives in two pieces takes a third read, and on the emulated link 16K, 64K and
# 256K cells of one sweep read their 12,800 records in 25,600 to 28,612 reads (12%). A buffer
# that changes the reads themselves changes them by a factor (a receive buffer below a record:
# 16 reads per record at 1K), so 15% tells timing from work.
SAME_WRITES = 0.01
SAME_READS = 0.15


def _within(a, b, tolerance):
    return abs(a - b) <= tolerance * max(a, b)


def same_work(a, b):
    """Are rows a and b the same work? None when the counts cannot say (no syscalls counted)."""
    return same_counts(work_counts(a), work_counts(b))


def same_counts(ca, cb):
    """Are two runs' wire counts ({bytes, writes, reads, records_out, records_in}, as
    iobenchlib.work_counts gives them) the same work? None when they cannot say."""
    if not all(c[k] for c in (ca, cb) for k in ("bytes", "writes", "reads")) or \
            None in (ca["records_out"], cb["records_out"], ca["records_in"], cb["records_in"]):
        return None  # not counted (--syscalls off, an older summary): the counts cannot say
    # Per byte moved: cells of different lengths (--bytes-spread) are judged on their rates.
    per = lambda c, k: c[k] / c["bytes"]  # noqa: E731
    return (_within(per(ca, "writes"), per(cb, "writes"), SAME_WRITES)
            and _within(per(ca, "records_out"), per(cb, "records_out"), SAME_WRITES)
            and _within(per(ca, "records_in"), per(cb, "records_in"), SAME_WRITES)
            and _within(per(ca, "reads"), per(cb, "reads"), SAME_READS))


def classes(rows):
    """The rows in runs of consecutive sizes that are the same work as the smallest of their
    run, smallest first: [[1K], [4K], [8K], [16K, 64K, 256K]] for TLS."""
    out = []
    for r in sorted(rows, key=lambda r: r["buf"]):
        if out and same_work(out[-1][0], r):
            out[-1].append(r)
        else:
            out.append([r])
    return out


def _count_range(values):
    lo, hi = min(values), max(values)
    return f"{lo:,.0f}" if lo == hi else f"{lo:,.0f}–{hi:,.0f}"


def mechanism_text(members, label):
    """'16K, 64K and 256K are the same work: 12,800 writes, 12,800 records, 27,910–28,741
    reads each'."""
    names = [label(m["buf"]) for m in members]
    named = ", ".join(names[:-1]) + " and " + names[-1]
    counts = [work_counts(m) for m in members]
    parts = [f"{_count_range([c['writes'] for c in counts])} write syscalls"]
    if any(c["records_out"] for c in counts):
        parts.append(f"{_count_range([c['records_out'] for c in counts])} TLS records")
    parts.append(f"{_count_range([c['reads'] for c in counts])} read syscalls")
    return f"{named} are the same work ({', '.join(parts)} per run)"


def merged(members, label):
    """One row for a class: the smallest member's, its cost per run the median of the members'
    in each round they all ran (so it stays paired with the other cells' rounds), or all their
    runs when they were not measured in rounds. Marks `members` and `mechanism`."""
    first = members[0]
    if len(members) == 1:
        return first
    row = dict(first, members=[m["buf"] for m in members],
               mechanism=mechanism_text(members, label))
    rounds = [m.get("rounds") for m in members]
    if all(rounds):
        by_round = [dict(zip(m["rounds"], m["total_cpu_runs"])) for m in members]
        shared = [r for r in first["rounds"] if all(r in b for b in by_round)]
        row["rounds"] = shared
        row["total_cpu_runs"] = [median([b[r] for b in by_round]) for r in shared]
    else:
        row["rounds"] = None
        row["total_cpu_runs"] = [x for m in members for x in m["total_cpu_runs"]]
    return row


def collapse(rows, label):
    """The rows with each class of the same work as one merged row, smallest size first."""
    return [merged(c, label) for c in classes(rows)]
