"""The one place the Python half spells iobench's command line: a typed run (a dataclass, one
field per iobench option it uses; None leaves iobench's default) turned into argv. The scripts
build runs, never flags: tests/scripts/test_runs.py holds them to it.

  ClientRun   `iobench [client --connect HOST:PORT] --buf ... --json OUT -q`
  ServerRun   `iobench server --listen ... [--tls-listen ...]`
  WatchRun    `iobench watch --pid ... --json OUT`
  PayloadRun  `iobench payload --bytes ... --out OUT`
  LoadRun     `iobench load --connect HOST:PORT --rate N --json OUT -q`
"""
from dataclasses import dataclass, field, fields, replace
from typing import ClassVar


def _flag(name):
    return "--" + name.replace("_", "-")


def _options(run, skip=()):
    """--name value for every field set (None: not given; True: the bare flag; False: none)."""
    out = []
    for f in fields(run):
        value = getattr(run, f.name)
        if f.name in skip or value is None or value is False:
            continue
        flag = f.metadata.get("flag") or _flag(f.name)
        if value is True:
            out.append(flag)
        elif isinstance(value, (list, tuple)):
            for v in value:
                out += [flag, str(v)]
        else:
            out += [flag, str(value)]
    return out


def _field(flag=None, **kw):
    return field(metadata={"flag": flag} if flag else {}, **kw)


@dataclass(frozen=True)
class ClientRun:
    """One client run: loopback (a private server), or against `connect` (`iobench client`)."""
    connect: str = None          # HOST:PORT[,HOST:PORT...]: two-host
    proto: str = None
    buf: str = None              # a size, a list (16k,64k) or adaptive
    bytes: str = None
    engine: str = None
    send_engine: str = None
    repeat: object = None        # a count, or "auto"
    warmup: int = None
    syscalls: str = None
    conns: int = None
    bytes_spread: str = None
    stagger: str = None
    budget: str = None
    cpus: str = None
    source_window: str = None
    fanout: str = None
    timeout: str = None
    cipher: str = None
    no_nodelay: bool = False
    write_pattern: str = None
    reverse: bool = False
    tls_ca: str = None
    cache_dir: str = None
    json: str = None             # "-" (stdout) or a file
    quiet: bool = _field("-q", default=True)
    extra: tuple = ()            # options a user typed for iobench (passed on as given)

    def argv(self, iobench="iobench"):
        head = [iobench, "client", "--connect", self.connect] if self.connect else [iobench]
        return head + _options(self, skip=("connect", "extra")) + list(self.extra)

    def shown(self):
        """The run as a reader types it (no output file, not quiet)."""
        plain = replace(self, json=None, quiet=False)
        return " ".join(["./iobench" if not self.connect else "iobench", *plain.argv("x")[1:]])


def set_option(argv, name, value):
    """An iobench command line (a list) with the option of field `name` given `value`: replaced
    where it is, added at the end where it is not (iobench refuses an option given twice)."""
    flag, out = _flag(name), list(argv)
    if value is True:  # a bare flag
        return out if flag in out else out + [flag]
    if flag in out:
        out[out.index(flag) + 1] = str(value)
    else:
        out += [flag, str(value)]
    return out


class _Subcommand:
    """A run of one iobench subcommand: `iobench SUBCOMMAND --option value ...`."""
    SUBCOMMAND: ClassVar[str] = ""

    def argv(self, iobench="iobench"):
        return [iobench, self.SUBCOMMAND, *_options(self)]


@dataclass(frozen=True)
class ServerRun(_Subcommand):
    SUBCOMMAND: ClassVar[str] = "server"
    listen: str = None
    tls_listen: str = None
    tls_cert: str = None
    tls_key: str = None
    quiet: bool = False
    kernel_counter: str = None
    stdin_lease: object = None
    handshake_timeout: object = None
    idle_timeout: object = None
    cache_dir: str = None


@dataclass(frozen=True)
class WatchRun(_Subcommand):
    SUBCOMMAND: ClassVar[str] = "watch"
    pid: tuple = ()              # one --pid each
    until_exit: object = None
    event_loop: bool = False     # also the event loop's iterations and large writes, timed
    large_write: object = None
    json: str = None


@dataclass(frozen=True)
class PayloadRun(_Subcommand):
    SUBCOMMAND: ClassVar[str] = "payload"
    bytes: object = None
    seed: object = None
    out: str = None
    cache_dir: str = None
    quiet: bool = _field("-q", default=False)


@dataclass(frozen=True)
class LoadRun(_Subcommand):
    SUBCOMMAND: ClassVar[str] = "load"
    connect: str = None
    rate: object = None
    conns: int = None
    duration: str = None
    command: str = None
    json: str = None
    quiet: bool = _field("-q", default=True)
