"""The one judge of one study (issue #66 item 6): rule v2's fixed sequence (designrule2, through
sequential's passed / failed / open steps) on one study's paired rounds, whatever the study is —
one sweep's protocol, a fleet's pair, the real writer's knee, a fan-out scenario at one N. Every
per-study verdict the tools print is this one; the design's answer pools a host's campaign with
the same rule (scripts/design-answer).

A study is {size: {round: cost}} per protocol (pooling's series); a size's rounds pair it with
another's. The real server's harms are never measured in a study, so a step between two of the
sizes it is built at (designrule2.REAL_SIZES) fails for want of them, as in a campaign."""
import math
from dataclasses import dataclass, field

from iobench_tools.lib.judging import designrule2 as rule
from iobench_tools.lib.judging import sequential
from iobench_tools.lib.kernel.iobenchlib import size_label

MIN_ROUNDS = 2   # a size needs two paired rounds to be read (a t on one degree of freedom)
MORE_CAP = 1000  # rounds past which "more" says more rounds would not settle it


@dataclass
class Verdict:
    """size: the answer (None: nothing to read); state: "ended" (the sequence stopped at a step
    that cannot pass), "all" (every size measured passed: a larger one may be cheaper still),
    "open" (a step that more rounds could still pass or fail), "unread" (fewer than two sizes
    with MIN_ROUNDS paired rounds); steps: [(small, large, "passed"|"failed"|"open", why)];
    more: rounds per cell the open step likely needs (None when settled, or when more rounds
    would not settle it); level: each step's one-sided level."""
    size: object
    state: str
    steps: list = field(default_factory=list)
    more: object = None
    level: float = rule.ALPHA

    @property
    def settled(self):
        return self.state in ("ended", "all")

    def words(self):
        """One line: the answer, how the sequence ended, and each step."""
        if self.state == "unread":
            return "not read: fewer than two sizes with two paired rounds or more"
        how = {"ended": "the sequence stopped at a step that cannot pass",
               "all": "every size measured replaced the one before: a larger size may be "
                      "cheaper still",
               "open": "a step is still open" + (f" (about {self.more} rounds per cell would "
                                                 "likely settle it)" if self.more else "")}
        steps = "; ".join(f"{size_label(s)} -> {size_label(lg)} {st}" + (f" ({why})" if why
                                                                         else "")
                          for s, lg, st, why in self.steps)
        return f"rule v2 names {size_label(self.size)}: {how[self.state]} ({steps})"


def readable(series):
    """The sizes of {size: {round: cost}} with MIN_ROUNDS rounds or more."""
    return {s: c for s, c in series.items() if len(c) >= MIN_ROUNDS}


def judge(by_proto, protos=None, level=rule.ALPHA):
    """Rule v2's sequence on one study: {proto: {size: {round: cost}}} read together (a gain in
    any protocol, no harm in every one, as the design's one chunk), or one protocol's."""
    protos = tuple(protos or sorted(by_proto))
    series = {p: readable(by_proto.get(p) or {}) for p in protos}
    sizes = sorted(set.intersection(*(set(s) for s in series.values()))) if series else []
    if len(sizes) < 2:
        return Verdict(None, "unread", level=level)
    cpu = {p: [series[p]] for p in protos}
    size, steps, end = sequential.walk(cpu, {}, sizes, protos, level)
    out = [(small, large, state, why + shown_gain(s) if state == "failed" and s["unmeasured"]
            else why) for small, large, state, s, why in steps]
    if end == "open":
        return Verdict(size, "open", out, rounds_to_settle(steps[-1][3], level), level)
    return Verdict(size, "ended" if end == "ended" else "all", out, level=level)


def shown_gain(step):
    """What a step refused for want of the real server's harms had shown: its gains, so a page
    says what the missing harms stand in front of."""
    if not step["gains"]:
        return "; no gain past 10% shown either"
    return "; its gain was shown: " + ", ".join(
        f"{proto.upper()} {crit.upper() if crit == 'cpu' else crit} {bound_text(p, upper)}"
        for proto, crit, p, upper in step["gains"])


def bound_text(p, upper):
    """'x0.723 (bound x0.857)': a pooled log ratio and its one-sided bound, as ratios."""
    return f"x{math.exp(p['log']):.3f} (bound x{math.exp(upper):.3f})"


def rounds_to_settle(step, level):
    """Rounds per cell at which the open step's binding tests would likely clear their lines at
    the observed means and spreads: every harm below x(1 + DELTA), and one gain past it (the
    cheapest to show); None when an observed mean sits on the wrong side of its line (more
    rounds would not move it there)."""
    gains, harms = step["conditions"]
    need = [_rounds(p, rule.LINE - p["log"], level) for _, _, _, p in harms
            if not rule.bounds(p, level)[1] < rule.LINE]
    if not step["gains"] and gains:
        need.append(min((n for n in (_rounds(p, -rule.LINE - p["log"], step["alpha"])
                                     for p in gains.values()) if n), default=None))
    if not need or None in need:
        return None
    return max(need)


def _rounds(p, room, level):
    """Rounds at which t * sd / sqrt(n) fits in `room` (the line less the observed mean log)."""
    if room <= 0:
        return None
    sd = p["se"] * math.sqrt(p["df"] + 1)
    for n in range(MIN_ROUNDS, MORE_CAP):
        if rule.t_upper(level, n - 1) * sd / math.sqrt(n) < room:
            return n
    return None


def of_rows(rows):
    """{size: {round: cost}} of sweep rows (sweeplib's: "buf", "rounds", "total_cpu_runs"); a
    row without rounds (an older sweep's) pairs nothing and is left out."""
    out = {}
    for r in rows:
        if r.get("rounds") and r.get("total_cpu_runs"):
            out[r["buf"]] = dict(zip(r["rounds"], r["total_cpu_runs"]))
    return out


def of_runs(cells):
    """{size: {round: cost}} of cells whose runs ran once per round in order (the experiment
    kernel's cells, each run at its round's index), or {} when the cells ran unequal counts
    (a failed run would shift the pairing)."""
    counts = {len(runs) for _, runs in cells}
    if len(counts) != 1:
        return {}
    return {size: dict(enumerate(runs)) for size, runs in cells}
