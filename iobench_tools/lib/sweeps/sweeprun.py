"""Running a sweep's cells (scripts/sweep) on the experiment kernel (lib/kernel/experiment.py: its
schedule, retries, interrupts and the stop after a round): what one run of a cell is, the
manifest as the kernel's progress record, the rounds merged into each cell's JSON, and when
--repeat auto stops (every statement settled, the rounds the A/A noise floor planned, or
--max-repeat)."""
import argparse
import json
import os
import sys
import time

from iobench_tools.lib.kernel import compact
from iobench_tools.lib.kernel import experiment
from iobench_tools.lib.kernel import iobenchjson
from iobench_tools.lib.judging import studyjudge
from iobench_tools.lib.sweeps import noisefloor
from iobench_tools.lib.sweeps import sweeplib


def progress(done, total, started, note):
    width = 30
    filled = int(width * done / total) if total else width
    elapsed = time.monotonic() - started
    eta = (elapsed / done * (total - done)) if done else 0
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} cells, "
                     f"elapsed {elapsed:5.0f}s, ETA {eta:5.0f}s  {note[:40]:<40}")
    sys.stderr.flush()


def run_attempt(file, out_dir, attempt, command):
    """One attempt at a cell's file (cells/ID.json, or a round's cells/ID.rN.json). A failed
    attempt's partial figures (iobench writes its report when a run fails) are kept beside the
    cell as cells/ID.failedN.json; it raises the kernel's RunFailed, refused (not retried, no
    later round) when iobench refused the command line (exit status 2)."""
    path = os.path.join(out_dir, file)
    cmd, env = command(path + ".tmp")
    p = experiment.run_child(cmd, env=env, timeout=None)
    if p.returncode == 0 and os.path.exists(path + ".tmp"):
        os.replace(path + ".tmp", path)
        return
    lines = (p.stderr or p.stdout).strip().splitlines()
    partial = None
    if os.path.exists(path + ".tmp"):
        partial = file.removesuffix(".json") + f".failed{attempt}.json"
        os.replace(path + ".tmp", os.path.join(out_dir, partial))
    raise experiment.failed_run(lines[-1] if lines else f"exit status {p.returncode}",
                                p.returncode,
                                detail={"exit_status": p.returncode, "partial_file": partial})


def round_file(cell, rnd):
    return cell.file.removesuffix(".json") + f".r{rnd}.json"


def schedule(n, a):
    """The order the cells run in (the experiment kernel's schedule: experiment.rounds_order).
    --order balanced (the default), round-robin and shuffle run --repeat rounds, each running
    every cell once (one measured run), so drift over a long sweep — thermal, a noisy
    neighbour, the link — lands on every cell alike; balanced also puts every cell in every place
    of a round and after every other cell equally often (a Williams square relabelled by
    --seed), so what carries over from one run to the next is no bias on one cell. --order cell
    runs each cell's repeats back to back."""
    if a.order == "cell":
        return [list(range(n))]
    return experiment.rounds_order(n, a.max_repeat if a.repeat == "auto" else a.repeat, a.order,
                                   a.seed)


def round_args(a, rnd):
    """The options of round `rnd` (from 1): one measured run. The first round counts syscalls
    as --syscalls asks; with auto, later rounds count nothing (their CPU is measured uncounted
    either way; the counting run of round 1 gives the syscall figures)."""
    ra = argparse.Namespace(**vars(a))
    ra.repeat = 1
    if rnd > 1 and a.syscalls == "auto":
        ra.syscalls = "off"
    return ra


def finish_rounds(rec, rounds, out_dir):
    """Once every round ran: the cell's JSON merged from its rounds, or the cell failed."""
    bad = [(int(n), x) for n, x in rec["rounds"].items() if x["status"] != "ok"]
    if bad or len(rec["rounds"]) < rounds:
        rec["status"] = "failed"
        n, x = min(bad) if bad else (len(rec["rounds"]) + 1, {"error": "not run"})
        rec["error"] = f"round {n}: {x['error']}" if rounds > 1 else x["error"]
        return
    docs = [json.load(open(os.path.join(out_dir, rec["rounds"][str(n)]["file"])))
            for n in range(1, rounds + 1)]
    compact.write_cell(os.path.join(out_dir, rec["file"]), iobenchjson.merge_rounds(docs))
    rec["status"] = "ok"
    rec.pop("error", None)
    compact.drop_round_files(rec, out_dir)


def decided_after(rnd, cells, recs, out_dir, a):
    """--repeat auto, after round `rnd`: True once every statement the recommender would make
    (rule v2 on this sweep, per placement and protocol, one connection: studyjudge) is settled,
    or open where more rounds would not settle it, and the A/A control's interval covers 1, with
    at least MIN_AUTO_ROUNDS rounds (or the rounds the noise floor planned); until then the
    sweep runs another round."""
    if rnd < MIN_AUTO_ROUNDS:
        return False
    rows = []
    for cell in cells:
        rec = recs[cell.id]
        rounds = [rec.get("rounds", {}).get(str(n)) for n in range(1, rnd + 1)]
        if rec["status"] == "ok" or not all(x and x["status"] == "ok" for x in rounds):
            continue  # finished before (its rounds are fixed) or broken: not this decision's
        docs = [json.load(open(os.path.join(out_dir, x["file"]))) for x in rounds]
        rows += sweeplib.rows_of(cell, iobenchjson.merge_rounds(docs))
    plan_from_noise_floor(rows, rnd, a)
    planned = (getattr(a, "noise_floor", None) or {}).get("planned_rounds")
    # While the A/A interval excludes 1 no statement is settled (recommend says so): run on.
    trusted = noisefloor.excludes_one(getattr(a, "noise_floor", None)) is None
    a.stopped = stop_reason(rnd, open_statements(rows) if trusted else None, planned,
                            a.max_repeat)
    return a.stopped is not None


def open_statements(rows):
    """The one-connection statements of these rows (per placement and protocol) that more
    rounds could still settle: [(placement, proto, studyjudge.Verdict)], each open with the
    rounds per cell its open step likely needs ("more")."""
    out = []
    for (placement, proto), rs in sweeplib.one_connection_groups(rows).items():
        v = studyjudge.judge({proto: studyjudge.of_rows(rs)})
        if v.state == "open" and v.more is not None:
            out.append((placement, proto, v))
    return out


# Rounds before --repeat auto judges that the cap cannot settle a statement: the rounds-needed
# estimate reads the spread of a few rounds, too rough on fewer to stop on.
HOPELESS_AFTER = 8


def stop_reason(rnd, open_steps, planned, max_repeat):
    """Why --repeat auto stops after round `rnd`, or None to run another: every statement
    settled (`open_steps` empty; None: not judged, the A/A interval excludes 1); the rounds the
    A/A noise floor planned reached — the host's own noise says that many resolve a difference
    of the tolerance; or, from HOPELESS_AFTER rounds, every open statement needing more rounds
    per cell than the cap leaves (more rounds would spend the time and state the same open
    step). The stop reads the sweep after every round, so a statement it settles is one study's
    at a level its looks have spent more than once: the design's answer comes from fixed
    campaigns (scripts/design-answer) or host-answer's spending plan."""
    if open_steps is not None and not open_steps:
        return "every statement settled"
    if planned is not None and rnd >= planned:
        return f"the {planned} rounds the noise floor planned"
    if open_steps and rnd >= HOPELESS_AFTER and rnd < max_repeat and all(
            v.more > max_repeat - rnd for _, _, v in open_steps):
        need = ", ".join(f"{proto.upper()} about {v.more}" for _, proto, v in open_steps)
        return (f"no open statement can be settled within --max-repeat {max_repeat} (rounds "
                f"per cell needed: {need})")
    return None


def plan_from_noise_floor(rows, rnd, a):
    """--repeat auto: the rounds the A/A control's interval calls for at this tolerance, said
    once (after MIN_AUTO_ROUNDS) and kept in the manifest with the floor as it stands."""
    for original, twin in sweeplib.control_pairs(rows):
        f = noisefloor.floor(original, twin)
        planned = noisefloor.rounds_for(f, a.tolerance)
        if rnd == MIN_AUTO_ROUNDS:
            sys.stderr.write(
                f"\nsweep: noise floor (A/A) after {rnd} rounds: ±{100 * f['half_width']:.1f}%; "
                f"a {a.tolerance:.0%} tolerance calls for about {planned} rounds"
                + (f" (more than --max-repeat {a.max_repeat}: statements may "
                   "stay undecided)" if planned > a.max_repeat else
                   ": the sweep stops there if its statements are not settled before") + "\n")
        a.noise_floor = dict(f, rounds=rnd, planned_rounds=planned)


MIN_AUTO_ROUNDS = 5


def attempts_of(rec):
    """Every failed attempt of a cell, over its rounds when it ran in rounds."""
    if "rounds" in rec:
        return [x for _, r in sorted(rec["rounds"].items(), key=lambda kv: int(kv[0]))
                for x in r.get("attempts", [])]
    return rec.get("attempts", [])


def resume_records(cells, previous, out_dir, per_round):
    """Each cell's record: a finished one kept as it was (its file still there), others pending
    with the rounds they already ran. Returns the records and how many were kept."""
    recs, skipped = {}, 0
    for cell in cells:
        old = previous.get(cell.id)
        if old and old.get("status") == "ok" and os.path.exists(os.path.join(out_dir, cell.file)):
            recs[cell.id] = old
            skipped += 1
        else:
            recs[cell.id] = dict(cell.record(), status="pending")
            if per_round:
                recs[cell.id]["rounds"] = (old or {}).get("rounds") or {}
    return recs, skipped


def manifest_record(r, file=None):
    """A kernel record of one run as the manifest keeps it (a round's, or a cell's own in
    --order cell); one read back from the manifest is kept as it is."""
    if "figures" not in r:
        return r
    out = {"status": r["status"], "seconds": r.get("seconds") if r["status"] == "ok" else
           round(sum(x["seconds"] for x in r["attempts"]), 2), "attempts": r["attempts"]}
    if r["status"] != "ok":
        out["error"] = r["error"]
    if r.get("refused"):
        out["refused"] = True
    if "outside_cpu_s" in r:
        out["outside_cpu_s"] = r["outside_cpu_s"]
    return out | ({"file": file} if file else {}) | {"ended": r["ended"]}


class SweepRounds(experiment.Experiment):
    """The sweep's cells on the experiment kernel (its schedule, retries, --repeat auto's stop
    after a round, interrupts), with the manifest's cell records as its progress: a round is
    done when its record is ok and its file is there, a cell when the cell is ok (merged)."""

    def __init__(self, recs, per_round, save_manifest, **kw):
        super().__init__(**kw)
        self.recs, self.per_round, self.save_manifest = recs, per_round, save_manifest

    def load(self):
        done = {}
        for cell in self.cells:
            rec = self.recs[cell.id]
            if rec["status"] == "ok":
                done[cell.id] = {n: {"status": "ok"} for n in range(self.rounds)}
            elif self.per_round:
                done[cell.id] = {
                    int(n) - 1: dict(r, refused=True) if _refused(r) else r
                    for n, r in rec["rounds"].items() if _refused(r) or (
                        r["status"] == "ok" and os.path.exists(os.path.join(self.out_dir,
                                                                           r["file"])))}
        return done

    def save(self, done, state):
        for cell in self.cells:
            rec = self.recs[cell.id]
            if rec["status"] == "ok" and "figures" not in done.get(cell.id, {}).get(0, {}):
                continue  # finished before this run: kept as it was
            for n, r in done.get(cell.id, {}).items():
                if self.per_round:
                    rec["rounds"][str(n + 1)] = manifest_record(r, round_file(cell, n + 1))
                elif "figures" in r:
                    rec.update(manifest_record(r))
                    if r["status"] == "ok":
                        rec.pop("error", None)
        self.save_manifest()


def _refused(r):
    return r.get("refused") or any(x.get("exit_status") == 2 for x in r.get("attempts", []))


def run_schedule(a, cells, recs, rounds, out_dir, manifest, save, command):
    """Runs the rounds (or each cell's repeats) on the experiment kernel, saving the manifest
    after every run; --repeat auto stops as decided_after says (every statement settled, or the
    rounds the noise floor planned), else at --max-repeat."""
    per_round = a.order != "cell"
    started, steps = time.monotonic(), len(rounds) * len(cells) if per_round else len(cells)
    state = {"ran": len(rounds), "step": sum(1 for c in cells if recs[c.id]["status"] == "ok")
             * (len(rounds) if per_round else 1)}

    def run_one(cell, n, attempt):
        if attempt == 1:
            progress(state["step"], steps, started,
                     f"{cell.id} round {n + 1}/{len(rounds)}" if per_round else cell.id)
            state["step"] += 1
        if not per_round:  # each cell's --repeat runs back to back, in one iobench
            run_attempt(cell.file, out_dir, attempt, lambda out: command(a, cell, out))
            path = os.path.join(out_dir, cell.file)
            compact.write_cell(path, json.load(open(path)))
            return {}
        ra = round_args(a, n + 1)
        run_attempt(round_file(cell, n + 1), out_dir, attempt, lambda out: command(ra, cell, out))
        return {}

    def after_round(k):
        if a.repeat == "auto" and decided_after(k, cells, recs, out_dir, a):
            state["ran"] = k
            return True
        return False

    SweepRounds(recs, per_round, save, prog="sweep", out_dir=out_dir, cells=cells,
                rounds=len(rounds) if per_round else 1, run_one=run_one,
                order=a.order if per_round else "cell", seed=a.seed, retries=a.retries,
                backoff_s=a.backoff, quiet=True, after_round=after_round,
                on_interrupt="raise").run()
    ran = state["ran"]
    if a.repeat == "auto":
        manifest["rounds_run"] = ran
        manifest["noise_floor"] = getattr(a, "noise_floor", None)
        manifest["stopped"] = getattr(a, "stopped", None) or f"--max-repeat {a.max_repeat}"
    for cell in cells:
        if per_round and recs[cell.id]["status"] != "ok":
            finish_rounds(recs[cell.id], ran, out_dir)
    progress(steps, steps, started, "done")
    sys.stderr.write("\n")
