"""The other host's `iobench server` for a two-host sweep (scripts/sweep --server-host, the EC2
case), usable only by that sweep: it listens on the address the sweep's clients connect to (not
every address unless asked), refuses any client without a random token made for this sweep
(sent to the server over ssh's stdin and to the clients in their environment, never on a command
line), keeps its TLS key in a private 0700 directory that is removed when it stops (also on
Ctrl-C, on a failure, or when the ssh connection drops), and is stopped by its own PID, so
another server on that host is left alone. It dies with its sweep even when the link dies
silently: ssh runs in batch mode with keepalives (the local side gives up within
ServerAliveInterval x ServerAliveCountMax), the sweep writes a heartbeat line to the server's
stdin every LEASE_S / 6 s, and the server stops itself when its stdin has been silent for
LEASE_S (`iobench server --stdin-lease`). Its start-up is bounded (START_S) and every line it
logs (warnings, the pre-auth summaries) is shown on the sweep's stderr.
Also the server a sweep finds already running (--connect), which it neither starts nor stops."""
import os
from dataclasses import replace
import queue
import secrets
import shlex
import subprocess
import sys
import threading
import time

from iobench_tools.lib.kernel import experiment
from iobench_tools.lib.kernel import runs as iobench_runs

# ssh never prompts, gives up connecting after 10 s and declares the link dead after 3 unanswered
# keepalives 5 s apart.
SSH_OPTIONS = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=5",
               "-o", "ServerAliveCountMax=3"]
LEASE_S = 30   # the remote server stops after this long without a heartbeat
START_S = 60   # from ssh's start to the server's "listening on" line

END = "--iobench-end-of-file--"
# Runs on the other host under sh: first removes the key directories of earlier sweeps whose shell
# is gone (killed: its EXIT trap never ran), then reads the token and the TLS files from stdin
# into a private directory (its shell's pid beside them), starts the server (arguments "$@")
# from it with the rest of stdin (the heartbeats: the server stops itself when they end or stop
# coming, --stdin-lease), and passes on what the server says; at its banner the key has been
# read, so the files are removed. ssh's hangup stops the server by its PID; when the server ends
# the directory is removed. (An asynchronous command's stdin is /dev/null unless redirected
# explicitly: hence fd 3.)
REMOTE = r"""
umask 077
base=${TMPDIR:-/tmp}
for old in "$base"/iobench-sweep.*/shell.pid; do
  [ -f "$old" ] && [ -O "$old" ] || continue
  kill -0 "$(cat "$old")" 2>/dev/null || rm -rf "$(dirname "$old")"
done
d=$(mktemp -d "$base/iobench-sweep.XXXXXX") || exit 1
echo $$ > "$d/shell.pid"
pid=
stop() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi; rm -rf "$d"; }
trap stop EXIT
trap 'exit 1' HUP INT TERM PIPE
IFS= read -r IOBENCH_AUTH_TOKEN || exit 1
export IOBENCH_AUTH_TOKEN
for f in server.crt server.key; do
  while IFS= read -r line && [ "$line" != "%s" ]; do printf '%%s\n' "$line"; done > "$d/$f"
done
cd "$d" || exit 1
echo "iobench-sweep: key directory $d"
mkfifo "$d/said" || exit 1
exec 3<&0
"$@" <&3 3<&- >"$d/said" 2>&1 &
pid=$!
exec 3<&-
while IFS= read -r line; do
  case $line in "iobench server "*) rm -f "$d/server.key" "$d/server.crt" ;; esac
  printf '%%s\n' "$line"
done < "$d/said"
wait "$pid"
""" % END


class RemoteServer:
    """`iobench server` started over ssh on the other host for the whole sweep: TCP on --port
    and, when the sweep has TLS cells, TLS on --port + 1 (--tls-listen), as a primary's port and
    tls-port. `env` is the environment the sweep's clients run with (the token); `keys_sent`, if
    given, is called once the TLS files are on their way (the caller forgets its copies)."""

    def __init__(self, target, iobench, port, tls_dir, kernel_counter, ssh_config=None,
                 bind=None, lease_s=LEASE_S, keys_sent=None):
        self.target, self.port = target, port
        # ssh -F FILE: the port, key and host-key policy for that host, if not ~/.ssh/config.
        self.ssh = ["ssh", *SSH_OPTIONS, *(["-F", ssh_config] if ssh_config else [])]
        self.ports = {"tcp": port, "tls": port + 1}
        self.host = target.split("@")[-1]
        self.bind = bind or self.host
        token = secrets.token_hex(32)
        self.env = dict(os.environ, IOBENCH_AUTH_TOKEN=token)
        # The server reads the heartbeats from the stdin it inherits (the rest of ssh's, after
        # the token and the TLS files).
        server = iobench_runs.ServerRun(listen=f"{self.bind}:{port}", quiet=True,
                                kernel_counter=kernel_counter, stdin_lease=lease_s)
        files = ["", ""]
        if tls_dir:
            server = replace(server, tls_listen=f"{self.bind}:{port + 1}", tls_cert="server.crt",
                             tls_key="server.key")
            files = [open(os.path.join(tls_dir, f)).read() for f in ("server.crt", "server.key")]
        args = server.argv(iobench)
        remote = shlex.join(["sh", "-c", REMOTE, "iobench-sweep-server", *args])
        self.proc = subprocess.Popen([*self.ssh, target, remote], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     preexec_fn=experiment.default_sigint)
        self.proc.stdin.write(token + "\n")
        for text in files:
            self.proc.stdin.write(text + ("" if text.endswith("\n") or not text else "\n")
                                  + END + "\n")
        self.proc.stdin.flush()
        if keys_sent:  # the local copies are not needed once ssh has them (not after start-up)
            keys_sent()
        self.key_dir = None
        self.lines = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        line = self._wait_started()
        if "listening on" not in line:
            self.stop()
            raise RuntimeError(f"remote server did not start within {START_S} s: "
                               f"{line.strip() or 'ssh ended'}")
        self.stopping = threading.Event()
        self.beat = threading.Thread(target=self._heartbeat, args=(lease_s / 6,), daemon=True)
        self.beat.start()

    def _pump(self):
        """Every line of the remote side, for as long as ssh runs: a pipe nobody reads would stop
        the server at its next log line."""
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _wait_started(self):
        """The server's "listening on" line (or its error, or ssh's end), within START_S; every
        other line (the clear-text warning, ssh's complaints) is shown as it comes."""
        deadline = time.monotonic() + START_S
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return ""
            if line is None:
                return ""
            if line.startswith("iobench-sweep: key directory "):
                self.key_dir = line.split("key directory ", 1)[1].strip()
                continue
            # The banner (not the clear-text warning, which also says "listening on").
            if line.startswith("iobench server ") or "error" in line:
                threading.Thread(target=self._show, daemon=True).start()
                return line
            sys.stderr.write(f"sweep: server on {self.host}: {line}")

    def _show(self):
        while (line := self.lines.get()) is not None:
            sys.stderr.write(f"sweep: server on {self.host}: {line}")

    def _heartbeat(self, every_s):
        while not self.stopping.wait(every_s):
            try:
                self.proc.stdin.write("\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                return

    def ca(self, tls_dir):
        return f"{tls_dir}/ca.crt"

    def stop(self):
        """Closes the remote shell's stdin: it stops the server by its PID, waits for it, removes
        the key directory and exits (bounded, 15 s; then ssh is killed)."""
        if getattr(self, "stopping", None):
            self.stopping.set()
            self.beat.join(timeout=5)
        try:
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            sys.stderr.write(f"sweep: the server on {self.host} did not stop within 15 s; "
                             f"its key directory {self.key_dir} may remain\n")


class RunningServer:
    """An `iobench server` already serving on the other host (the package's iobench.service or
    iobench.socket, started by its service manager): TCP on PORT, TLS on PORT + 1, its
    certificate checked against --tls-ca, its token (if it requires one) from --auth-token-file.
    The sweep neither starts nor stops it."""

    def __init__(self, where, tls_ca, token_file=None):
        host, _, port = where.rpartition(":") if where.count(":") == 1 else (where, "", "")
        if not host or (port and not (port.isdigit() and 0 < int(port) < 65536)):
            sys.exit(f"sweep: invalid --connect '{where}': expected HOST[:PORT]")
        self.host, self.tls_ca = host, tls_ca
        self.ports = {"tcp": int(port or 5210), "tls": int(port or 5210) + 1}
        # The clients read the file themselves (iobench's @FILE): the token is in no argument.
        self.env = dict(os.environ, IOBENCH_AUTH_TOKEN=f"@{os.path.abspath(token_file)}") \
            if token_file else None

    def ca(self, _tls_dir):
        return self.tls_ca

    def stop(self):
        pass
