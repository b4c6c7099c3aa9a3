"""`iobench load`'s results read back (src/commands/resp_load.cc): its per-slice histograms, in
HdrHistogram's layout, cut to any wall-clock window (a sync's, from the fork to the last replica
online) and merged exactly, then read as quantiles the way HdrHistogram reads them."""
import math


def lowest_at(index, half_magnitude=7):
    """The lowest value (ns) counted at a counts index (util/histogram.cc hdr::lowest_at)."""
    half = 1 << half_magnitude
    bucket = (index >> half_magnitude) - 1
    sub = (index & (half - 1)) + half
    if bucket < 0:
        sub -= half
        bucket = 0
    return sub << bucket


def highest_at(index, half_magnitude=7):
    return lowest_at(index + 1, half_magnitude) - 1


def _slices_in(result, start_ns, end_ns):
    for s in result["slices"]:
        t = s["start_unix_ns"]
        if (start_ns is not None and t < start_ns) or (end_ns is not None and t >= end_ns):
            continue
        yield s


def window(result, start_ns=None, end_ns=None):
    """{index: count} over the slices whose start lies in [start_ns, end_ns) (unix ns; None: no
    bound). A slice belongs whole to the window its start is in: cut at slice edges (--slice)."""
    counts = {}
    for s in _slices_in(result, start_ns, end_ns):
        for index, n in s["buckets"]:
            counts[index] = counts.get(index, 0) + n
    return counts


def window_max_us(result, start_ns=None, end_ns=None):
    """The exact maximum (µs) over the same slices as window(); None when none has a request."""
    return max((s["latency_us"]["max"] for s in _slices_in(result, start_ns, end_ns)
                if s["latency_us"]["count"]), default=None)


def quantile_us(counts, q, half_magnitude=None, result=None, max_us=None):
    """The value at quantile q (0..1) of merged counts, in µs: the highest value of the bucket
    holding the ceil(q x total)-th value (HdrHistogram's rule), never above max_us, the
    window's exact maximum when given (window_max_us; max_us itself at q = 1), as the C++ side
    clips (LogLinearHistogram::at_quantile): where that value shares the maximum's bucket, the
    bucket's top is above every request. None when empty."""
    if half_magnitude is None:
        half_magnitude = (result or {}).get("histogram", {}).get(
            "sub_bucket_half_count_magnitude", 7)
    total = sum(counts.values())
    if total == 0:
        return None
    if q >= 1 and max_us is not None:
        return max_us
    clip = (lambda v: min(v, max_us)) if max_us is not None else (lambda v: v)
    rank = max(1, math.ceil(q * total))  # the same double arithmetic as the C++ side's
    seen = 0
    for index in sorted(counts):
        seen += counts[index]
        if seen >= rank:
            return clip(highest_at(index, half_magnitude) / 1000.0)
    return clip(highest_at(max(counts), half_magnitude) / 1000.0)


def at_least(counts, value_us, half_magnitude=7):
    """How many requests took at least value_us (by their bucket's lowest value)."""
    return sum(n for i, n in counts.items() if lowest_at(i, half_magnitude) >= value_us * 1000)
