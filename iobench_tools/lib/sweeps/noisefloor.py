"""A sweep's noise floor: an A/A control. One cell (scripts/sweep --control SIZE: the first
protocol's one-connection cell of that size, per placement) runs twice in every round under two
names; the two are the same command, so their ratio's interval is how far apart this host, in
this sweep, puts two cells that cannot differ. The recommendation prints it first; a tolerance
inside it is flagged (no difference of that tolerance can be told from noise), and --repeat auto plans
its rounds from it."""
from dataclasses import replace

from iobench_tools.lib.sweeps import sweeplib

CONTROL_SUFFIX = "-aa"


def control_cells(cells, size):
    """The twins of the control: for each placement, the first protocol's and engine's
    one-connection cell of `size`, again under the id ID-aa (marked `control_of`: ID)."""
    twins, seen = [], set()
    for c in cells:
        if c.buf != size or c.conns != 1 or c.cpus in seen:
            continue
        seen.add(c.cpus)
        cid = c.id + CONTROL_SUFFIX
        twins.append(replace(c, id=cid, file=f"cells/{cid}.json", control_of=c.id))
    return twins


def floor(original, twin):
    """The twin's cost over the original's: ratio, half-width of its 95% interval, (low,
    high), how (paired over N rounds, or unpaired)."""
    ratio, hw, (low, high), _, how = sweeplib.compare(original, twin)
    return {"ratio": ratio, "half_width": hw, "low": low, "high": high, "how": how,
            "runs": min(len(original["total_cpu_runs"]), len(twin["total_cpu_runs"]))}


def excludes_one(f):
    """Why no statement of this sweep is settled when its A/A interval excludes 1 (None: it covers
    1, or no control ran): two runs of one command differ here by more than the runs' noise,
    so a difference between two cells may be no more than theirs."""
    if not f or f["low"] <= 1 <= f["high"]:
        return None
    return (f"the A/A control's interval excludes 1 (x{f['ratio']:.3f} [{f['low']:.3f}.."
            f"{f['high']:.3f}], {f['how']}): two runs of one command differ in this sweep by "
            "their place or what ran before them, so a difference between cells may be no more "
            "than theirs. What would decide it: a sweep with --order balanced (the default: "
            "every cell in every place and after every other equally often) whose A/A interval "
            "covers 1, with the carry-over line above within the floor")


def rounds_for(f, tolerance):
    """Rounds at which the A/A interval's half-width would be half the tolerance (half-widths
    fall as 1/sqrt(rounds)): the least a difference of this tolerance needs, by this host's noise."""
    if not f["runs"] or f["half_width"] <= 0:
        return f["runs"]
    return max(f["runs"], sweeplib.runs_for(f["runs"], f["half_width"], tolerance / 2))


def text(pairs, tolerance, floors=None):
    """The recommendation's first lines: each control's interval, and whether the tolerance
    lies inside it. `floors`: each pair's floor() when the caller has them (a bootstrap each)."""
    if not pairs:
        return ["Noise floor: this sweep ran no A/A control (scripts/sweep --control SIZE runs "
                "one cell twice per round under two names); the intervals below are the only "
                "measure of its noise.", ""]
    lines = []
    for (original, twin), f in zip(pairs, floors or [floor(o, t) for o, t in pairs]):
        inside = f["low"] < 1 - tolerance or f["high"] > 1 + tolerance
        lines.append(
            f"Noise floor (A/A control, {original['placement']}): "
            f"{original['proto'].upper()} {original['label']} run twice per round under two "
            f"names: the second costs x{f['ratio']:.3f} ± {100 * f['half_width']:.1f}% of the "
            f"first [{f['low']:.3f}..{f['high']:.3f}], {f['how']}. "
            + ("**Its interval excludes 1**: two runs of one command differ by their place in "
               "the round (what ran just before them), so cells of one round are not drawn alike;"
               " `--order balanced` (the default) spreads that over the cells alike. " if f["low"] > 1 or f["high"] < 1
               else "")
            + (f"**The {tolerance:.0%} tolerance lies inside this noise**: two sizes within "
               f"{tolerance:.0%} of each other cannot be told apart by these runs (about "
               f"{rounds_for(f, tolerance)} rounds would make the control's interval "
               f"±{100 * tolerance / 2:.1f}%)." if inside else
               f"The {tolerance:.0%} tolerance lies outside it."))
    return lines + [""]
