"""The one reader of iobench's JSON (`--json`, schema_version 1 and the committed older files):
a run's document as typed values, so that a script asks `run.sender.cpu_s_per_gib`, not
`doc["results"][0]["runs"][0]["sender"]["cpu_s_per_gib"]`, and a figure iobench renames is
renamed here once (issue #47; tests/scripts/test_architecture.py holds the scripts to it).

  Report      the document: context, placement, one SizeResult per size (--buf a list)
  SizeResult  one size: its measured runs, its counting run (--syscalls auto), iobench's summary
  Run         one run: its sender and receiver Side, its Group (several connections, fan-out)
  Side        one side's figures (bytes, wall, CPU, calls, syscalls, records, host busy)

A figure an older iobench did not write reads None. Writing iobench's format (a sweep's
rounds merged into one cell, per-connection lists summarised) is compact.py's and merge_rounds's
here: both keep the document as iobench wrote it.
"""
import json
from dataclasses import dataclass, field

from iobench_tools.lib.kernel.iobenchlib import stat

SIDES = ("sender", "receiver")


@dataclass(frozen=True)
class Syscalls:
    """The kernel's count of a side's syscalls: the data direction's, every one, per MiB."""
    data_direction: float = None
    total: float = None
    per_mib: float = None
    bytes_per_syscall: float = None
    source: str = None  # bpf, perf_event, task_io, none
    note: str = ""

    @classmethod
    def of(cls, d):
        return cls(**{k: d.get(k) for k in ("data_direction", "total", "per_mib",
                                             "bytes_per_syscall", "source")},
                   note=d.get("note", "")) if d else None


@dataclass(frozen=True)
class HostBusy:
    """The host's busy time over a side's data phase (every CPU), and the clock that read it."""
    source: str = "none"  # cpuidle, proc_stat, none
    busy_ns: float = 0

    @classmethod
    def of(cls, d):
        return cls(d.get("source", "none"), d.get("busy_ns", 0)) if d else cls()


@dataclass(frozen=True)
class Side:
    """One side of one run (iobench's SideResult)."""
    role: str
    bytes: int = None
    duration_ns: int = None
    throughput_gbps: float = None
    throughput_mib_s: float = None
    cpu_s: float = None
    cpu_user_s: float = None
    cpu_sys_s: float = None
    cpu_s_per_gib: float = None
    io_calls: int = None
    bytes_per_call: float = None
    voluntary_ctxsw: int = None
    segments_out: int = None
    records: int = 0        # TLS records this side sent (sender) or received (receiver)
    syscalls: Syscalls = None
    host_busy: HostBusy = field(default_factory=HostBusy)

    @classmethod
    def of(cls, d, role):
        if not d:
            return None
        tls = d.get("tls") or {}
        return cls(role=d.get("role", role), **{k: d.get(k) for k in (
            "bytes", "duration_ns", "throughput_gbps", "throughput_mib_s", "cpu_s", "cpu_user_s",
            "cpu_sys_s", "cpu_s_per_gib", "io_calls", "bytes_per_call", "voluntary_ctxsw")},
            segments_out=(d.get("segments") or {}).get("out"),
            records=tls.get("records_out" if d.get("role", role) == "sender" else "records_in", 0),
            syscalls=Syscalls.of(d.get("syscalls")), host_busy=HostBusy.of(d.get("host_busy")))

    @property
    def wall_s(self):
        return self.duration_ns / 1e9

    @property
    def busy(self):
        """The share of its data phase this side's CPU was busy, or None without a wall time."""
        return self.cpu_s / (self.duration_ns / 1e9) if self.duration_ns else None


@dataclass(frozen=True)
class Fanout:
    """One writer's fan-out to N replicas (`--fanout`): its CPU, writes and the replicas' ends."""
    writer_cpu_s: float
    writer_cpu_s_per_gib_delivered: float
    writer_cpu_us_per_chunk: float
    last_done_s: float
    slowest_s: float
    peak_chunk_bytes: int
    chunks: int
    writes: int
    waits: int
    stalls: int  # summed over the replicas

    @classmethod
    def of(cls, d):
        if not d:
            return None
        return cls(stalls=sum(r.get("stalls", 0) for r in d.get("replicas_detail", [])),
                   **{k: d[k] for k in ("writer_cpu_s", "writer_cpu_s_per_gib_delivered",
                                        "writer_cpu_us_per_chunk", "last_done_s", "slowest_s",
                                        "peak_chunk_bytes", "chunks", "writes", "waits")})


@dataclass(frozen=True)
class GroupSide:
    """One side of a many-connection run: its buffer memory, the sizing policy, its sleeps."""
    available: bool = False
    peak_buffer_bytes: int = 0
    policy: str = None
    vol_ctxsw: int = None

    @classmethod
    def of(cls, d):
        d = d or {}
        return cls(bool(d.get("available")), d.get("peak_buffer_bytes", 0), d.get("policy"),
                   (d.get("probe") or {}).get("vol_ctxsw"))


@dataclass(frozen=True)
class Group:
    """A run over several connections (or one writer's fan-out)."""
    sender: GroupSide
    receiver: GroupSide
    fairness: dict = None  # conn_gbps_min, conn_gbps_median, aggregate_gbps
    fanout: Fanout = None
    error: str = None

    @classmethod
    def of(cls, d):
        if d is None:
            return None
        return cls(GroupSide.of(d.get("sender")), GroupSide.of(d.get("receiver")),
                   d.get("fairness"), Fanout.of(d.get("fanout")), d.get("error"))


@dataclass(frozen=True)
class Run:
    sender: Side = None
    receiver: Side = None
    group: Group = None
    partial: bool = False
    round: int = None  # the sweep round it was measured in (merge_rounds), else None

    @classmethod
    def of(cls, d):
        if d is None:
            return None
        return cls(Side.of(d.get("sender"), "sender"), Side.of(d.get("receiver"), "receiver"),
                   Group.of(d.get("group")), bool(d.get("partial")), d.get("round"))

    def side(self, name):
        return self.sender if name == "sender" else self.receiver

    @property
    def both(self):
        """A run whose two sides both reported (not a partial one)."""
        return bool(self.sender and self.receiver and not self.partial)


@dataclass(frozen=True)
class SizeResult:
    label: str
    send_buf_bytes: int
    runs: tuple
    counting: Run = None  # --syscalls auto: the run that counted, apart from the measured ones
    summaries: dict = None  # iobench's own: side -> figure -> {median, min, max}

    @classmethod
    def of(cls, d):
        return cls(d["label"], d.get("send_buf_bytes"), tuple(Run.of(r) for r in d["runs"]),
                   Run.of(d.get("counting_run")), d.get("summary"))

    def summary(self, side):
        """iobench's summary of a side over the measured runs: {figure: {median, min, max}}."""
        return dict(self.summaries[side])

    def counted(self, side):
        """The side that counted this size's syscalls: the counting run's, else the first run's."""
        return (self.counting or self.runs[0]).side(side)


@dataclass(frozen=True)
class Report:
    context: dict
    results: tuple
    sender_cpu: int = None    # --cpus; None (or -1): unpinned
    receiver_cpu: int = None
    placement_recorded: bool = True  # False: an iobench from before it recorded placement

    @classmethod
    def of(cls, doc):
        opts = doc.get("options", {})
        return cls(doc.get("context", {}), tuple(SizeResult.of(r) for r in doc["results"]),
                   opts.get("sender_cpu"), opts.get("receiver_cpu"), "sender_cpu" in opts)

    @property
    def first_run(self):
        """The first size's first run (a one-size, one-run invocation's only run)."""
        return self.results[0].runs[0]


def read(doc):
    """A parsed document (a dict) as a Report."""
    return Report.of(doc)


def loads(text):
    return Report.of(json.loads(text))


def load(path):
    with open(path) as f:
        return Report.of(json.load(f))


# A side's summary figures (iobench's SideSummary), each read from one run's Side.
SUMMARY_FIGURES = {
    "bytes": lambda s: s.bytes,
    "wall_s": lambda s: s.wall_s,
    **{k: (lambda s, k=k: getattr(s, k)) for k in (
        "throughput_gbps", "throughput_mib_s", "cpu_user_s", "cpu_sys_s", "cpu_s",
        "cpu_s_per_gib", "io_calls", "bytes_per_call")},
    "syscalls": lambda s: s.syscalls.data_direction,
    "syscalls_total": lambda s: s.syscalls.total,
    "syscalls_per_mib": lambda s: s.syscalls.per_mib,
    "bytes_per_syscall": lambda s: s.syscalls.bytes_per_syscall,
    "records": lambda s: s.records,
}
# Taken from the counting run when there is one (--syscalls auto), as iobench does.
COUNTED = ("syscalls", "syscalls_total", "syscalls_per_mib", "bytes_per_syscall")


def stat_or_zeros(values):
    """median/min/max; zeros where a figure has no runs (a partial cell)."""
    return stat(values) or {"median": 0.0, "min": 0.0, "max": 0.0}


def summarize(result, side):
    """A side's summary over a size's measured runs (a SizeResult, or its dict as iobench wrote
    it): median, min and max of each figure, as iobench's own summary block has them."""
    if isinstance(result, dict):
        result = SizeResult.of(result)
    sides = [r.side(side) for r in result.runs if r.side(side)]
    out = {k: stat_or_zeros([f(s) for s in sides]) for k, f in SUMMARY_FIGURES.items()}
    counting = result.counting.side(side) if result.counting else None
    if counting:
        out.update({k: stat_or_zeros([SUMMARY_FIGURES[k](counting)]) for k in COUNTED})
    return out


def merge_rounds(docs):
    """One cell's document from its rounds (scripts/sweep --order round-robin|shuffle: one
    iobench run per cell per round), in iobench's format: the first round's document holding
    every round's measured runs, numbered in round order, each marked with its round, and the
    summaries recomputed over them; the syscall figures come from the first round's counting
    run."""
    merged = json.loads(json.dumps(docs[0]))
    for i, result in enumerate(merged["results"]):
        runs = []
        for rnd, doc in enumerate(docs, 1):
            for run in doc["results"][i]["runs"]:
                runs.append(dict(run, run=len(runs), round=rnd))
        result["runs"] = runs
        result["summary"] = {side: summarize(result, side) for side in SIDES}
    merged["rounds"] = len(docs)
    return merged


def watch_processes(path):
    """`iobench watch --json`'s per-process figures: {pid: {...}} as it wrote them."""
    with open(path) as f:
        return json.load(f)["watch"]["processes"]


def watch_event_loop(path):
    """`iobench watch --event-loop --json`'s event loop (watch.event_loop: each class's count,
    quantiles in µs and buckets), or None without --event-loop."""
    with open(path) as f:
        return json.load(f)["watch"]["event_loop"]
