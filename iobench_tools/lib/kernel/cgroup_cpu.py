"""CPU of every process of a command, measured from outside in a cgroup of its own.

A parent's rusage (and GNU time) counts only the children it waited for; a cgroup counts every
process started inside it, waited for or not, until the last one has exited. Uses the cgroup v1
cpuacct controller where the host has it (cpuacct.usage: exact, from the scheduler's runtime),
else cgroup v2's cpu.stat (usage_usec, same source). The user/sys split of both is tick-sampled.

  with CpuGroup() as g:
      server = g.popen([...])        # every process started this way is inside the group
      g.run([...])                    # subprocess.run inside the group
  g.cpu_s, g.user_s, g.sys_s          # after the with-block: all of them, every process exited
"""
import os
import subprocess
import time

V1_ROOT = "/sys/fs/cgroup/cpuacct"
V2_ROOTS = ("/sys/fs/cgroup/unified", "/sys/fs/cgroup")


class CgroupUnavailable(RuntimeError):
    pass


def _writable_dir(path):
    return os.path.isdir(path) and os.access(path, os.W_OK)


def cgroup_root():
    """(version, directory) of a hierarchy this process can create cgroups in with CPU usage."""
    if _writable_dir(V1_ROOT) and os.path.exists(os.path.join(V1_ROOT, "cpuacct.usage")):
        return 1, V1_ROOT
    for root in V2_ROOTS:
        if _writable_dir(root) and os.path.exists(os.path.join(root, "cgroup.procs")) and \
                os.path.exists(os.path.join(root, "cpu.stat")):
            return 2, root
    raise CgroupUnavailable(
        "no writable cgroup with CPU accounting (needs root, or a delegated cgroup v2 subtree; "
        f"looked at {V1_ROOT} and {', '.join(V2_ROOTS)})")


def describe():
    """How the figures are obtained, for a results file's sources."""
    version, root = cgroup_root()
    if version == 1:
        return f"cgroup v1 cpuacct ({root}): cpuacct.usage, usage_user/usage_sys"
    return f"cgroup v2 ({root}): cpu.stat usage_usec, user_usec/system_usec"


class CpuGroup:
    _count = 0

    def __init__(self, exit_timeout_s=30, cpus=None):
        self.version, root = cgroup_root()
        CpuGroup._count += 1
        self.path = os.path.join(root, f"iobench-measure-{os.getpid()}-{CpuGroup._count}")
        self.exit_timeout_s = exit_timeout_s
        self.cpu_s = self.user_s = self.sys_s = None
        self.stragglers = 0  # processes still alive at the deadline, killed
        self.cpus = cpus  # a CPU set every process of the group is confined to (None: any)

    def __enter__(self):
        os.mkdir(self.path)
        return self

    def _join(self):
        # In the child between fork and exec: everything it starts stays in the group.
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        if self.cpus:
            os.sched_setaffinity(0, self.cpus)  # inherited by everything it starts

    def popen(self, argv, **kw):
        return subprocess.Popen(argv, preexec_fn=self._join, **kw)

    def run(self, argv, **kw):
        return subprocess.run(argv, preexec_fn=self._join, **kw)

    def pids(self):
        with open(os.path.join(self.path, "cgroup.procs")) as f:
            return [int(p) for p in f.read().split()]

    def _wait_empty(self):
        deadline = time.monotonic() + self.exit_timeout_s
        while self.pids():
            if time.monotonic() > deadline:
                left = self.pids()
                self.stragglers = len(left)
                for pid in left:
                    try:
                        os.kill(pid, 9)
                    except ProcessLookupError:
                        pass
                deadline = time.monotonic() + 10
            time.sleep(0.005)

    def _read(self, name):
        with open(os.path.join(self.path, name)) as f:
            return f.read()

    def __exit__(self, *exc):
        try:
            self._wait_empty()
            if self.version == 1:
                self.cpu_s = int(self._read("cpuacct.usage")) / 1e9
                self.user_s = int(self._read("cpuacct.usage_user")) / 1e9
                self.sys_s = int(self._read("cpuacct.usage_sys")) / 1e9
            else:
                stat = dict(line.split() for line in self._read("cpu.stat").splitlines())
                self.cpu_s = int(stat["usage_usec"]) / 1e6
                self.user_s = int(stat["user_usec"]) / 1e6
                self.sys_s = int(stat["system_usec"]) / 1e6
        finally:
            for _ in range(100):
                try:
                    os.rmdir(self.path)
                    break
                except OSError:  # busy for a moment after the last exit
                    time.sleep(0.01)
        return False
