"""The axes every scenario script shares, declared once: one name and one meaning each (issue #47).
A command adds the ones it has with its own default and a word on what one unit of it is; the
flag, its spelling and the base of its help live here. Pinning is `--cpus` wherever it appears
(iobench's sender,receiver or a server's primary,replicas); confining every process to a set of
CPUs is `--confine` (iobenchlib.add_confine_option)."""


def add_proto(ap, default="tcp,tls", note=""):
    """--proto: the protocols, a list of tcp and tls."""
    ap.add_argument("--proto", default=default,
                    help="protocols, a list: tcp, tls" + (f" ({note})" if note else ""))


def add_bufs(ap, default, note=""):
    """--bufs: the buffer (or chunk) sizes, a list; the size axis has this one name."""
    ap.add_argument("--bufs", default=default,
                    help="buffer sizes, a list" + (f": {note}" if note else ""))


def add_bytes(ap, default, per="run"):
    """--bytes: the payload each run (or connection, replica) moves."""
    ap.add_argument("--bytes", default=default, help=f"payload per {per}")


def add_cpus(ap, default, sides="sender CPU, receiver CPU", note="", placements=False):
    """--cpus: pinning, one CPU per side (iobench's --cpus; a real sync's primary and replicas).
    `placements`: the option repeats, each one more placement of every cell (the sweep's axis)."""
    ap.add_argument("--cpus", default=default, metavar=None if not placements else
                    "SENDER[,RECEIVER]|none", action="append" if placements else "store",
                    help=f"pinning, one CPU per side: {sides}" + (f" ({note})" if note else ""))


def add_progress_out(ap, keeps=""):
    """--out DIR for a script without a result folder of its own: where the experiment kernel
    keeps its progress (experiment.run_scenario), so the same command resumes a stopped
    comparison; `keeps`: what else the script writes there."""
    ap.add_argument("--out", metavar="DIR",
                    help=(f"keep {keeps} here, with " if keeps else "keep ")
                    + "the comparison's progress (the experiment kernel): the same command "
                      "resumes a stopped comparison")


def add_rounds(ap, default=5, note=""):
    """--rounds: interleaved rounds, every cell once per round."""
    ap.add_argument("--rounds", type=int, default=default,
                    help="interleaved rounds: every cell once per round"
                         + (f" ({note})" if note else ""))
