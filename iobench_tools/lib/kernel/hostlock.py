"""A quiet host (issue #76): one measurement at a time. A study takes the host's measurement
lock exclusively and refuses to start beside another, naming who holds it; the test suites' link
and fleet tests, and the studies they run, take it shared (IOBENCH_HOST_LOCK=shared, which
scripts/test sets), so they run beside each other but never beside a study. And what the host
spent outside the study's own processes during each run is measured (host_cpu), so a report can
state it instead of assuming it was zero."""
import contextlib
import fcntl
import os
import sys
import time

LOCK_DIRS = ("/run/lock", "/tmp")
NAME = "iobench-measurement.lock"


def lock_path():
    """The lock of this host: one per network namespace, so the emulated hosts of the fleet
    tests (namespaces sharing one filesystem) are hosts of their own. IOBENCH_HOST_LOCK_PATH
    names another (the lock's own tests)."""
    if os.environ.get("IOBENCH_HOST_LOCK_PATH"):
        return os.environ["IOBENCH_HOST_LOCK_PATH"]
    try:
        net = f"-net{os.stat('/proc/self/ns/net').st_ino}"
    except OSError:
        net = ""
    name = NAME.replace(".lock", f"{net}.lock")
    for d in LOCK_DIRS:
        if os.path.isdir(d) and os.access(d, os.W_OK):
            return os.path.join(d, name)
    return os.path.join("/tmp", name)


def _open(path):
    """The lock file, made readable by every user (0644), or opened read-only where another user
    made it (flock works on either); (descriptor, writable)."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644), True
    except PermissionError:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC), False


def _holder(path):
    try:
        with open(path) as f:
            return f.read().strip() or "unknown"
    except OSError:
        return "unknown"


SHARED_WAIT_S = 300  # a test suite waits this long for a study to end, then refuses


def _take(fd, op, wait_s):
    """flock(fd, op) within wait_s seconds (polled every 0.2 s); False when it stayed held."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, op | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)


@contextlib.contextmanager
def measurement(prog, wait_s=None):
    """The host's measurement lock for the body: exclusive for a study (refused at once, in one
    line, when another study or a test suite holds it), shared under IOBENCH_HOST_LOCK=shared
    (the suites' own runs, waiting up to SHARED_WAIT_S for a study to end), none under
    IOBENCH_HOST_LOCK=off or =held (a study whose parent holds it: host-answer's sweeps)."""
    mode = os.environ.get("IOBENCH_HOST_LOCK", "exclusive")
    if mode in ("off", "held"):
        yield None
        return
    if wait_s is None:
        wait_s = SHARED_WAIT_S if mode == "shared" else 0.0
    path = lock_path()
    fd, writable = _open(path)
    shared = mode == "shared"
    before = os.environ.get("IOBENCH_HOST_LOCK")
    try:
        if not _take(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX, wait_s):
            sys.exit(f"{prog}: error: another measurement holds this host "
                     f"({_holder(path)}; {path}): two at once measure each other "
                     "(wait for it, or IOBENCH_HOST_LOCK=off to measure anyway)")
        if not shared:
            if writable:  # who holds it, for the refusal of the next
                os.ftruncate(fd, 0)
                os.write(fd, f"pid {os.getpid()}: {' '.join(sys.argv)[:200]}, since "
                             f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n".encode())
            os.environ["IOBENCH_HOST_LOCK"] = "held"  # the study's own children run under it
        yield path
    finally:
        if not shared and os.environ.get("IOBENCH_HOST_LOCK") == "held":
            if before is None:
                os.environ.pop("IOBENCH_HOST_LOCK", None)
            else:
                os.environ["IOBENCH_HOST_LOCK"] = before
        with contextlib.suppress(OSError):
            os.close(fd)


def host_busy_s():
    """Every CPU's busy time so far (user, nice, system, irq, softirq, steal; /proc/stat), s."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    ticks = [int(x) for x in fields[:8]]
    busy = ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6] + ticks[7]
    return busy / os.sysconf("SC_CLK_TCK")


def own_cpu_s():
    """This process's CPU and its reaped children's so far, s."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class OutsideCpu:
    """CPU the host spent outside this process and its reaped children over a span: the host's
    busy time less their own (tick-sampled on both sides: within a few ticks)."""

    def __init__(self):
        self.host, self.own = host_busy_s(), own_cpu_s()

    def seconds(self):
        return max(0.0, (host_busy_s() - self.host) - (own_cpu_s() - self.own))


def settle(limit_s=30.0, span_s=0.5, busy_share=0.05):
    """Waits, up to `limit_s`, for a quiet host before a measurement: the dirty pages written
    so far flushed (sync(2): a sync's RDB files, written back later by the kernel's flusher,
    cost the next cell seconds of CPU outside its processes) and then a `span_s` in which every
    CPU together was busy under `busy_share` of one. Returns (seconds waited, whether it was
    quiet). Under IOBENCH_HOST_LOCK=shared (the test suites: the host is theirs, never quiet) or
    =off (measuring anyway) it waits for nothing: (0.0, False)."""
    if os.environ.get("IOBENCH_HOST_LOCK") in ("shared", "off"):
        return 0.0, False
    t0 = time.monotonic()
    os.sync()
    while True:
        outside = OutsideCpu()
        time.sleep(span_s)
        if outside.seconds() < busy_share * span_s:
            return time.monotonic() - t0, True
        if time.monotonic() - t0 >= limit_s:
            return time.monotonic() - t0, False


class SharedHold:
    """The lock held shared for an object's life (a test's network namespaces, emulated hosts):
    a study run by hand cannot start beside them, nor they beside it (waited for up to
    SHARED_WAIT_S, then RuntimeError naming the holder)."""

    def __init__(self):
        self.fd = None
        if os.environ.get("IOBENCH_HOST_LOCK", "exclusive") in ("off", "held"):
            return
        path = lock_path()
        self.fd, _ = _open(path)
        if not _take(self.fd, fcntl.LOCK_SH, SHARED_WAIT_S):
            self.release()
            raise RuntimeError(f"a measurement holds this host: {_holder(path)}")

    def release(self):
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None
