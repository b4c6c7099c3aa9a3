"""Lanes: `--lane K/N` keeps every Nth collected test, starting at the Kth, so scripts/test can run
one suite as N pytest processes side by side. Most tests wait on sockets and timeouts; two
processes overlap those waits on 2 cores. Round-robin over the collection order, not whole files,
because a file's tests are often alike in length (a file of 2.6 s timeouts, a file of 0.1 s
parses), so dealing them out one by one balances the lanes. Only for suites whose tests already
run beside each other safely (tests/e2e names its namespaces, cgroups and files by process)."""
import os
import re

import pytest

# The suites' studies share the host's measurement lock with each other (a study of one test
# beside another's), never with a study run by hand (iobench_tools/lib/kernel/hostlock.py).
os.environ.setdefault("IOBENCH_HOST_LOCK", "shared")


def pytest_addoption(parser):
    parser.addoption("--lane", default=None, metavar="K/N",
                     help="run only the Kth of N round-robin lanes of the collected tests")


def parse_lane(text):
    """(k, n) from 'K/N' with 1 <= K <= N, or a UsageError naming the bad value."""
    m = re.fullmatch(r"([0-9]+)/([0-9]+)", text or "")
    if not m or not 1 <= int(m[1]) <= int(m[2]):
        raise pytest.UsageError(f"invalid --lane '{text}' (expected K/N with 1 <= K <= N)")
    return int(m[1]), int(m[2])


def pytest_collection_modifyitems(config, items):
    text = config.getoption("--lane")
    if text is None:
        return
    k, n = parse_lane(text)
    kept = [item for i, item in enumerate(items) if i % n == k - 1]
    dropped = [item for i, item in enumerate(items) if i % n != k - 1]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept


# CI's time is CPU (2 cores busy from setup to the last tier): each lane's log lists its ten
# costliest tests by CPU, its own and every child's it reaped (a script's servers, a build), beside
# --durations' wall times, so a test that waits and one that computes are told apart.
_cpu = {}


def _cpu_seconds():
    import resource
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start = _cpu_seconds()
    yield
    _cpu[item.nodeid] = _cpu_seconds() - start


def pytest_terminal_summary(terminalreporter):
    if not _cpu:
        return
    # Every test's, where scripts/test asks (build/test-logs/LANE.cpu.tsv): summed over the
    # lanes and tiers, a file's cost shows where no single lane's ten do.
    if path := os.environ.get("IOBENCH_TEST_CPU_LOG"):
        with open(path, "w") as out:
            out.writelines(f"{cpu:.2f}\t{nodeid}\n" for nodeid, cpu in _cpu.items())
    total = sum(_cpu.values())
    terminalreporter.write_sep("=", f"ten costliest tests by CPU (of {total:.1f} CPU-s in all)")
    for nodeid, cpu in sorted(_cpu.items(), key=lambda kv: -kv[1])[:10]:
        terminalreporter.write_line(f"{cpu:8.2f} CPU-s  {nodeid}")
