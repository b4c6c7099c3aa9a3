"""Every committed report and recommendation re-renders byte for byte from its committed folder:
what the page says is what today's code reads from the record, so a renderer that changes its
words, or misstates an older study (the order its rounds ran in, a figure it never sampled),
fails here. A folder is read by its kind: a sweep (manifest.json), a fan-out scenario
(fanout.json), or a study whose results.json names its kind."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from iobench_tools.commands import recommend
from iobench_tools.lib.kernel import resultfolder
from iobench_tools.lib.sweeps import sweeplib
from iobench_tools.lib.valkey import (replknee_report, replsync_report, upstreamlib,
                                      valkeyevidence, valkeytests)

# Shares no namespace name, netns lock, package or host-wide check with the other script tests:
# a lane apart (scripts/test).
pytestmark = pytest.mark.apart

ROOT = Path(__file__).resolve().parents[2]
STUDIES = {"replication-knee": replknee_report.report_md,
           "replication-sync": replsync_report.report_md,
           "upstream-evidence": upstreamlib.report_md,
           "valkey-evidence": valkeyevidence.report_md,
           "valkey-tests": valkeytests.report_md}


def rendered(folder):
    """(the committed page, the text today's code renders from the folder's record), or None
    for a folder that holds no record with a page; read by its kind (lib/kernel/resultfolder.py)."""
    try:
        kind = resultfolder.kind_of(str(folder))
    except resultfolder.NotAResult:
        return None
    if kind == "sweep" and (folder / "recommendation.md").is_file():
        manifest, rows = sweeplib.load(str(folder), "recommend", "processes")
        return folder / "recommendation.md", recommend.report(manifest, rows, 0.05)
    if kind == "fanout-scenario" and (folder / "recommendation.md").is_file():
        doc = json.loads((folder / "fanout.json").read_text())
        return folder / "recommendation.md", recommend.fanout_report(doc)
    if kind in STUDIES and (folder / "report.md").is_file():
        return folder / "report.md", STUDIES[kind](json.loads((folder / "results.json").read_text()))
    return None


FOLDERS = sorted(Path(d) for d, _, _ in os.walk(ROOT / "results")
                 if rendered(Path(d)) is not None)


def test_each_folder_names_its_kind_and_recommend_refuses_a_study(tmp_path):
    kinds = {str(f.relative_to(ROOT)): resultfolder.kind_of(str(f)) for f in FOLDERS}
    assert kinds["results/ec2-emulated"] == "sweep"  # an older manifest names no kind
    assert kinds["results/fanout"] == "fanout-scenario"
    assert kinds["results/upstream-9.1/evidence-prs"] == "valkey-evidence"
    for bad, said in ((tmp_path / "none", "no such directory"), (tmp_path, "no fleet.json")):
        with pytest.raises(resultfolder.NotAResult, match=said):
            resultfolder.kind_of(str(bad))
    study = ROOT / "results" / "upstream-9.1" / "evidence-prs"
    p = subprocess.run([str(ROOT / "scripts" / "recommend"), str(study), "--report",
                        str(tmp_path / "r.md")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "holds a valkey-evidence study, not a sweep" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not (tmp_path / "r.md").exists()
    # --out names a folder in every script: recommend's one file is --report, and the old name
    # says so in one line.
    p = subprocess.run([str(ROOT / "scripts" / "recommend"), str(ROOT / "results" / "fanout"),
                        "--out", str(tmp_path / "r.md")], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and "--out is --report now" in p.stderr, p.stderr
    assert not (tmp_path / "r.md").exists()


def test_every_kind_of_committed_folder_is_read():
    kinds = {json.loads((f / "results.json").read_text())["kind"] for f in FOLDERS
             if (f / "results.json").is_file()}
    assert kinds == set(STUDIES), kinds
    assert any((f / "fanout.json").is_file() for f in FOLDERS)
    assert any((f / "manifest.json").is_file() for f in FOLDERS)


@pytest.mark.parametrize("folder", FOLDERS, ids=[str(f.relative_to(ROOT)) for f in FOLDERS])
def test_the_committed_page_is_what_its_record_renders(folder):
    page, text = rendered(folder)
    assert page.read_text() == text, (
        f"{page.relative_to(ROOT)} differs from what its record renders today: re-render it "
        "(its figures come from the same record) or fix the renderer")
