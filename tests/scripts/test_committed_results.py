"""Every committed report and recommendation re-renders byte for byte from its committed folder:
what the page says is what today's code reads from the record, so a renderer that changes its
words, or misstates an older study (the order its rounds ran in, a figure it never sampled),
fails here. A folder is read by its kind: a sweep (manifest.json), a fan-out scenario
(fanout.json), or a study whose results.json names its kind."""
import json
import os
from pathlib import Path

import pytest

from iobench_tools.commands import recommend
from iobench_tools.lib import (replknee_report, replsync_report, sweeplib, upstreamlib,
                               valkeyevidence, valkeytests)

ROOT = Path(__file__).resolve().parents[2]
STUDIES = {"replication-knee": replknee_report.report_md,
           "replication-sync": replsync_report.report_md,
           "upstream-evidence": upstreamlib.report_md,
           "valkey-evidence": valkeyevidence.report_md,
           "valkey-tests": valkeytests.report_md}


def rendered(folder):
    """(the committed page, the text today's code renders from the folder's record), or None
    for a folder that holds no record with a page."""
    if (folder / "results.json").is_file() and (folder / "report.md").is_file():
        doc = json.loads((folder / "results.json").read_text())
        return folder / "report.md", STUDIES[doc["kind"]](doc)
    if (folder / "fanout.json").is_file() and (folder / "recommendation.md").is_file():
        doc = json.loads((folder / "fanout.json").read_text())
        return folder / "recommendation.md", recommend.fanout_report(doc, 0.05)
    if (folder / "manifest.json").is_file() and (folder / "recommendation.md").is_file():
        manifest, rows = sweeplib.load(str(folder), "recommend", "processes")
        return folder / "recommendation.md", recommend.report(manifest, rows, 0.05)
    return None


FOLDERS = sorted(Path(d) for d, _, _ in os.walk(ROOT / "results")
                 if rendered(Path(d)) is not None)


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
