"""Rule v2 across links and hosts (docs/design-rule-v2-links.md, issue #66 item 4): for one
group of sweeps (one host, one link) the group's own answer, the same at the level a union over
the host's links allows, and whether a given design answer holds there (not beaten: no larger
size replaces it by a direct step; not harmful: against each smaller size, in each protocol, its
CPU's one-sided upper bound below 1 + DELTA). Across hosts: one pair's per-host estimates pooled
by random effects over hosts, the host term (tau) stated. Series are pooling's
({proto: [{size: {round: cost}} per sweep]})."""
import math

from iobench_tools.lib.judging import pooling
from iobench_tools.lib.judging import designrule2 as rule

PROTOS = ("tcp", "tls")
SETS = {"design": PROTOS, "tcp": ("tcp",), "tls": ("tls",)}


def own_answers(cpu, sizes, level=rule.ALPHA, real=None):
    """{"design"|"tcp"|"tls": (answer, steps)} by rule v2's sequence: CPU, and the real server's
    memory and p99 where `real` holds them for this host and link (designinputs.real_series);
    without them no step between the real server's built sizes passes."""
    return {name: rule.answer(cpu, real or {}, sizes, protos, level)
            for name, protos in SETS.items()}


def sweeps_for_bound(studies, small, large, rounds, line=rule.LINE, level=rule.ALPHA):
    """Sweeps of `rounds` rounds whose pooled one-sided bound would fall below `line` at this
    pair's observed mean and spread (each sweep's within error and the between-sweep tau), or
    None when the observed mean itself is not below the line (more sweeps would not show it)."""
    pooled = pooling.pooled_pair(studies, small, large)
    if pooled is None or pooled["log"] >= line:
        return None
    sd = pooling.per_round_sd(studies, small, large)[0]
    per_sweep = math.hypot(sd / math.sqrt(rounds), pooled["tau"])
    for k in range(2, 1000):
        if pooled["log"] + rule.t_upper(level, k - 1) * per_sweep / math.sqrt(k) < line:
            return k
    return None


def holds(cpu, sizes, design, rounds, real=None):
    """Does `design` hold on this group? {"holds", "beaten": [step of design -> each larger size
    measured, with the real server's harms where `real` has them], "harms": [(proto, smaller,
    pooled, upper, sweeps_needed or None)] every non-inferiority test, "failed": those whose
    upper bound is not below 1 + DELTA}."""
    if design not in sizes:
        return {"holds": False, "missing": True, "beaten": [], "harms": [], "failed": []}
    beaten = [rule.step(cpu, real or {}, design, large, PROTOS) for large in sizes
              if large > design]
    harms = []
    for proto in PROTOS:
        for small in (s for s in sizes if s < design):
            p = pooling.pooled_pair(cpu.get(proto, []), small, design)
            if p is None:
                continue
            upper = rule.bounds(p, rule.ALPHA)[1]
            need = None if upper < rule.LINE else sweeps_for_bound(cpu[proto], small, design,
                                                                   rounds)
            harms.append((proto, small, p, upper, need))
    failed = [h for h in harms if not h[3] < rule.LINE]
    ok = not failed and not any(s["ok"] for s in beaten) and bool(harms)
    return {"holds": ok, "missing": False, "beaten": beaten, "harms": harms, "failed": failed}


def over_hosts(per_host):
    """[(mean log, se, k)] of one pair on several hosts, pooled by random effects over hosts
    (pooling.pool: DerSimonian-Laird tau^2 between hosts, HKSJ on hosts - 1 df), or None."""
    return pooling.pool([p for p in per_host if p is not None]) if len(per_host) > 1 else None
