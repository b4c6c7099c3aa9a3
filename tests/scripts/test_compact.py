"""Results a reader can open: a sweep keeps the spread of a many-connection run's
per-connection figures, not the list; its merged round files are gone and the manifest names
only files that are there; no committed results folder is over 5 MB."""
import json
import subprocess
from pathlib import Path

import pytest

from iobench_tools.lib.kernel import compact

# Shares no namespace name, netns lock, package or host-wide check with the other script tests:
# a lane apart (scripts/test).
pytestmark = pytest.mark.apart

ROOT = Path(__file__).resolve().parents[2]
FOLDER_LIMIT = 5 * 1024 * 1024


def conn(i, ok=True):
    return {"index": i, "ok": ok, "error": "" if ok else "reset", "bytes": 1000 + i,
            "sender": {"cpu_s": 0.01 * (i + 1), "io_calls": 10 + i},
            "receiver": {"cpu_s": 0.02, "io_calls": 20}}


def test_a_long_connection_list_becomes_its_spread():
    run = {"group": {"conns": [conn(i) for i in range(15)] + [conn(15, ok=False)],
                     "fairness": {"aggregate_gbps": 3.0}}}
    s = compact.compact_run(run)["group"]["conns"]
    assert s["count"] == 16 and s["ok"] == 15 and s["errors"] == ["reset"]
    assert s["bytes"] == {"min": 1000, "median": 1007.5, "max": 1015}
    assert s["sender"]["io_calls"] == {"min": 10, "median": 17.5, "max": 25}
    assert s["receiver"]["cpu_s"]["max"] == 0.02 and s["sender"]["throughput_gbps"] is None
    assert run["group"]["fairness"] == {"aggregate_gbps": 3.0}, "what the scripts read stays"


def test_a_short_connection_list_is_kept_whole():
    run = {"group": {"conns": [conn(i) for i in range(compact.CONNS_KEPT)]}}
    assert compact.compact_run(run)["group"]["conns"][3]["bytes"] == 1003
    assert compact.compact_run({"group": None}) == {"group": None}


def test_merged_round_files_are_removed_and_not_named(tmp_path):
    (tmp_path / "cells").mkdir()
    for n in (1, 2):
        (tmp_path / "cells" / f"c.r{n}.json").write_text("{}")
    rec = {"rounds": {"1": {"status": "ok", "file": "cells/c.r1.json"},
                      "2": {"status": "ok", "file": "cells/c.r2.json"}}}
    compact.drop_round_files(rec, str(tmp_path))
    assert not list((tmp_path / "cells").iterdir())
    assert rec["rounds"]["1"] == {"status": "ok", "merged": True}


def committed(path):
    out = subprocess.run(["git", "ls-files", "-z", str(path)], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    return [ROOT / p for p in out.split("\0") if p]


def test_no_committed_results_folder_is_over_5_mb():
    sizes = {}
    for f in committed("results"):
        top = f.relative_to(ROOT / "results").parts[0]
        sizes[top] = sizes.get(top, 0) + (f.stat().st_size if f.exists() else 0)
    over = {k: round(v / 2**20, 1) for k, v in sizes.items() if v > FOLDER_LIMIT}
    assert sizes and not over, f"results folders over 5 MB (MB): {over}"


def test_every_file_a_committed_manifest_names_is_committed():
    files = {str(f.relative_to(ROOT)) for f in committed("results")}
    missing = []
    for manifest in sorted((ROOT / "results").rglob("manifest.json")):
        m = json.loads(manifest.read_text())
        base = manifest.parent.relative_to(ROOT)
        for cell in m.get("cells", []):
            named = [cell.get("file")] + [r.get("file") for r in cell.get("rounds", {}).values()]
            missing += [str(base / n) for n in named if n and str(base / n) not in files]
    assert not missing, f"{len(missing)} files named by manifests but not committed: {missing[:3]}"
