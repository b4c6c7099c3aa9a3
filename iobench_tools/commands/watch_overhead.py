"""What `iobench watch` costs the process it watches, on a real transfer: an iobench loopback run
(client and its forked server, sender and receiver pinned) with and without a watch on it, one
of each per round, interleaved; medians [min..max] of each side's CPU per GiB and the ratio.
Ranges that overlap are parity within noise.

With --event-loop the watch also times the event loop (`iobench watch --event-loop`); give it
--engine epoll, whose loop it times, and compare with the same command without --event-loop.

  scripts/watch-overhead [--rounds 5] [--bytes 512M] [--buf 16k] [--cpus 0,1] [--engine E]
                         [--event-loop] [--json FILE]"""
import json
import os
import subprocess
import sys

from iobench_tools.lib.kernel import axes
from iobench_tools.lib.kernel import experiment, iobenchlib
from iobench_tools.lib.kernel import iobenchjson
from iobench_tools.lib.kernel import runs as iobench_runs
from iobench_tools.lib.kernel.iobenchlib import binary, stat

IOBENCH = binary()


def one_run(a, watched):
    """The run's sender and receiver CPU per GiB; with a watch on the client (and so on the
    server it forks) from before it starts."""
    cmd = iobench_runs.ClientRun(buf=a.buf, bytes=a.bytes, cpus=a.cpus, json="-",
                                 engine=a.engine).argv(IOBENCH)
    # The run waits for a line on stdin, so the watch attaches before its first syscall counts.
    run = subprocess.Popen(["sh", "-c", 'read go; exec "$@"', "sh", *cmd], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watch = None
    if watched:
        watch = subprocess.Popen(iobench_runs.WatchRun(pid=(run.pid,), until_exit=run.pid,
                                                       event_loop=a.event_loop,
                                                       json=os.devnull).argv(IOBENCH),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # Its start line comes once the programs are attached.
        if "iobench: watching" not in watch.stderr.readline():
            run.kill()
            watch.kill()
            run.wait()
            raise experiment.RunFailed(f"iobench watch: {watch.stderr.read().strip()}",
                                       refused=True)
    try:
        out, err = run.communicate("go\n", timeout=600)
    except subprocess.TimeoutExpired:
        run.kill()
        run.communicate()
        raise experiment.RunFailed("iobench ran past 600 s") from None
    finally:
        if watch:
            watch.wait(timeout=60)
    if run.returncode != 0:
        raise experiment.RunFailed(f"iobench: {err.strip()}", refused=run.returncode == 2)
    r = iobenchjson.loads(out).first_run
    return r.sender.cpu_s_per_gib, r.receiver.cpu_s_per_gib


def main(argv=None):
    ap = iobenchlib.command_parser(__doc__)
    axes.add_rounds(ap, 5, "a watched and an unwatched run each")
    axes.add_bytes(ap, "512M")
    ap.add_argument("--buf", default="16k",
                    help="buffer size of every run")
    axes.add_cpus(ap, "0,1", note="iobench --cpus")
    ap.add_argument("--engine", choices=("blocking", "epoll", "uring"),
                    help="every run's engine (default: iobench's)")
    ap.add_argument("--event-loop", action="store_true",
                    help="the watch times the event loop too (iobench watch --event-loop)")
    ap.add_argument("--json", help="also write the figures here")
    axes.add_progress_out(ap)
    a = ap.parse_args(argv)
    if not 1 <= a.rounds <= 100:
        ap.error(f"invalid --rounds {a.rounds}: expected 1..100")
    cells = [{"id": "unwatched", "watched": False}, {"id": "watched", "watched": True}]
    done, failed = experiment.run_scenario(
        "watch-overhead", cells, a.rounds,
        lambda c, rnd, attempt: {"cpu": one_run(a, c["watched"])}, out_dir=a.out,
        identity={"bytes": a.bytes, "buf": a.buf, "cpus": a.cpus, "engine": a.engine,
                  "event_loop": a.event_loop})
    if failed:
        sys.exit("watch-overhead: error: " + "; ".join(failed))
    runs = {c["watched"]: [r["cpu"] for r in done.get(c["id"], [])] for c in cells}
    doc = {"command": "scripts/watch-overhead " + " ".join(sys.argv[1:]), "rounds": a.rounds}
    doc.update(engine=a.engine, event_loop=a.event_loop)
    print(f"{a.rounds} interleaved rounds, {a.bytes} at {a.buf}, CPUs {a.cpus}"
          f"{f', engine {a.engine}' if a.engine else ''}"
          f"{', watch --event-loop' if a.event_loop else ''}: CPU s/GiB")
    for i, side in enumerate(("sender", "receiver")):
        plain = stat([r[i] for r in runs[False]])
        watched = stat([r[i] for r in runs[True]])
        apart = plain["max"] < watched["min"] or watched["max"] < plain["min"]
        ratio = watched["median"] / plain["median"]
        doc[side] = {"unwatched": plain, "watched": watched, "ratio": ratio,
                     "verdict": "apart" if apart else "parity within noise"}
        print(f"  {side:<8} unwatched {plain['median']:.3f} [{plain['min']:.3f}..{plain['max']:.3f}]"
              f"  watched {watched['median']:.3f} [{watched['min']:.3f}..{watched['max']:.3f}]"
              f"  x{ratio:.2f} ({doc[side]['verdict']})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=2)


if __name__ == "__main__":
    main()
