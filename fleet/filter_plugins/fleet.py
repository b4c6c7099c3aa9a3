"""Filters the fleet playbook uses: checking the pairs and putting them into waves, so that pairs
run at once only when they share no host (Ansible then runs a wave's pairs in parallel)."""
import re

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


class FilterError(Exception):
    pass


def fleet_check(pairs, hosts):
    """The pairs as given, or an error naming the first bad one: each has a name (letters,
    digits, - and _; unique), an instance_type, a primary and its replicas (one: a sweep; more:
    the one-writer fan-out scenario), all inventory hosts, no replica the primary."""
    if not isinstance(pairs, list) or not pairs:
        raise FilterError("fleet_pairs: expected a list of pairs (name, instance_type, primary, "
                          "replicas)")
    seen = set()
    for p in pairs:
        name = p.get("name", "") if isinstance(p, dict) else ""
        if not NAME.match(str(name)) or name in seen:
            raise FilterError(f"fleet_pairs: invalid or repeated pair name '{name}'")
        seen.add(name)
        for key in ("instance_type", "primary", "replicas"):
            if not p.get(key):
                raise FilterError(f"fleet_pairs: pair '{name}' has no {key}")
        replicas = p["replicas"]
        if not isinstance(replicas, list) or len(set(replicas)) != len(replicas):
            raise FilterError(f"fleet_pairs: pair '{name}': replicas must list distinct hosts, "
                              f"got {replicas}")
        for h in [p["primary"], *replicas]:
            if h not in hosts:
                raise FilterError(f"fleet_pairs: pair '{name}': '{h}' is not in the inventory")
        if p["primary"] in replicas:
            raise FilterError(f"fleet_pairs: pair '{name}': the primary is its own replica")
    return pairs


def fleet_waves(pairs):
    """[[pair, ...], ...]: each pair in the first wave none of whose pairs shares a host with
    it, in the order given; a wave's pairs run at once, the waves one after another."""
    waves, busy = [], []
    for p in pairs:
        hosts = {p["primary"], *p["replicas"]}
        for i, used in enumerate(busy):
            if not used & hosts:
                waves[i].append(p)
                used |= hosts
                break
        else:
            waves.append([p])
            busy.append(set(hosts))
    return waves


def fleet_pair_of(waves, wave, primary):
    """The pair `primary` leads in wave `wave`, or {} when it leads none there."""
    for p in waves[int(wave)]:
        if p["primary"] == primary:
            return p
    return {}


def fleet_servers(pairs):
    """Every replica host, once, in the order first named."""
    out = []
    for p in pairs:
        for h in p["replicas"]:
            if h not in out:
                out.append(h)
    return out


class FilterModule:
    def filters(self):
        return {"fleet_check": fleet_check, "fleet_waves": fleet_waves,
                "fleet_pair_of": fleet_pair_of, "fleet_servers": fleet_servers}
