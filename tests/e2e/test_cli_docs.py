"""The command line's own documentation: --help lists the options by what a user is deciding,
the manual page is written from the same declarations (so every option --help shows is in it),
and `cmake --install` puts the binary and the page where man(1) finds them."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import BIN, run

GROUPS = ["Sizes", "Transport", "Engines", "Measurement", "Connections", "Payload", "Output",
          "TLS (with --proto tls)"]


def options_in(text):
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]+)", text))


def test_help_lists_the_options_in_groups():
    text = run("--help").stdout
    headings = [g for g in GROUPS if re.search(rf"^{re.escape(g)}:$", text, re.M)]
    assert headings == GROUPS, text
    sizes = text.split("\nSizes:")[1].split("\n\n")[0]
    assert "--buf" in sizes and "--budget" in sizes and "--proto" not in sizes
    assert "--zerocopy" in text.split("\nEngines:")[1].split("\n\n")[0]
    # `iobench client` groups its options the same way.
    assert "\nSizes:" in run("client", "--help").stdout


def test_the_man_page_has_every_option_help_shows():
    page = run("--manpage").stdout
    assert page.startswith(".TH IOBENCH 1")
    plain = page.replace("\\-", "-")
    for sub in ["", "server", "payload", "watch", "compare"]:
        helped = options_in(run(*([sub] if sub else []), "--help").stdout) - {"--help"}
        missing = helped - options_in(plain)
        assert not missing, f"{sub or 'iobench'}: {sorted(missing)} not in the man page"
    for g in GROUPS:
        assert f".SS {g}" in plain


def test_the_build_writes_the_man_page_and_cmake_installs_it(tmp_path):
    build = Path(BIN).resolve().parent
    page = build / "iobench.1"
    assert page.is_file(), "the build writes iobench.1 beside the binary"
    assert page.read_text() == run("--manpage").stdout, "iobench.1 is stale"
    cmake = shutil.which("cmake")
    if not cmake:
        pytest.skip("cmake not on PATH")
    subprocess.run([cmake, "--install", str(build), "--prefix", str(tmp_path)], check=True,
                   capture_output=True, timeout=120)
    assert (tmp_path / "bin" / "iobench").is_file()
    installed = tmp_path / "share" / "man" / "man1" / "iobench.1"
    assert installed.read_text() == page.read_text()
    if shutil.which("man"):
        shown = subprocess.run(["man", "-l", str(installed)], capture_output=True, text=True,
                               timeout=30, env={"MANWIDTH": "100", "PATH": "/usr/bin:/bin"})
        assert "--buf" in shown.stdout.replace("\u2010", "-")


def test_the_options_page_and_help_name_the_same_options():
    """docs/options.md names every option a --help lists (iobench's and each subcommand's), and
    every option it names is in one of them: a flag added or renamed without the page fails."""
    page = options_in((Path(__file__).resolve().parents[2] / "docs" / "options.md").read_text())
    helped = set()
    for sub in ["", "client", "server", "payload", "watch", "compare", "doctor", "protocol",
                "load"]:
        helped |= options_in(run(*([sub] if sub else []), "--help").stdout) - {"--help"}
    assert helped - page == set(), f"in --help, not in docs/options.md: {sorted(helped - page)}"
    assert page - helped - {"--help", "--install", "--pipe"} == set(), (  # cmake's, redis-cli's
        f"in docs/options.md, in no --help: {sorted(page - helped)}")


def test_help_fits_a_terminal_and_says_what_each_value_is():
    """Every --help line within 100 columns; no value shown as CLI11's TEXT, INT, UINT or FLOAT
    (a size is SIZE, a file FILE, a number N, an enum its names); --buf's default is shown."""
    for sub in ["", "client", "server", "payload", "watch", "compare", "doctor", "protocol",
                "load"]:
        text = run(*([sub] if sub else []), "--help").stdout
        long = [line for line in text.splitlines() if len(line) > 100]
        assert not long, f"{sub or 'iobench'} --help: {len(long)} lines over 100: {long[0]}"
        vague = re.findall(r"^\s+(?:-\w,)?(--[\w-]+) (TEXT|INT|UINT|FLOAT)\b", text, re.M)
        assert not vague, f"{sub or 'iobench'} --help: {vague}"
    top = run("--help").stdout
    assert re.search(r"--buf SIZES .*\n.*\(default 16K\)", top), top.split("\nSizes:")[1][:400]
    assert "--proto tcp|tls" in top and "--connect HOST:PORT" in run("client", "--help").stdout
