"""Running a sweep's cells (scripts/sweep): each cell's runs with their retries, the rounds
that interleave the cells and merge into each cell's JSON, and when --repeat auto stops (every
knee decided, the rounds the A/A noise floor planned, or --max-repeat)."""
import argparse
import json
import os
import sys
import time

from iobench_tools.lib import compact
from iobench_tools.lib import experiment
from iobench_tools.lib import noisefloor
from iobench_tools.lib import sweeplib


def progress(done, total, started, note):
    width = 30
    filled = int(width * done / total) if total else width
    elapsed = time.monotonic() - started
    eta = (elapsed / done * (total - done)) if done else 0
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} cells, "
                     f"elapsed {elapsed:5.0f}s, ETA {eta:5.0f}s  {note[:40]:<40}")
    sys.stderr.flush()


def run_cell(a, cell, out_dir, command):
    """Runs a cell; after a failure (a run that broke, not a refused command line: exit status
    2) runs it again, up to --retries times, waiting --backoff seconds, doubled each time. Each
    failed attempt's partial figures (iobench writes its report when a run fails) are kept
    beside the cell as cells/ID.failedN.json. Returns the cell's manifest record."""
    path = os.path.join(out_dir, cell["file"])
    attempts = []
    for attempt in range(1, a.retries + 2):
        if attempt > 1:
            time.sleep(a.backoff * 2 ** (attempt - 2))
        cmd, env = command(path + ".tmp")
        t0 = time.monotonic()
        p = experiment.run_child(cmd, env=env, timeout=None)
        seconds = round(time.monotonic() - t0, 2)
        if p.returncode == 0 and os.path.exists(path + ".tmp"):
            os.replace(path + ".tmp", path)
            return dict(cell, status="ok", seconds=seconds, attempts=attempts)
        lines = (p.stderr or p.stdout).strip().splitlines()
        partial = None
        if os.path.exists(path + ".tmp"):
            partial = cell["file"].removesuffix(".json") + f".failed{attempt}.json"
            os.replace(path + ".tmp", os.path.join(out_dir, partial))
        attempts.append({"error": lines[-1] if lines else f"exit status {p.returncode}",
                         "exit_status": p.returncode, "seconds": seconds,
                         "partial_file": partial})
        if p.returncode == 2:
            break  # refused as given: the same command again would be refused again
    return dict(cell, status="failed", error=attempts[-1]["error"],
                seconds=round(sum(x["seconds"] for x in attempts), 2), attempts=attempts)


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


def run_round(a, cell, rec, rnd, out_dir, command):
    """Round `rnd` of a cell: one measured run into cells/ID.rN.json (kept until the cell's
    rounds are merged into its JSON). The first round
    counts syscalls as --syscalls asks; with auto, later rounds count nothing (their CPU is
    measured uncounted either way; the counting run of round 1 gives the syscall figures)."""
    if any(x.get("exit_status") == 2 for r in rec["rounds"].values()
           for x in r.get("attempts", [])):
        return  # iobench refused the cell's command line: every round would be refused
    done = rec["rounds"].get(str(rnd))
    rfile = cell["file"].removesuffix(".json") + f".r{rnd}.json"
    if done and done["status"] == "ok" and os.path.exists(os.path.join(out_dir, rfile)):
        return
    ra = argparse.Namespace(**vars(a))
    ra.repeat = 1
    if rnd > 1 and a.syscalls == "auto":
        ra.syscalls = "off"
    r = run_cell(ra, dict(cell, file=rfile), out_dir, lambda out: command(ra, out))
    rec["rounds"][str(rnd)] = {k: r[k] for k in ("status", "seconds", "attempts", "error")
                               if k in r} | {"file": rfile, "ended": round(time.time(), 6)}


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
    compact.write_cell(os.path.join(out_dir, rec["file"]), sweeplib.merge_rounds(docs))
    rec["status"] = "ok"
    rec.pop("error", None)
    compact.drop_round_files(rec, out_dir)


def decided_after(rnd, cells, recs, out_dir, a):
    """--repeat auto, after round `rnd`: True once every knee the recommender would state (per
    placement and protocol, one connection) is decided — sure, by the model, or where more runs
    will not move it — and the A/A control's interval covers 1, with at least MIN_AUTO_ROUNDS rounds (or
    the rounds the noise floor planned); until then the sweep runs another round."""
    if rnd < MIN_AUTO_ROUNDS:
        return False
    rows = []
    for cell in cells:
        rec = recs[cell["id"]]
        rounds = [rec.get("rounds", {}).get(str(n)) for n in range(1, rnd + 1)]
        if rec["status"] == "ok" or not all(x and x["status"] == "ok" for x in rounds):
            continue  # finished before (its rounds are fixed) or broken: not this decision's
        docs = [json.load(open(os.path.join(out_dir, x["file"]))) for x in rounds]
        rows += sweeplib.rows_of(cell, sweeplib.merge_rounds(docs))
    plan_from_noise_floor(rows, rnd, a)
    planned = (getattr(a, "noise_floor", None) or {}).get("planned_rounds")
    # While the A/A interval excludes 1 no knee is decided (recommend says so): run on.
    trusted = noisefloor.excludes_one(getattr(a, "noise_floor", None)) is None
    open_knees = sweeplib.undecided(rows, a.tolerance) if trusted else None
    a.stopped = stop_reason(rnd, open_knees, planned, a.max_repeat)
    return a.stopped is not None


# Rounds before --repeat auto judges that the cap cannot decide a knee: the runs-needed estimate
# scales the interval's half-width, too rough on fewer rounds to stop on.
HOPELESS_AFTER = 8


def stop_reason(rnd, open_knees, planned, max_repeat):
    """Why --repeat auto stops after round `rnd`, or None to run another: every knee decided
    (`open_knees` empty; None: not judged, the A/A interval excludes 1); the rounds the A/A
    noise floor planned reached — the host's own noise says that many resolve a difference of
    the tolerance, so a knee still undecided lies closer to the tolerance than that noise can
    tell; or, from HOPELESS_AFTER rounds, every open knee needing more runs per cell than the
    cap leaves — more rounds would spend the time and state the same undecided knee (the five
    reference sweeps of issue #48 ran to the cap of 20 for a TCP knee needing over 100)."""
    if open_knees is not None and not open_knees:
        return "every knee decided"
    if planned is not None and rnd >= planned:
        return f"the {planned} rounds the noise floor planned"
    if open_knees and rnd >= HOPELESS_AFTER and rnd < max_repeat and all(
            v["more"] > max_repeat - rnd for _, _, v in open_knees):
        need = ", ".join(f"{proto.upper()} about {v['more']}" for _, proto, v in open_knees)
        return (f"no open knee can be decided within --max-repeat {max_repeat} (more runs per "
                f"cell needed: {need})")
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
                + (f" (more than --max-repeat {a.max_repeat}: knees within the tolerance may "
                   "stay undecided)" if planned > a.max_repeat else
                   ": the sweep stops there if its knees are not decided before") + "\n")
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
        old = previous.get(cell["id"])
        if old and old.get("status") == "ok" and os.path.exists(os.path.join(out_dir, cell["file"])):
            recs[cell["id"]] = old
            skipped += 1
        else:
            recs[cell["id"]] = dict(cell, status="pending")
            if per_round:
                recs[cell["id"]]["rounds"] = (old or {}).get("rounds") or {}
    return recs, skipped


def run_schedule(a, cells, recs, rounds, out_dir, manifest, save, command):
    """Runs the rounds (or each cell's repeats), saving the manifest after every run; --repeat
    auto stops as decided_after says (every knee decided, or the rounds the noise floor
    planned), else at --max-repeat."""
    per_round = a.order != "cell"
    started = time.monotonic()
    step, steps, ran = 0, len(rounds) * len(cells), len(rounds)
    for rnd, order in enumerate(rounds, 1):
        for idx in order:
            cell, step = cells[idx], step + 1
            rec = recs[cell["id"]]
            if rec["status"] == "ok":
                continue
            note = f"{cell['id']} round {rnd}/{len(rounds)}" if per_round else cell["id"]
            progress(step - 1, steps, started, note)
            if per_round:
                run_round(a, cell, rec, rnd, out_dir,
                          lambda ra, out, c=cell: command(ra, c, out))
            else:
                rec.update(run_cell(a, cell, out_dir, lambda out, c=cell: command(a, c, out)))
                if rec["status"] == "ok":
                    path = os.path.join(out_dir, cell["file"])
                    compact.write_cell(path, json.load(open(path)))
            save()
        if a.repeat == "auto" and decided_after(rnd, cells, recs, out_dir, a):
            ran, steps = rnd, rnd * len(cells)
            break
    if a.repeat == "auto":
        manifest["rounds_run"] = ran
        manifest["noise_floor"] = getattr(a, "noise_floor", None)
        manifest["stopped"] = getattr(a, "stopped", None) or f"--max-repeat {a.max_repeat}"
    for cell in cells:
        if per_round and recs[cell["id"]]["status"] != "ok":
            finish_rounds(recs[cell["id"]], ran, out_dir)
    progress(steps, steps, started, "done")
    sys.stderr.write("\n")
