"""A host's answer in twenty minutes (docs/design-rule-v2-sequential.md, issue #66 item 5): the
page and sequential.py state the same design; the looks spend no more than ALPHA_MAIN; a step
that is there passes, one that is not fails for futility once the data show it, and one the data
cannot yet tell stays open; the committed campaign's sweeps read as a sequential run stop at 16K;
the command plans only the sweeps that fit in its minutes and says what it reached."""
import glob
import json
import os
import pathlib
import subprocess

import pytest

from iobench_tools.commands import host_answer
from iobench_tools.lib.judging import sequential as seq
from iobench_tools.lib.sweeps import designinputs
from test_design_rule import sweep

pytestmark = pytest.mark.apart

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "design-rule-v2-sequential.md").read_text()


def test_the_page_and_the_code_state_the_same_design():
    assert f"α_pilot = {seq.ALPHA_PILOT}" in PAGE and f"α_main = {seq.ALPHA_MAIN}" in PAGE
    assert f"R = {seq.ROUNDS} rounds" in PAGE and f"--repeat {seq.PILOT_ROUNDS}`" in PAGE
    assert f"at most **{seq.MAX_SWEEPS}**" in PAGE and f"default {seq.MINUTES}," in PAGE
    assert f"k = {seq.FIRST_LOOK}, {seq.FIRST_LOOK + 1}" in PAGE
    assert "--bufs " + ",".join(f"{s // 1024}k" for s in seq.PILOT_SIZES) in PAGE


def test_the_looks_spend_at_most_the_main_alpha_and_little_early():
    for k_max in (3, 5, 12):
        levels = [seq.look_level(k, k_max) for k in range(seq.FIRST_LOOK, k_max + 1)]
        assert abs(sum(levels) - seq.ALPHA_MAIN) < 1e-9
        assert all(x > 0 for x in levels)
    # O'Brien-Fleming keeps the early looks strict: the first of twelve gets under a tenth.
    assert seq.look_level(3, 12) < seq.ALPHA_MAIN / 10
    assert seq.plan_sweeps(20 * 60, 80) == seq.MAX_SWEEPS and seq.plan_sweeps(20 * 60, 100) == 11
    assert seq.plan_sweeps(300, 100) == 0  # two fit, and the first look needs three


def cpu_of(costs, k, rounds=10, sd=0.03):
    return {"tcp": [sweep(costs, rounds=rounds, seed=i + 1, sd=sd) for i in range(k)]}


def test_a_step_passes_fails_or_stays_open_as_the_data_say():
    sizes = [4096, 8192, 16384]
    level = seq.look_level(6, 6)
    clear = cpu_of({4096: 2.0, 8192: 1.5, 16384: 1.48}, k=6)
    answer, steps, end = seq.walk(clear, {}, sizes, ("tcp",), level)
    # 8K's 25% passes; 16K's 1% is shown short of 10%: failed, not open.
    assert (answer, end) == (8192, "ended"), steps
    assert [s[2] for s in steps] == ["passed", "failed"] and "short of it" in steps[1][4]
    # The same 16K step near the line with wide noise and three sweeps: open.
    near = cpu_of({4096: 2.0, 8192: 1.5, 16384: 1.36}, k=3, sd=0.2)
    answer, steps, end = seq.walk(near, {}, sizes, ("tcp",), seq.look_level(3, 12))
    assert end == "open" and steps[-1][2] == "open", steps
    # A step among the real server's sizes needs its harms: failed without them.
    big = cpu_of({16384: 2.0, 65536: 1.0}, k=4)
    assert seq.walk(big, {}, [16384, 65536], ("tcp",), 0.01)[1][0][4] == \
        "the real server's harms are not measured on this host"


CAMPAIGN = sorted(glob.glob(str(ROOT / "results/design-answer/hosts/*/dv0?.tar.xz")))


@pytest.mark.skipif(len(CAMPAIGN) < 8, reason="the campaign's archives are not here")
def test_the_campaign_read_sequentially_stops_at_16k(tmp_path):
    sweeps = designinputs.load_sweeps(CAMPAIGN, str(tmp_path))
    step, finalists = host_answer.pilot_decides(sweeps[0])
    assert step["ok"] and finalists == [4096, 8192, 16384, 65536]
    looks = host_answer.judge(sweeps[1:], finalists, 7)
    assert looks[-1][2] == 16384 and looks[-1][4] == "ended", looks[-1]
    assert "Decided after" in host_answer.reached_words(looks[-1], sweeps[1:])


def test_the_command_runs_only_what_fits_and_says_so(tmp_path):
    """On loopback with 1 MiB runs and one minute: the pilot runs, no sweep after it fits beside
    the minute's margin, and the report says no look was made."""
    out = tmp_path / "out"
    p = subprocess.run([str(ROOT / "scripts" / "host-answer"), f"ha-{os.getpid()}", "--where",
                        "loopback", "--bytes", "1M", "--minutes", "1", "--out", str(out)],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "results.json").read_text())
    assert doc["k_max"] == 0 and doc["answer"] is None and len(doc["sweeps"]) == 1
    assert (out / doc["sweeps"][0]).with_suffix(".tar.xz").is_file() or \
        (out / f"{doc['sweeps'][0]}.tar.xz").is_file()
    text = (out / "report.md").read_text()
    assert "No look: 0 sweeps ran, 3 are needed for the first" in text
    assert "not the page's design**: --bytes 1M" in text
    for bad, said in ((["--minutes", "0", "x"], "--minutes 0 must be above 0"), ([], "give a NAME")):
        p = subprocess.run([str(ROOT / "scripts" / "host-answer"), *bad], capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 2 and said in p.stderr, p.stderr


TIMED = ROOT / "results" / "design-answer" / "hosts" / "amd-epyc-2cpu-fc-v657" / "twenty-minutes"


@pytest.mark.skipif(not (TIMED / "results.json").is_file(), reason="no committed timed run")
def test_the_committed_timed_run_is_what_its_sweeps_say(tmp_path):
    """The committed twenty-minute run re-judged from its archives (--reread) says the same
    (the rule's line aside: its link is relative to the folder)."""
    import shutil
    copy = tmp_path / "run"
    shutil.copytree(TIMED, copy)
    p = subprocess.run([str(ROOT / "scripts" / "host-answer"), "--reread", str(copy)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr

    def body(path):
        return [line for line in path.read_text().splitlines() if not line.startswith("- rule:")]
    assert body(copy / "report.md") == body(TIMED / "report.md")
    doc = json.loads((TIMED / "results.json").read_text())
    assert doc["answer"] == 16384 and doc["seconds"] < 20 * 60
