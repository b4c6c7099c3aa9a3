"""The Valkey pull requests (patches/upstream/NAME/) and scripts/valkey-pr: every PR applies with
no fuzz to pristine Valkey 9.1.2 on the PRs it names and is clean by Valkey's .clang-format, its
test separates from its change, and bad input stops with one line and leaves no tree behind.
The builds and the tests with and without each change run in scripts/valkey-pr (their results:
results/upstream-9.1/pr-checks/)."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iobench_tools.lib.valkey import valkeypr

# Shares no namespace name, netns lock, package or host-wide check with the other script tests:
# a lane apart (scripts/test).
pytestmark = pytest.mark.apart

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "valkey-pr"
TARBALL = ROOT / "build" / "valkey-src" / "valkey_9.1.2.orig.tar.gz"
needs_base = pytest.mark.skipif(not TARBALL.exists(),
                                reason=f"{TARBALL} missing (scripts/setup --studies fetches it with "
                                       "scripts/build-valkey-source --fetch 9.1.2)")
needs_format = pytest.mark.skipif(not shutil.which("clang-format-19"),
                                  reason="clang-format-19 missing (scripts/setup --studies installs it)")


def test_every_pr_folder_has_its_commit_description_and_test():
    assert valkeypr.names(), "no PR folder under patches/upstream/"
    for name in valkeypr.names():
        pr = valkeypr.load(name)
        text = Path(pr["patch"]).read_text()
        assert text.startswith("From "), f"{name}: not in git format-patch form"
        change, test = valkeypr.split_patch(text)
        assert "diff --git" in test, f"{name}: a test"
        # A test-only PR fixes a test and changes no server code; every other PR does both.
        test_only = pr["test"].get("test_only", False)
        assert ("diff --git" in change) != test_only, f"{name}: a change and a test"
        assert "Signed-off-by" not in text, f"{name}: the sender signs off, not the project"
        assert pr["test"]["kind"] in ("unit", "tcl")


def test_a_commit_splits_into_its_change_and_its_test():
    text = ("From abc\nSubject: [PATCH] x\n\nbody\n---\n"
            "diff --git a/src/rio.c b/src/rio.c\n--- a/src/rio.c\n+++ b/src/rio.c\n@@ -1 +1 @@\n-a\n+b\n"
            "diff --git a/src/unit/test_rio.cpp b/src/unit/test_rio.cpp\n--- /dev/null\n"
            "+++ b/src/unit/test_rio.cpp\n@@ -0,0 +1 @@\n+t\n"
            "diff --git a/tests/unit/x.tcl b/tests/unit/x.tcl\n--- a/tests/unit/x.tcl\n"
            "+++ b/tests/unit/x.tcl\n@@ -1 +1 @@\n-c\n+d\n")
    change, test = valkeypr.split_patch(text)
    assert change.startswith("From abc") and "src/rio.c" in change and "test_rio" not in change
    assert "src/unit/test_rio.cpp" in test and "tests/unit/x.tcl" in test and "rio.c b/" not in test
    assert valkeypr.changed_files(text) == ["src/rio.c", "src/unit/test_rio.cpp", "tests/unit/x.tcl"]
    # A constant's definition the test names goes with it (pr.json's test.with_test).
    change, test = valkeypr.split_patch(text, with_test=("src/rio.c",))
    assert "diff --git" not in change and "src/rio.c" in test


def test_04s_test_alone_compiles_with_the_name_it_tests_and_nothing_it_changes():
    """04's test names REPL_CHUNK_SIZE: alone on 9.1.2 it takes server.h's definition (the same
    16 KiB as before), so it fails by the writers' behaviour, not by not compiling."""
    pr = valkeypr.load("04-whole-chunks")
    assert pr["test"]["with_test"] == ["src/server.h"]
    change, test = valkeypr.split_patch(Path(pr["patch"]).read_text(), pr["test"]["with_test"])
    header = test[test.index("diff --git a/src/server.h"):]
    header = header[:header.index("diff --git", 1)] if "diff --git" in header[1:] else header
    added = [line for line in header.splitlines() if line.startswith("+") and "+++" not in line]
    assert any("#define REPL_CHUNK_SIZE (16 * 1024)" in line for line in added)
    assert "rioWriteWholeChunks" in change and "rioWriteWholeChunks" not in test


@needs_base
@needs_format
def test_every_pr_applies_with_no_fuzz_and_is_formatted(tmp_path):
    p = subprocess.run([sys.executable, str(SCRIPT), "--static", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads((tmp_path / "checks.json").read_text())
    assert [c["name"] for c in doc["prs"]] == valkeypr.names()
    for c in doc["prs"]:
        assert c["applies"] and c["test_applies_alone"] and c["format_unclean"] == []
    assert doc["series_applies"] is True


@needs_base
@needs_format
def test_the_format_check_sees_a_badly_formatted_file(tmp_path):
    tree = tmp_path / "tree"
    valkeypr.extract(str(TARBALL), str(tree))
    rio = tree / "src" / "rio.c"
    rio.write_text(rio.read_text().replace("static size_t rioConnsetWrite(rio *r,",
                                           "static size_t rioConnsetWrite(rio *r  ,"))
    assert valkeypr.format_problems(str(tree), ["src/rio.c", "src/sha1.c", "README.md"],
                                    "clang-format-19") == ["src/rio.c"]


def test_bad_input_stops_with_one_line():
    for args, said in ((["--prs", "99-nope"], "invalid --prs: '99-nope'"),
                       (["--timeout", "5"], "invalid --timeout 5"),
                       (["--loops", "-1"], "invalid --loops -1"),
                       (["--loops", "5", "--busy", "99"], "invalid --busy 99"),
                       (["--busy", "2"], "--busy needs --loops")):
        p = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                           timeout=60)
        # argparse's usage, then one error line naming the bad value
        assert p.returncode == 2, p.stderr
        assert p.stderr.strip().splitlines()[-1].startswith(f"valkey-pr: error: {said}")


def test_a_loop_unit_holds_only_the_blocks_of_the_named_tests():
    unit = ('source tests/support/util.tcl\n\n'
            'start_server {} {\n    test "first" {\n        r ping\n    }\n}\n\n'
            '# between the tests: code --only would still run\n'
            'start_server {} {\n    wait_for_something\n    test "second" {\n    }\n'
            '    test "third" {\n    }\n}\n\n'
            'foreach x {a b} {\n    test "fourth $x" {\n    }\n}\n')
    text = valkeypr.blocks_of(unit, ["third", "first", "second"])
    # in the unit's order, each block once, nothing else
    assert text.index('test "first"') < text.index('test "second"') < text.index('test "third"')
    assert text.count("start_server") == 2 and "fourth" not in text and "between" not in text
    assert text.count('test "second"') == 1 and "wait_for_something" in text
    with pytest.raises(valkeypr.PrError, match="no top-level block of the unit holds the test "
                                               "'fifth'"):
        valkeypr.blocks_of(unit, ["fifth"])


def test_the_dual_channel_pr_loops_its_two_tests_from_its_own_unit():
    pr = valkeypr.load("02-dual-channel-child")
    cases = pr["test"]["loop_cases"]
    assert pr["test"]["case"] in cases and len(cases) == 2
    added = "".join(line[1:] + "\n" for line in Path(pr["patch"]).read_text().splitlines()
                    if line.startswith("+") and not line.startswith("+++"))
    for case in cases:
        assert f'test "{case}"' in added, f"02's patch does not add the test '{case}'"
    # The child's end of the child info pipe blocks (anetPipe(fds, O_NONBLOCK, 0)): no retry
    # on an EAGAIN it cannot return, and a unit test that says so.
    assert "EAGAIN" not in added and "RDB-PRODUCED-NOTICE-EAGAIN" not in Path(pr["patch"]).read_text()
    assert "OnlyTheParentsReadEndIsNonBlocking" in added


@needs_base
def test_a_pr_that_does_not_apply_says_so_in_one_line_and_leaves_no_tree(tmp_path, monkeypatch):
    prs = tmp_path / "prs"
    (prs / "01-broken").mkdir(parents=True)
    (prs / "01-broken" / "01-broken.patch").write_text(
        "From x\n---\ndiff --git a/src/rio.c b/src/rio.c\n--- a/src/rio.c\n+++ b/src/rio.c\n"
        "@@ -1,1 +1,1 @@\n-no such line\n+nor this\n")
    (prs / "01-broken" / "PR.md").write_text("# broken\n")
    (prs / "01-broken" / "pr.json").write_text(json.dumps(
        {"title": "broken", "needs": [], "test": {"kind": "unit", "files": [], "filter": "x"}}))
    monkeypatch.setattr(valkeypr, "PRS", str(prs))
    with pytest.raises(valkeypr.PrError, match=r"01-broken.patch does not apply to Valkey 9.1.2 "
                                                r"with --fuzz=0"):
        valkeypr.prepare(str(tmp_path / "tree"), "01-broken")
    (prs / "01-broken" / "pr.json").write_text(json.dumps(
        {"title": "broken", "needs": ["02-missing"], "test": {}}))
    with pytest.raises(valkeypr.PrError, match="needs '02-missing', which is not a PR here"):
        valkeypr.load("01-broken")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
    code = ("import sys; from iobench_tools.lib.valkey import valkeypr; "
            f"valkeypr.PRS = {str(prs)!r}; "
            "from iobench_tools.commands import valkey_pr; "
            f"sys.exit(valkey_pr.main(['--static', '--out', {str(tmp_path / 'out')!r}]))")
    (prs / "01-broken" / "pr.json").write_text(json.dumps(
        {"title": "broken", "needs": [], "test": {"kind": "unit", "files": [], "filter": "x"}}))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=env)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "01-broken: FAILED" in p.stdout and "does not apply" in p.stdout
    assert not list(tmp.iterdir()), "the tree was left behind"


def test_valkey_tests_on_9_1_2_names_its_builds_and_refuses_others():
    script = str(ROOT / "scripts" / "valkey-tests")
    for args, said in ((["--base", "9.1.2", "--builds", "stock,0004"], "invalid --builds: '0004'"),
                       (["--base", "9.1.2", "--builds", "series"], "stock is the reference"),
                       (["--base", "9.2"], "invalid choice: '9.2'")):
        p = subprocess.run([script, *args], capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and said in p.stderr, (args, p.stderr)
    assert valkeypr.build_names() == ["stock", *valkeypr.names(), "series", "series-asan"]
    assert "SANITIZER=address" in valkeypr.make_flags("series-asan")
    assert valkeypr.patches_of("series-asan") == valkeypr.patches_of("series")
    assert [Path(p).name for p in valkeypr.patches_of("series")] == \
        [f"{n}.patch" for n in valkeypr.names()]
    for name in valkeypr.names():
        assert Path(valkeypr.patches_of(name)[-1]).name == f"{name}.patch"


@needs_base
def test_the_base_is_fetched_once_and_pinned_by_its_hash():
    p = subprocess.run([str(ROOT / "scripts" / "build-valkey-source"), "--fetch", "9.1.2"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == str(TARBALL)
    assert valkeypr.sha256(str(TARBALL)) == \
        "8e8557da7426a51b4e0fb514a65ef6241dc7c85cb408243af389070abf379cec"


def test_the_9_1_2_report_names_its_builds_gtests_and_patches():
    from iobench_tools.lib.valkey import valkeytests
    run = {"status": "passed", "seconds": 10.0, "passed": 5, "failed": 0, "skipped": 1,
           "failed_tests": [], "skipped_tests": [], "tail": []}
    doc = {"command": "scripts/valkey-tests --base 9.1.2", "base": "9.1.2", "suite": "s",
           "builds": ["stock", "series"], "proto": ["tcp"], "units": ["integration/x"],
           "jobs": 2, "seconds": 60, "retries": [],
           "runs": [dict(run, build=b, proto="tcp", unit="integration/x") for b in ("stock", "series")],
           "verdicts": {"series/tcp": {"build": "series", "proto": "tcp", "stock_passed": 5,
                                        "passed": 5, "passes_stock": True, "lost": {}, "flaky": {}}},
           "gtest": {"stock": {"status": "passed", "passed": 900, "failed": [], "seconds": 30.0},
                     "series": {"status": "failed", "passed": 899, "failed": ["A.b"],
                                "seconds": 31.0}},
           "patches": {"stock": {}, "series": {"patches/upstream/01-x/01-x.patch": "ab" * 32}}}
    md = valkeytests.report_md(doc)
    assert "series (`build/valkey/9.1/series`)" in md
    assert "| series | failed | 899 | A.b | 31.0 |" in md
    assert "- series: `01-x.patch` abababababab" in md and "- stock: none (stock)" in md


def test_a_test_that_names_what_its_change_adds_fails_by_not_compiling_without_it():
    from iobench_tools.commands import valkey_pr
    test = {"kind": "unit", "files": ["test_rio.cpp", "test_replication.cpp"]}
    ours = {"test": "build failed", "log_tail": (
        "test_rio.cpp:260:38: error: 'REPL_CHUNK_SIZE' was not declared in this scope\n"
        "make: *** [Makefile:801: valkey-unit-gtests] Error 2\n")}
    assert valkey_pr.fails_by_its_test(ours, test)
    # An error outside the PR's test files is a broken build, not a failing test.
    broken = {"test": "build failed", "compile_errors": [
        ["test_rio.cpp", "'REPL_CHUNK_SIZE' was not declared in this scope"],
        ["rio.c", "expected ';' before '}' token"]]}
    assert not valkey_pr.fails_by_its_test(broken, test)
    assert not valkey_pr.fails_by_its_test({"test": "build failed", "log_tail": "Error 2\n"}, test)
    assert not valkey_pr.fails_by_its_test(dict(ours, test="passed"), test)


def test_a_record_from_before_loop_protos_reads_as_one_tcp_loop():
    from iobench_tools.commands import valkey_pr
    run = {"unit": "u", "cases": ["a"], "loops": 3, "busy": 0, "status": "passed",
           "seconds": 1.0, "passed": {"a": 3}, "failed": [], "exception": None}
    old = {"name": "02-x", "test": {"kind": "tcl"}, "patch_sha256": "ab" * 32, "loops": run}
    assert valkey_pr.loop_runs(old) == [dict(run, proto="tcp")] and valkey_pr.loops_good(old)
    new = dict(old, loops=[dict(run, proto="tls"), dict(run, proto="tcp", passed={"a": 2})])
    assert not valkey_pr.loops_good(new)  # one protocol's run missed a pass
    doc = {"command": "scripts/valkey-pr", "prs": [old], "series_applies": True}
    assert "its own tests 3 times in a row over TCP" in valkey_pr.report_md(doc)


def test_a_study_build_leaves_the_unit_suite_out_and_keeps_its_tree(tmp_path, monkeypatch):
    """valkeypr.build(unit_tests=False), valkey-evidence's: no GoogleTest suite (about half a
    build's CPU), a tree of its own; an existing tree is reused, the lean one first, so a
    study's tree does not change when a full build appears beside it."""
    made = []

    def fake_build(dest, name, patches, timeout, log, unit_tests=True):
        os.makedirs(dest)
        for binary in ["valkey-server"] + (["valkey-unit-gtests"] if unit_tests else []):
            path = os.path.join(dest, binary)
            Path(path).write_text("#!/bin/sh\n")
            os.chmod(path, 0o755)
        made.append((os.path.basename(dest), unit_tests))

    monkeypatch.setattr(valkeypr, "ROOT", str(tmp_path))
    monkeypatch.setattr(valkeypr, "BUILDS", str(tmp_path / "builds"))
    monkeypatch.setattr(valkeypr, "_build_into", fake_build)
    tree = lambda link: os.path.basename(os.path.realpath(link))  # noqa: E731
    # Only a full tree: a study takes it, nothing is built.
    full = valkeypr.build("stock")
    assert made == [(tree(full), True)]
    assert tree(valkeypr.build("stock", unit_tests=False)) == tree(full) and len(made) == 1
    # A lean tree, once made, is the study's from then on; the full one stays the suite's.
    shutil.rmtree(tmp_path / "build")
    lean = tree(valkeypr.build("stock", unit_tests=False))
    assert made[-1] == (lean, False)
    assert not (tmp_path / "build" / "valkey-src" / lean / "valkey-unit-gtests").exists()
    full = tree(valkeypr.build("stock"))
    assert made[-1] == (full, True) and full != lean
    assert tree(valkeypr.build("stock", unit_tests=False)) == lean and len(made) == 3


def test_cis_allocator_is_in_the_flags_and_the_cache_key(monkeypatch):
    monkeypatch.delenv("IOBENCH_VALKEY_MALLOC", raising=False)
    monkeypatch.delenv("IOBENCH_VALKEY_OPTIMIZATION", raising=False)
    assert valkeypr.make_flags("stock") == ["BUILD_TLS=yes"]  # Valkey's jemalloc, as it ships
    jemalloc = valkeypr.tree_dir("stock", [], False)
    monkeypatch.setenv("IOBENCH_VALKEY_MALLOC", "libc")
    assert valkeypr.make_flags("stock") == ["BUILD_TLS=yes", "MALLOC=libc"]
    assert valkeypr.tree_dir("stock", [], False) != jemalloc
    monkeypatch.setenv("IOBENCH_VALKEY_MALLOC", "tcmalloc")
    with pytest.raises(valkeypr.PrError, match="invalid IOBENCH_VALKEY_MALLOC 'tcmalloc'"):
        valkeypr.make_flags("stock")
