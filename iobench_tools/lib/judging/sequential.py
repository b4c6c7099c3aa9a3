"""Rule v2 read group-sequentially (docs/design-rule-v2-sequential.md, issue #66 item 5): a
pilot's one step at ALPHA_PILOT, then looks after each sweep from FIRST_LOOK on, each reading
every step of rule v2's sequence at its increment of the Lan-DeMets O'Brien-Fleming spending
function for ALPHA_MAIN (Bonferroni over the looks). A step is passed (rule v2's step at the
look's level), failed (it cannot pass: no gain past DELTA in any test, a harm shown above the
line, or the real server's harms unmeasured) or open; the walk stops at the first step that is
not passed."""
import math

from iobench_tools.lib.judging import designrule2 as rule
from iobench_tools.lib.kernel.iobenchlib import size_label

ALPHA_PILOT = 0.01         # the pilot's one step: may the sequence start at 4K?
ALPHA_MAIN = 0.04          # spent over the looks
PILOT_ROUNDS = 5
PILOT_SIZES = (1024, 4096, 8192, 16384, 65536)
ROUNDS = 10                # per sweep after the pilot
FIRST_LOOK = 3             # sweeps before the first look (HKSJ on k - 1 df)
MAX_SWEEPS = 12
MINUTES = 20
MARGIN_S = 60


def phi(x):
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def z_upper(p):
    """z with 1 - phi(z) = p (bisection)."""
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if 1 - phi(mid) > p else (lo, mid)
    return (lo + hi) / 2


def spent(t, total=ALPHA_MAIN):
    """Lan-DeMets O'Brien-Fleming: the one-sided alpha spent by information fraction t."""
    if t <= 0:
        return 0.0
    return 2 - 2 * phi(z_upper(total / 2) / math.sqrt(min(t, 1.0)))


def look_level(k, k_max, total=ALPHA_MAIN):
    """The level look k (after sweep k, k >= FIRST_LOOK) is read at: its increment of the
    spending function (the first look takes everything spent up to it)."""
    before = 0.0 if k <= FIRST_LOOK else spent((k - 1) / k_max, total)
    return spent(k / k_max, total) - before


def step_state(cpu, real, small, large, protos, level):
    """("passed" | "failed" | "open", rule v2's step at `level`, the words why when failed)."""
    s = rule.step(cpu, real, small, large, protos, level)
    if s["ok"]:
        return "passed", s, ""
    if s["unmeasured"]:
        return "failed", s, "the real server's harms are not measured on this host"
    gains, harms = s["conditions"]
    for proto, crit, _, p in harms:
        if rule.bounds(p, level)[0] > rule.LINE:
            return "failed", s, f"{proto.upper()} {crit} shown above x{1 + rule.DELTA:.2f}"
    if gains and all(rule.bounds(p, level)[0] > -rule.LINE for p in gains.values()):
        return "failed", s, (f"no test shows {size_label(large)} cheaper than "
                             f"{size_label(small)} by more than {rule.DELTA:.0%}: each is shown "
                             "short of it")
    return "open", s, ""


def walk(cpu, real, sizes, protos, level):
    """The sequence at one look: (answer so far, [(small, large, state, step, why)], "ended"
    (a step failed), "all" (every size passed) or "open" (a step still open))."""
    current, steps = sizes[0], []
    for large in sizes[1:]:
        state, s, why = step_state(cpu, real, current, large, protos, level)
        steps.append((current, large, state, s, why))
        if state == "failed":
            return current, steps, "ended"
        if state == "open":
            return current, steps, "open"
        current = large
    return current, steps, "all"


def plan_sweeps(seconds_left, sweep_seconds):
    """K_max: the sweeps that fit, at most MAX_SWEEPS (0 when not even FIRST_LOOK fit)."""
    fit = int(max(seconds_left - MARGIN_S, 0) // max(sweep_seconds, 1e-9))
    return min(fit, MAX_SWEEPS) if fit >= FIRST_LOOK else 0
