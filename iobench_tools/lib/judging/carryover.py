"""What carries over inside a sweep's rounds: does a run cost more or less by its place in the
round, or by the cell that ran just before it? Each run is set against its own cell (its cost
over the cell's median) and its own round (less that round's median, the host that minute); what
is left is grouped by place and by predecessor. A Williams-balanced schedule (scripts/sweep
--order balanced, the default) puts every cell in every place and after every other cell equally
often, so both effects are estimated apart from the cells; under round-robin every cell holds
one place and follows one cell every round, so neither can be told from the cell itself (the
A/A control's twin, last in every round, is the only trace: docs/confidence.md)."""
import math

from iobench_tools.lib.kernel.iobenchlib import median
from iobench_tools.lib.judging.statslib import median_ci


def residuals(rows):
    """{(cell id, round): log(cost / the cell's median) less the round's median of those}."""
    raw = {}
    for r in rows:
        costs = r.get("total_cpu_runs") or []
        if not r.get("rounds") or not costs:
            continue
        level = median(costs)
        for rnd, cost in zip(r["rounds"], costs):
            if cost > 0 and level > 0:
                raw[(r["cell_id"], rnd)] = math.log(cost / level)
    by_round = {}
    for (_, rnd), x in raw.items():
        by_round.setdefault(rnd, []).append(x)
    return {k: x - median(by_round[k[1]]) for k, x in raw.items()}


def places_held(schedule):
    """{cell id: the set of places it ran in}: 1 for every cell under round-robin."""
    held = {}
    for order in schedule:
        for place, cid in enumerate(order):
            held.setdefault(cid, set()).add(place)
    return held


def effects(rows, schedule, rounds_run=None):
    """{"place": [(place, ratio, (low, high), n)], "after": [(cell id, ratio, (low, high), n)],
    "estimable": bool, "why": str}: each group's median run cost over its cell's (round
    removed), with the 95% bootstrap interval of that median. `rows` hold every one-connection
    cell measured in rounds (the A/A twins too); `schedule` the manifest's rounds in order."""
    schedule = schedule[:rounds_run] if rounds_run else schedule
    res = residuals(rows)
    if not res or not schedule:
        return {"place": [], "after": [], "estimable": False,
                "why": "no runs measured in rounds (--order cell, or a sweep from before rounds)"}
    held = places_held(schedule)
    if all(len(p) == 1 for p in held.values()):
        return {"place": [], "after": [], "estimable": False,
                "why": "every cell ran in the same place after the same cell every round "
                       "(--order round-robin): place and predecessor cannot be told from the "
                       "cell itself"}
    place, after = {}, {}
    for rnd, order in enumerate(schedule, 1):
        for i, cid in enumerate(order):
            x = res.get((cid, rnd))
            if x is None:
                continue
            place.setdefault(i + 1, []).append(x)
            if i > 0:
                after.setdefault(order[i - 1], []).append(x)

    def summary(groups):
        out = []
        for key, xs in sorted(groups.items()):
            ratios = [math.exp(x) for x in xs]
            out.append((key, median(ratios), median_ci(ratios) if len(xs) > 1 else
                        (ratios[0], ratios[0]), len(xs)))
        return out

    return {"place": summary(place), "after": summary(after), "estimable": True, "why": ""}


def beyond(groups, floor_half_width):
    """The groups whose interval lies wholly beyond the A/A floor (both ends above 1 + floor or
    below 1 - floor): what carries over more than two runs of one command differ."""
    return [g for g in groups if g[2][0] > 1 + floor_half_width or g[2][1] < 1 - floor_half_width]


def text(rows, manifest, floor_half_width):
    """The recommendation's lines on carry-over, beside the A/A floor's half-width (None: no
    control in this sweep)."""
    e = effects(rows, manifest.get("schedule") or [], manifest.get("rounds_run"))
    order = manifest.get("order", "round-robin")
    if not e["estimable"]:
        return [f"Carry-over (order {order}): not estimated: {e['why']}.", ""]

    def extreme(groups):
        return max(groups, key=lambda g: abs(math.log(g[1])) if g[1] > 0 else 0)

    def show(g, name):
        return f"{name} x{g[1]:.3f} [{g[2][0]:.3f}..{g[2][1]:.3f}] ({g[3]} runs)"

    floor = (f"the A/A floor ±{100 * floor_half_width:.1f}%" if floor_half_width is not None
             else "no A/A floor in this sweep")
    first, last = e["place"][0], e["place"][-1]
    lines = [f"Carry-over (order {order}; each run over its cell's median, its round's level "
             f"removed, median with its 95% interval): by place in the round, "
             f"{show(first, 'first')}, {show(last, 'last')}, the largest "
             f"{show(extreme(e['place']), 'place ' + str(extreme(e['place'])[0]))}; by the cell "
             f"just before, the largest {show(extreme(e['after']), 'after ' + extreme(e['after'])[0]) if e['after'] else 'none'}; "
             f"beside {floor}."]
    if floor_half_width is not None:
        far = beyond(e["place"], floor_half_width) + beyond(e["after"], floor_half_width)
        lines[-1] += (f" **{len(far)} group(s) carry over beyond the floor**: "
                      + "; ".join(show(g, f"place {g[0]}" if isinstance(g[0], int) else
                                       f"after {g[0]}") for g in far) + "."
                      if far else " Both effects are within the floor.")
    return lines + [""]
