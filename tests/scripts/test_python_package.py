"""The Python half as a package (iobench_tools/): pyproject.toml's [project.scripts] is the one
list of commands, scripts/ holds exactly a short launcher for each, every module imports without
running anything, libraries never import commands, and every command's --help is whole: a
description that ends its sentence, every option with help text and its default."""
import argparse
import ast
import importlib
import inspect
import pkgutil
import re
import sys
from pathlib import Path

import pytest

import iobench_tools
from iobench_tools.lib.kernel import iobenchlib

# Shares no namespace name, netns lock, package or host-wide check with the other script tests:
# a lane apart (scripts/test).
pytestmark = pytest.mark.apart

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "iobench_tools"
LAUNCHER = re.compile(r"^from iobench_tools\.commands\.(\w+) import main; sys\.exit\(main\(\)\)", re.M)


def listed_commands():
    """{'sweep': 'sweep', 'compare-peers': 'compare_peers', ...} from pyproject.toml."""
    text = (ROOT / "pyproject.toml").read_text()
    section = text[text.index("[project.scripts]"):].split("\n\n")[0]
    found = dict(re.findall(r'^iobench-([a-z-]+) = "iobench_tools\.commands\.(\w+):main"$',
                            section, re.M))
    assert found, "no commands found in pyproject.toml: the pattern no longer matches"
    return found


def python_files_of_scripts():
    for path in sorted((ROOT / "scripts").iterdir()):
        if path.is_file() and path.read_text(errors="replace").startswith("#!/usr/bin/env python3"):
            yield path


def test_every_listed_command_has_its_launcher_and_every_python_script_is_one():
    listed = listed_commands()
    launchers = {}
    for path in python_files_of_scripts():
        text = path.read_text()
        m = LAUNCHER.search(text)
        assert m, f"scripts/{path.name} is Python but not a launcher of iobench_tools.commands"
        assert len(text.strip().splitlines()) <= 4, f"scripts/{path.name}: a launcher is 4 lines"
        launchers[path.name] = m.group(1)
    assert launchers == listed, "scripts/ launchers and pyproject.toml's list differ"
    assert not list((ROOT / "scripts").glob("*.py")), "a library under scripts/: iobench_tools/lib"


def modules():
    for info in pkgutil.walk_packages(iobench_tools.__path__, "iobench_tools."):
        yield info.name


def test_every_module_imports_without_running_anything():
    names = list(modules())
    assert "iobench_tools.commands.sweep" in names and "iobench_tools.lib.judging.statslib" in names
    for name in names:
        importlib.import_module(name)


def imports_of(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            yield from (f"{node.module}.{a.name}" for a in node.names)


def test_imports_point_down_libraries_never_reach_a_command():
    upward = [f"{p.relative_to(ROOT)} imports {m}" for p in (PACKAGE / "lib").rglob("*.py")
              for m in imports_of(p) if m.startswith("iobench_tools.commands")]
    assert not upward, "\n".join(upward)
    across = [f"{p.relative_to(ROOT)} imports {m}" for p in (PACKAGE / "commands").glob("*.py")
              for m in imports_of(p) if re.match(r"iobench_tools\.commands\.\w+", m)]
    assert not across, "a command imports another: move what they share to lib/\n" + "\n".join(across)


class _Parsed(Exception):
    def __init__(self, parser):
        super().__init__()
        self.parser = parser


def parser_of(module_name, monkeypatch):
    """The argparse parser a command's main() builds, caught at parse_args before it acts."""
    def catch(self, *args, **kwargs):
        raise _Parsed(self)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", catch)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", catch)
    monkeypatch.setattr(sys, "argv", [module_name])  # never pytest's own arguments
    module = importlib.import_module(f"iobench_tools.commands.{module_name}")
    with pytest.raises(_Parsed) as caught:
        module.main()
    return caught.value.parser


@pytest.mark.parametrize("command", sorted(listed_commands()))
def test_every_command_help_is_whole(command, monkeypatch):
    parser = parser_of(listed_commands()[command], monkeypatch)
    description = (parser.description or "").strip()
    assert description, f"{command}: no description"
    assert description[-1] in ".)?", f"{command}: description cut mid-sentence: ...{description[-40:]!r}"
    assert isinstance(parser.formatter_class, type) and issubclass(
        parser.formatter_class, argparse.ArgumentDefaultsHelpFormatter), (
        f"{command}: build the parser with iobenchlib.command_parser (defaults shown)")
    bare = [a.option_strings[0] if a.option_strings else a.dest for a in parser._actions
            if not isinstance(a, argparse._HelpAction) and not (a.help or "").strip()]
    assert not bare, f"{command}: options without help text: {bare}"


def test_command_parser_keeps_the_whole_first_paragraph_and_shows_defaults():
    doc = "Does a thing over\ntwo lines.\n\n  usage block"
    parser = iobenchlib.command_parser(doc, prog="x")
    parser.add_argument("--n", type=int, default=3, help="how many")
    text = parser.format_help()
    assert "Does a thing over\ntwo lines." in text and "usage block" not in text
    assert "how many (default: 3)" in text


def python_floors():
    """'lib/judging/statslib.py' -> floor, from docs/architecture.md's table of the Python half."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    floors = {}
    for floor, cells in re.findall(r"^\|\s*(\d+)\s*\|\s*(`(?:lib|commands)/[^|]*)\|", text, re.M):
        for name in re.findall(r"`((?:lib|commands)/[^`]+)`", cells):
            floors[name] = int(floor)
    return floors


def library_of(module):
    """'iobench_tools.lib.judging.statslib' -> 'lib/judging/statslib.py' (None: not a library)."""
    hit = re.match(r"iobench_tools\.lib\.(\w+)\.(\w+)$", module)
    return f"lib/{hit.group(1)}/{hit.group(2)}.py" if hit else None


def test_every_library_is_on_the_page_and_imports_only_lower_floors():
    floors = python_floors()
    libs = {p.relative_to(PACKAGE).as_posix() for p in (PACKAGE / "lib").rglob("*.py")
            if p.name != "__init__.py"}
    assert libs - set(floors) == set(), "libraries missing from docs/architecture.md"
    assert [p.name for p in (PACKAGE / "lib").glob("*.py")] == ["__init__.py"], \
        "a library outside lib's packages"
    upward = []
    for lib in sorted(libs):
        for m in imports_of(PACKAGE / lib):
            other = library_of(m)
            if other in floors and other != lib and floors[other] >= floors[lib]:
                upward.append(f"{lib} (floor {floors[lib]}) imports {other} (floor {floors[other]})")
    assert not upward, "\n".join(upward)


def package_layers():
    """'kernel' -> layer, from docs/architecture.md's table of lib's packages."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    return {name: int(layer) for layer, name in
            re.findall(r"^\|\s*(\d+)\s*\|\s*`lib/(\w+)/`\s*\|", text, re.M)}


def test_each_library_package_imports_only_itself_and_the_ones_before_it():
    """lib/'s packages are layers (kernel, judging, sweeps, then valkey and fleet): a module
    imports from its own package or an earlier layer's, never a later one's or a sibling's."""
    layers = package_layers()
    on_disk = {p.name for p in (PACKAGE / "lib").iterdir() if (p / "__init__.py").is_file()}
    assert on_disk == set(layers), "lib's packages and docs/architecture.md's table differ"
    wrong = []
    for path in sorted((PACKAGE / "lib").rglob("*.py")):
        mine = path.relative_to(PACKAGE / "lib").parts[0]
        if mine not in layers:
            continue
        for m in imports_of(path):
            hit = re.match(r"iobench_tools\.lib\.(\w+)", m)
            theirs = hit.group(1) if hit else None
            if theirs in layers and theirs != mine and layers[theirs] >= layers[mine]:
                wrong.append(f"{path.relative_to(PACKAGE)} ({mine}, layer {layers[mine]}) "
                             f"imports {m} ({theirs}, layer {layers[theirs]})")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("command", sorted(listed_commands()))
def test_every_command_takes_its_arguments_as_main_argv(command):
    """`main(argv=None)`: a command runs from Python with its own arguments, as from its
    launcher with the process's (docs/architecture.md)."""
    module = importlib.import_module(f"iobench_tools.commands.{listed_commands()[command]}")
    params = inspect.signature(module.main).parameters
    assert list(params) == ["argv"] and params["argv"].default is None, \
        f"{command}: main{inspect.signature(module.main)}, not main(argv=None)"
