"""Every command line the README, docs/ and the results folders' READMEs quote is parsed by its
own tool (issue #67): iobench and every script take IOBENCH_CHECK_ARGS=1 to check an argument
list as a run would and stop before running anything, so a renamed or refused option in a
quoted command fails here, not in a reader's shell (as Rust's doctests and `mdbook test` run
every code block). A command with a placeholder (NAME-like capitals, [optional] parts, ..., a
shell variable) is a syntax line, not a command: it is not run."""
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("IOBENCH_BIN", str(ROOT / "build" / "release" / "iobench"))


def pages():
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
            *sorted((ROOT / "results").glob("*/README.md")),
            *sorted((ROOT / "results").glob("*/*/README.md"))]


def candidates(text):
    """Command-like strings: inline code spans and the lines of fenced blocks (a line ending in
    a backslash joined to the next)."""
    out = []
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M)
    for block in fenced:
        out += [line for line in block.replace("\\\n", " ").splitlines()]
    text = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.S | re.M)
    # Indented code blocks (four spaces), where a page uses them for a command.
    out += [m.strip() for m in re.findall(r"^ {4,}((?:\./iobench|scripts/)[^\n]*)$", text,
                                           flags=re.M)]
    out += re.findall(r"`([^`\n]+)`", text)
    return out


# NAME, N, FILE.json, HOST:PORT, [optional], <x>, {a,b}, ..., $VAR.
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*(?:[=:.,/].*)?$|[\[\]<>{}…$]|\.\.\.|^-$")
# A quoted name with an option or two but not its required operands is a mention of them
# ("`scripts/sweep --repeat auto`"), not a command: what a tool says of a missing operand.
MENTION = re.compile(r"required|needs --|is required")
# Checks of the machine, not of the syntax: an example's process ids, a folder an earlier step
# makes (`tar -xJf ...` then `scripts/recommend rr01`). The tools' own check refuses those too.
MACHINE = re.compile(r"no such process|no such directory|No such file or directory")
TOOLS = re.compile(r"^(?:\./iobench|iobench|scripts/[a-z][a-z-]*)$")


def command_of(line):
    """The argv a quoted line runs, or None when it is not a command or holds a placeholder."""
    line = line.strip().removeprefix("$ ").removeprefix("# ")
    for cut in (" | ", " && ", " ; ", " > ", " 2>", " &> ", " >> ", " # "):
        line = line.split(cut)[0]
    try:
        argv = shlex.split(line)
    except ValueError:
        return None
    while argv and (re.match(r"^[A-Z_][A-Z0-9_]*=", argv[0]) or argv[0] in ("sudo", "time")):
        argv = argv[1:]
    if not argv or not TOOLS.match(argv[0]):
        return None
    if len(argv) == 1 or re.match(r"^\d+\.\d+", argv[1]):
        return None  # a tool's name in a sentence, or "iobench 0.1.0"
    if any(PLACEHOLDER.search(a) for a in argv[1:]):
        return None
    return argv


def refused(argv):
    """What the tool says when it refuses argv in check mode, or None when it takes it."""
    exe = BIN if argv[0] in ("./iobench", "iobench") else str(ROOT / argv[0])
    if not os.path.exists(exe):
        return f"no such tool {argv[0]}"
    env = dict(os.environ, IOBENCH_CHECK_ARGS="1")
    p = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=60, stdin=subprocess.DEVNULL)
    said = (p.stderr.strip() or p.stdout.strip() or f"exit {p.returncode}").splitlines()[-1]
    if p.returncode == 0 and "arguments ok" in p.stdout:
        return None
    if MENTION.search(said) or MACHINE.search(said):
        return None
    return said[:200]


def test_a_refused_option_in_a_quoted_command_fails_here(tmp_path):
    page = ("Run `scripts/sweep demo --protos tcp,tls --bufs 4k` then\n"
            "```sh\n./iobench --proto tls \\\n  --buf 16k\n```\n"
            "and `scripts/sweep NAME --where netns` (a placeholder: not run).\n")
    cmds = [c for c in map(command_of, candidates(page)) if c]
    assert cmds == [["./iobench", "--proto", "tls", "--buf", "16k"],
                    ["scripts/sweep", "demo", "--protos", "tcp,tls", "--bufs", "4k"]], cmds
    if not os.access(BIN, os.X_OK):
        pytest.skip(f"{BIN} not built")
    assert refused(cmds[0]) is None
    assert "--protos" in refused(cmds[1])
    # A mention of an option without the operands it needs is no command.
    assert refused(["scripts/sweep", "--repeat", "auto"]) is None
    # A path a run would refuse is refused by the tool's check too (not "arguments ok").
    p = subprocess.run([str(ROOT / "scripts" / "recommend"), "/nonexistent"], capture_output=True,
                       text=True, env=dict(os.environ, IOBENCH_CHECK_ARGS="1"), timeout=60)
    assert p.returncode == 1 and "is not a sweep (no such directory" in p.stderr, p.stderr


def test_every_quoted_command_is_taken_by_its_tool():
    if not os.access(BIN, os.X_OK):
        pytest.skip(f"{BIN} not built")
    seen, bad = set(), []
    for page in pages():
        for line in candidates(page.read_text()):
            argv = command_of(line)
            if not argv or tuple(argv) in seen:
                continue
            seen.add(tuple(argv))
            why = refused(argv)
            if why:
                bad.append(f"{page.relative_to(ROOT)}: `{shlex.join(argv)}`: {why}")
    assert len(seen) > 50, len(seen)
    assert not bad, f"{len(bad)} quoted commands their tools refuse:\n" + "\n".join(bad)
