"""The README tells the truth: each example output it shows (a block starting `$ ./iobench ...`)
has the lines today's iobench prints for that command — same title, same header and summary
lines, same columns — checked by running the command at a small size; and a figure the prose
quotes from a table ("the 64K receiver row at the top shows: 1607 reads") is in that table."""
import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

# Shares no namespace name, netns lock, package or host-wide check with the other script tests:
# a lane apart (scripts/test).
pytestmark = pytest.mark.apart

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))
# The README and the docs/ pages it points to.
README = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
ROW = re.compile(r"^\s+\d+[KM]?\s+(sender|receiver)\s+(client|server)\s")


def examples():
    """(command args, shown output, whether part of the output was omitted) per example block."""
    out = []
    for block in re.findall(r"```\n(\$ \./iobench[^\n]*)\n(.*?)```", README, re.S):
        command, shown = block
        omitted = "omitted" in command
        args = shlex.split(command.split("#")[0])[2:]
        out.append((args, shown, omitted))
    return out


def line_kinds(text):
    """What kinds of lines a report has, figures aside: the title up to the run count, each
    side's header lines by label, the exact column header, summary lines by their lead words."""
    kinds = set()
    for line in text.splitlines():
        if not line.strip() or ROW.match(line):
            continue
        if line.startswith("iobench "):
            kinds.add("title: " + re.sub(r"\| \d+ run\(s\).*", "", line).strip())
        elif m := re.match(r"^  (sender|receiver)\s+([a-z_ ]+?):", line):
            kinds.add(f"{m[1]} {m[2]}")
        elif line.lstrip().startswith("buf side"):
            kinds.add("columns: " + " ".join(line.split()))
        elif m := re.match(r"^  (client|server|all|tracers)\s", line):
            kinds.add("process " + m[1])
        elif m := re.match(r"^\s+(\d+[KM]?) (sender|receiver)\s+run \d+:", line):
            kinds.add(f"tracer {m[2]}")
        elif re.match(r"^\s+\S+ min\.\.max of \d+ runs:", line):
            kinds.add("min..max")
        else:
            kinds.add(re.split(r"[ :(]", line.strip(), maxsplit=1)[0])
    return kinds


def small(args):
    """The example's command at a small size: 2 MiB, one measured run (two when it repeats:
    the min..max lines need them)."""
    out, skip, repeats = [], False, False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a in ("--repeat", "--bytes", "-n"):
            repeats = repeats or (a == "--repeat" and args[i + 1] != "1")
            skip = True
            continue
        out.append(a)
    return out + ["--bytes", "2M"] + (["--repeat", "2"] if repeats else [])


@pytest.mark.parametrize("args,shown,omitted", examples(),
                         ids=[" ".join(a) for a, _, _ in examples()])
def test_each_example_output_has_the_lines_iobench_prints_today(args, shown, omitted, tmp_path):
    if "--cpus" in args and len(os.sched_getaffinity(0)) < 2:
        pytest.skip("the example pins two CPUs")
    p = subprocess.run([BIN, *small(args), "--cache-dir", str(tmp_path)], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    want, got = line_kinds(shown), line_kinds(p.stdout)
    if omitted:
        assert want <= got, f"shown but no longer printed: {want - got}"
    else:
        assert want == got, (f"README shows but iobench no longer prints: {want - got}; "
                             f"iobench prints but README does not show: {got - want}")


def test_figures_quoted_from_the_top_table_are_in_it():
    top = examples()[0][1]
    quotes = re.findall(r"the (\d+[KM]) (sender|receiver) row at the top shows: (\d+) ", README)
    assert quotes, "the quote this test guards is gone: update the test"
    for size, side, number in quotes:
        rows = [line for line in top.splitlines()
                if ROW.match(line) and line.split()[:2] == [size, side]]
        assert rows and number in rows[0].split(), (size, side, number, rows)


def slug(heading):
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped, blanks to -."""
    heading = re.sub(r"[`*_~\[\]()]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", heading).replace(" ", "-")


def anchors_of(path):
    """The anchors a markdown page has: its headings' (a repeated one gets -1, -2, ...)."""
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
    found, seen = set(), {}
    for m in re.finditer(r"^#{1,6} +(.+?) *#*$", text, flags=re.M):
        s = slug(m.group(1))
        found.add(s if s not in seen else f"{s}-{seen[s]}")
        seen[s] = seen.get(s, 0) + 1
    return found


def link_problems(page, text):
    """What is wrong with a page's links: a target outside the repository or missing, an anchor
    its page does not have."""
    problems = []
    # Links, and relative paths quoted as code (`../shared/x.md` named a file beside the repo).
    quoted = re.findall(r"`(\.\./[^`\s]+)`", text)
    for target in re.findall(r"\]\(([^)\s]+)\)", text) + quoted:
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        if ROOT not in path.parents:
            problems.append(f"{page.name}: {target} points outside the repository")
        elif not path.exists():
            problems.append(f"{page.name}: {target} does not exist")
        elif anchor and path.suffix == ".md" and anchor not in anchors_of(path):
            problems.append(f"{page.name}: {target}: no heading has that anchor")
    return problems


def test_every_link_resolves_inside_the_repository():
    """A user who cloned the project has the README, docs/ and results/, nothing beside them;
    every #anchor is a heading of the page it names."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "results").glob("**/README.md"))]
    problems = [p for page in pages for p in link_problems(page, page.read_text())]
    assert not problems, problems


def test_a_broken_anchor_or_link_fails(tmp_path):
    page = ROOT / "docs" / "fixture.md"  # as if in docs/: the links resolve from there
    text = ("[ok](sweeps.md) [anchor](hardening.md#bounds-on-a-shared-host) "
            "[gone](sweeps.md#no-such-heading) [missing](nothing.md) [here](#the-top)\n# The top\n")
    problems = link_problems(page, text)
    assert any("sweeps.md#no-such-heading: no heading" in p for p in problems), problems
    assert any("nothing.md does not exist" in p for p in problems), problems
    assert len(problems) == 3, problems  # #the-top is this page's own: fixture.md is not on disk


def test_every_results_folder_is_listed():
    """results/README.md lists every entry of results/, results/upstream-9.1/README.md every
    folder of its own: a run committed without its line fails here."""
    for folder in (ROOT / "results", ROOT / "results" / "upstream-9.1"):
        listed = (folder / "README.md").read_text()
        missing = [e.name for e in sorted(folder.iterdir()) if e.name != "README.md"
                   and not re.search(r"\]\(" + re.escape(e.name) + r"[/)]", listed)]
        assert not missing, f"{folder.relative_to(ROOT)}/README.md does not list {missing}"


def test_results_record_repository_relative_commands():
    # An absolute path into some checkout: /anything/scripts/... or /anything/results.
    absolute = re.compile(r"(?<![\w.])(/[\w.-]+)+/(scripts|results)\b")
    for manifest in sorted((ROOT / "results").glob("*/manifest.json")):
        command = json.loads(manifest.read_text())["command"]
        assert command.startswith("scripts/") and not absolute.search(command), (manifest, command)
    for page in sorted((ROOT / "results").glob("**/*.md")):
        assert not absolute.search(page.read_text()), page


def test_every_script_the_docs_name_exists():
    """A command the README or docs/ name (scripts/sweep, dev/tidy) is there: moving one without
    its mentions fails here, not in a reader's shell."""
    named = set(re.findall(r"(?<![\w/.])((?:scripts|dev)/[A-Za-z0-9_-]+(?:\.[a-z]+)?)", README))
    assert "scripts/sweep" in named and "dev/tidy" in named
    missing = sorted(n for n in named if not (ROOT / n).exists())
    assert not missing, f"named in README.md or docs/ but not in the checkout: {missing}"


def test_no_committed_result_names_a_path_of_the_machine_it_ran_on():
    """Results name commands relative to the repository root: a scratch folder (/tmp/...), a
    checkout (/work/...) or a home directory in a committed result is a machine's, not the
    reader's."""
    pattern = re.compile(r"(?<![\w.])/(?:tmp|work|root|home)/[\w.-]")
    found = []
    for path in sorted((ROOT / "results").rglob("*")):
        if path.is_file() and path.suffix in (".md", ".json", ".txt", ".csv"):
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if pattern.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{n}")
    assert not found, f"machine paths in committed results: {found[:5]}"


# Options the docs quote of other programs, each with the program: not iobench's to offer.
OTHER_PROGRAMS_OPTIONS = {
    "--bounding-set": "setpriv", "--dont-clean": "Valkey's runtest", "--install": "cmake",
    "--now": "systemctl", "--offline": "ansible-galaxy", "--pipe": "redis-cli",
    "--strategy": "aws ec2", "--strict-markers": "pytest", "--no-": "a prefix, not an option",
    "--diff": "ansible-playbook", "--amend": "git commit",
    "--dual-channel-replication-enabled": "valkey-server", "--enable-debug-command":
    "valkey-server", "--rdbcompression": "valkey-server", "--repl-diskless-sync":
    "valkey-server", "--repl-diskless-sync-delay": "valkey-server", "--save": "valkey-server",
    "--rps": "valkey-benchmark",
}
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]+)")


def test_every_option_the_docs_name_exists():
    """An `--option` in backticks in the README or docs/ is one of iobench's (any subcommand's
    --help), a script's (its --help or its source, tls/make-certs included), or another
    program's named above: a renamed or invented option (fanout.md's `--host-rate`) fails."""
    iobench = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))
    if not os.access(iobench, os.X_OK):
        pytest.skip(f"{iobench} not built")
    known = set(OTHER_PROGRAMS_OPTIONS)
    for sub in ["", "client", "server", "payload", "watch", "compare", "doctor", "protocol",
                "load"]:
        out = subprocess.run([iobench, *([sub] if sub else []), "--help"], capture_output=True,
                             text=True, timeout=30)
        known |= set(OPTION.findall(out.stdout))
    for script in [*sorted((ROOT / "scripts").iterdir()), ROOT / "tls" / "make-certs"]:
        out = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
        known |= set(OPTION.findall(out.stdout + out.stderr))
        known |= set(OPTION.findall(script.read_text(errors="replace")))
    unknown = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for quoted in re.findall(r"`([^`]*)`", page.read_text()):
            unknown += [f"{page.relative_to(ROOT)}: {o}" for o in OPTION.findall(quoted)
                        if o not in known]
    assert not unknown, f"options the docs name that nothing takes: {sorted(set(unknown))}"
