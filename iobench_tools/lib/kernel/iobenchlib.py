"""What every script shares: where the iobench binary is, running it to JSON, byte sizes as
iobench spells them, and the median [min-max] every table prints. The scripts read iobench's
JSON only; nothing here knows its internals."""
import argparse
import dataclasses
import json
import os
import re
import socket
import statistics
import subprocess
import sys

# iobench_tools/lib/ -> the checkout (or /usr/share/iobench where the package installs it)
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
GiB = 1 << 30
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([kmg]?)(?:i?b)?$")


def binary():
    """The iobench binary: $IOBENCH_BIN, else the Release build scripts/setup makes, else (the
    scripts as the package installs them, /usr/share/iobench/scripts) the one on PATH."""
    if os.environ.get("IOBENCH_BIN"):
        return os.environ["IOBENCH_BIN"]
    if os.path.exists(os.path.join(ROOT, "CMakeLists.txt")):  # a checkout
        return os.path.join(ROOT, "build", "release", "iobench")
    import shutil
    return shutil.which("iobench") or "/usr/bin/iobench"


def free_port():
    """A TCP port free on loopback right now (the kernel's pick), for a server started next."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def require_binary(prog, path):
    """Stops `prog` with one line unless `path` is an executable."""
    if not os.access(path, os.X_OK):
        sys.exit(f"{prog}: error: no iobench at {path} (run scripts/setup, or set IOBENCH_BIN)")
    return path


def parse_size(text):
    """'16k', '64KiB', '100M', '1.5G', '1500' -> bytes (binary units, as iobench reads them).
    ValueError names the text unless it is a positive whole number of bytes."""
    m = _SIZE.match(str(text).strip().lower())
    if not m:
        raise ValueError(f"invalid size '{text}' (e.g. 16k, 100M)")
    value = float(m.group(1)) * _UNITS[m.group(2)]
    if value <= 0 or value != int(value):
        raise ValueError(f"invalid size '{text}': expected a positive whole number of bytes")
    return int(value)


def parse_size_list(text):
    """'1k,4k,16k' -> [1024, 4096, 16384]; ValueError names the first bad item."""
    return [parse_size(item) for item in str(text).split(",")]


class _HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The description as written (its usage block keeps its lines); every option's default shown."""


def size_label(n):
    """16384 -> "16K": a size as the tables and file names spell it."""
    if n == 0:
        return "0"
    for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
        if n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


class _CheckedParser(argparse.ArgumentParser):
    """With IOBENCH_CHECK_ARGS set, a command stops once its arguments parse (the docs test
    feeds it every command line the documentation quotes): nothing is run."""

    _whole = False  # inside parse_args, whose extra arguments are refused after

    def check_before_run(self, check):
        """`check(parsed)` -> None, or the one line a run would stop with: run under
        IOBENCH_CHECK_ARGS too, so "arguments ok" is never said of a command a run refuses
        (a path that is not there)."""
        self.__dict__.setdefault("_checks", []).append(check)

    def parse_args(self, args=None, namespace=None):
        self._whole = True
        try:
            parsed = super().parse_args(args, namespace)
        finally:
            self._whole = False
        return self._checked(parsed)

    def parse_known_args(self, args=None, namespace=None):
        parsed, extra = super().parse_known_args(args, namespace)
        # A command that passes the rest on (to iobench) is checked here; parse_args after.
        return (parsed if self._whole else self._checked(parsed)), extra

    def _checked(self, parsed):
        refuse_renamed(self, parsed)  # an old name given is refused before anything else
        for check in self.__dict__.get("_checks", []):
            problem = check(parsed)
            if problem:
                sys.exit(problem)
        if os.environ.get("IOBENCH_CHECK_ARGS"):
            print(f"{self.prog}: arguments ok")
            sys.exit(0)
        return parsed


def command_parser(doc, prog=None):
    """The argparse parser of a command: its description is the module docstring's first
    paragraph, whole (the rest is for readers of the code), and every option's help ends with
    its default. tests/scripts/test_python_package.py holds every command to both."""
    return _CheckedParser(prog=prog, description=doc.strip().split("\n\n")[0],
                          formatter_class=_HelpFormatter)


def add_renamed_option(parser, old, new, why):
    """An option's old name, kept only to be refused with its new one (refuse_renamed): a script
    whose axis or meaning was renamed (`why`) says what to type instead, in one line."""
    dest = "renamed_" + old.lstrip("-").replace("-", "_")
    parser.add_argument(old, dest=dest, default=None, help=argparse.SUPPRESS)
    parser.set_defaults(**{dest + "_to": (new, why)})


def refuse_renamed(parser, a):
    """Stops with one line when an old name added by add_renamed_option was given."""
    for key, value in vars(a).items():
        if key.startswith("renamed_") and not key.endswith("_to") and value is not None:
            new, why = getattr(a, key + "_to")
            parser.error(f"--{key[len('renamed_'):].replace('_', '-')} is {new} now ({why}): "
                         f"use {new} {value}")


def add_confine_option(parser, help_text):
    """--confine CPUS, a measurement script's confinement of every process it runs to a set of
    CPUs (taskset -c). Named apart from iobench's --cpus, which pins the sender and the receiver
    one CPU each; --cpus here is refused with the new name (refuse_renamed)."""
    parser.add_argument("--confine", default="", metavar="CPUS", help=help_text)
    add_renamed_option(parser, "--cpus", "--confine",
                       "it confined every process; iobench's --cpus pins each side")


def add_binary_option(parser):
    """--iobench, the binary a command runs: binary()'s pick unless given."""
    parser.add_argument("--iobench", default=binary(),
                        help="the iobench binary (IOBENCH_BIN, else the checkout's Release build, "
                             "else the one on PATH)")


def size_arg(text):
    """argparse `type=` for one size: the error names the value."""
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


_RESULT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def result_name(text):
    """argparse `type=` for a results NAME (a folder under results/): letters, digits, - and _,
    beginning with a letter or digit, so it never climbs out of results/ ('..', '/') nor reads
    as an option or a hidden folder."""
    if not _RESULT_NAME.fullmatch(text) or len(text) > 100:
        raise argparse.ArgumentTypeError(
            f"invalid name '{text}' (letters, digits, - and _, beginning with a letter or digit)")
    return text


def format_size(n):
    """The shortest exact spelling, as iobench's tables and file names write it: 16K, 1M, 1500."""
    for unit, factor in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor}{unit}"
    return str(n)


def median(values):
    values = list(values)
    return statistics.median(values) if values else 0.0


def stat(values):
    """{'median', 'min', 'max'} of the values that are not None, or None when there are none."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def work_counts(row):
    """A sweep row's wire work (sweeplib.rows_of): bytes per run, the sender's write syscalls,
    the receiver's read syscalls (the data direction, from the counting run) and the TLS records
    each way; None for a figure the row's summary does not have."""
    s, v = row.get("sender") or {}, row.get("receiver") or {}

    def figure(side, key):
        return side[key]["median"] if key in side else None

    return {"bytes": figure(s, "bytes"), "writes": figure(s, "syscalls"),
            "reads": figure(v, "syscalls"), "records_out": figure(s, "records"),
            "records_in": figure(v, "records")}


def fmt_stat(s, digits=3, dash="-"):
    """'0.583 [0.571-0.602]'; 'n/a' for None."""
    if s is None:
        return "n/a"
    return f"{s['median']:.{digits}f} [{s['min']:.{digits}f}{dash}{s['max']:.{digits}f}]"


def write_result_folder(out_dir, doc, report, indent=1):
    """A study's result folder: results.json (the record, `doc`, whose "kind" names the study)
    and report.md (`report`, the text made from that record); returns report.md's path relative
    to the checkout."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(doc, f, indent=indent)
    path = os.path.join(out_dir, "report.md")
    with open(path, "w") as f:
        f.write(report)
    return os.path.relpath(path, ROOT)


def write_or_print(prog, out_dir, doc, report):
    """A study's result folder when `out_dir` is given (write_result_folder, its path said),
    else the report on stdout: what a command with --out does either way."""
    if out_dir:
        print(f"{prog}: wrote {write_result_folder(out_dir, doc, report)}")
    else:
        sys.stdout.write(report)


def recorded_command(script):
    """How this run of scripts/SCRIPT is written into its results: the script and its
    arguments, any path inside the checkout relative to its root."""
    args = [os.path.relpath(x, ROOT) if x.startswith(ROOT) else x for x in sys.argv[1:]]
    return " ".join([f"scripts/{script}", *args])


def through_netns_link(argv, link_options):
    """An iobench run (`argv`, the binary first) run by scripts/netns-link between the namespaces
    it makes, with its own options (--rate, --mtu, --replicas, --name); the link finds iobench
    through IOBENCH_BIN, which the caller's environment sets."""
    return [os.path.join(ROOT, "scripts", "netns-link"), *link_options, "--", *argv[1:]]


def command(args, iobench=None, cpus=""):
    """iobench's argv for `args`, under `taskset -c CPUS` when given."""
    pin = ["taskset", "-c", cpus] if cpus else []
    return [*pin, iobench or binary(), *args]


def run_json(run, prog, iobench=None, cpus="", env=None, timeout=600, fail=None):
    """Runs a client run (lib/kernel/runs.py's ClientRun) with its JSON on stdout and returns the
    document; a failed run stops `prog` with iobench's own error line, or raises
    `fail(why, exit_status)` when given (experiment.failed_run: the kernel's RunFailed)."""
    cmd = command(dataclasses.replace(run, json="-", quiet=True).argv("iobench")[1:], iobench,
                  cpus)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        why = f"iobench ran past {timeout} s: {' '.join(cmd)}"
        if fail:
            raise fail(why, None) from None
        sys.exit(f"{prog}: error: {why}")
    if p.returncode != 0:
        lines = p.stderr.strip().splitlines()
        why = f"iobench failed (exit {p.returncode}): {lines[-1] if lines else ' '.join(cmd)}"
        if fail:
            raise fail(why, p.returncode)
        sys.exit(f"{prog}: error: {why}")
    return json.loads(p.stdout)
