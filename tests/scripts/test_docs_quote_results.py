"""The README and docs/ cannot drift from the results they quote, and the README reads in the
order of a newcomer's first hour.

A block of a page (a paragraph, a list, a table: the lines up to the next blank line) that
quotes committed results is preceded by a marker naming them:

    <!-- figures: results/ec2-emulated/recommendation.md results/real-knee/fleet/report.md -->

Every decimal figure in that block (0.547, +42.8%, 1.24) and every figure written with a
thousands separator (10,591) must be a figure of one of the named files, rounded as the block
writes it: a re-run that moves a figure, or a figure typed wrong, fails here."""
import re
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!-- figures: (.+?) -->$")
# A decimal (not a version: no second dot, no letter before it) or a number with thousands
# separators.
QUOTED = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+\.\d+)(?![\d.]\d|\w)")
SOURCE_NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")


def marked_blocks(page):
    """(line number, files named, block text) per marker of the page."""
    lines = page.read_text().splitlines()
    blocks = []
    for n, line in enumerate(lines):
        m = MARKER.match(line.strip())
        if not m:
            continue
        body = []
        for follow in lines[n + 1:]:
            if not follow.strip():
                if body:
                    break
                continue
            body.append(follow)
        blocks.append((n + 1, m[1].split(), "\n".join(body)))
    return blocks


def source_figures(paths):
    """Every number of the files, as the strings it rounds to (half up, as a reader rounds
    0.215 to 0.22) at 0 to 4 decimals."""
    have = set()
    for path in paths:
        for raw in SOURCE_NUMBER.findall(path.read_text(errors="replace")):
            value = Decimal(raw.replace(",", "").lstrip("-"))
            have |= {str(value.quantize(Decimal(1).scaleb(-k), rounding=ROUND_HALF_UP))
                     for k in range(5)}
    return have


def quoted_figures(text):
    """The block's figures, commas removed, outside link targets and inline code that names
    a command or a file."""
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = re.sub(r"`[^`]*(?:scripts/|iobench|--)[^`]*`", "", text)
    return [q.replace(",", "") for q in QUOTED.findall(text)]


ALL_BLOCKS = [(page, n, files, body) for page in PAGES for n, files, body in marked_blocks(page)]


def test_the_pages_quote_results_under_markers():
    """The quotes this file guards are there: removing the markers would pass everything."""
    pages = {page.name for page, *_ in ALL_BLOCKS}
    assert {"README.md", "sweeps.md", "findings.md"} <= pages, pages
    assert len(ALL_BLOCKS) >= 10


@pytest.mark.parametrize("page,line,files,body", ALL_BLOCKS,
                         ids=[f"{p.name}:{n}" for p, n, _, _ in ALL_BLOCKS])
def test_each_quoted_figure_is_in_the_results_it_names(page, line, files, body):
    paths = [ROOT / f for f in files]
    missing_files = [f for f, p in zip(files, paths) if not p.is_file()]
    assert not missing_files, f"{page.name}:{line} names files that are not committed: {missing_files}"
    quoted = quoted_figures(body)
    assert quoted, f"{page.name}:{line}: a marker over a block with no figure"
    have = source_figures(paths)
    wrong = [q for q in quoted if q not in have]
    assert not wrong, f"{page.name}:{line}: figures not in {files}: {wrong}"


def test_a_figure_that_is_not_in_its_source_is_caught(tmp_path):
    """The checker itself: a typed-wrong figure fails, a rounded one passes."""
    source = tmp_path / "r.md"
    source.write_text("| 16K | 0.8194 | 12800 | 0.215 |\n16K is 42.8% ± 31.0% above\n")
    have = source_figures([source])
    assert all(q in have for q in quoted_figures("0.819 s/GiB, 0.82, 12,800 writes, +42.8%, 0.22"))
    assert [q for q in quoted_figures("0.818 and 42.9%") if q not in have] == ["0.818", "42.9"]
    assert quoted_figures("Valkey 8.1.1, `scripts/sweep --bytes 1.5G`, [x](a/1.5.md)") == []


# --- the README in the order of a first hour ------------------------------------------------

README = (ROOT / "README.md").read_text()


def prose(text):
    """The README's running text: no code blocks, tables, headings, comments or link targets."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    keep = [line for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith(("|", "#"))]
    text = "\n".join(keep)
    return re.sub(r"\]\([^)]*\)", "]", text)


def sentences(text):
    flat = re.sub(r"\s+", " ", text).replace("**", "")
    # A sentence ends at . ! ? or a colon that opens a list item, followed by a space and a
    # capital, a backtick or a bracket; "e.g." and "i.e." do not end one.
    flat = re.sub(r"\b(e\.g|i\.e|vs|cf)\.", r"\1", flat)
    return [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z`\[*(])|\s-\s|(?:^|\s)- ", flat) if s.strip()]


def test_the_first_command_comes_within_25_lines():
    lines = README.splitlines()
    first = next(n for n, line in enumerate(lines, 1) if line.startswith("scripts/setup"))
    assert first <= 25, f"the first command is at line {first}"


def test_the_first_hour_says_what_setup_needs_and_how_long_it_takes():
    head = "\n".join(README.splitlines()[:60])
    for said in ["root", "network", "minutes", "scripts/test --quick", "Valkey"]:
        assert said in head, f"the first 60 lines do not say: {said}"


def test_no_readme_sentence_runs_over_40_words():
    long = [s for s in sentences(prose(README)) if len(s.split()) > 40]
    assert not long, f"{len(long)} sentences over 40 words, e.g. {long[0][:160]!r}"


def test_the_sentence_counter_splits_sentences():
    assert len(sentences("One two. Three four? `x` five.\n- a list item\n- another")) == 5


GLOSSARY = (ROOT / "docs" / "glossary.md").read_text()
TERMS = ["knee", "data phase", "counting run", "floor", "connset", "dual-channel", "diskless",
         "disk-based", "regime", "A/A control", "fan-out", "adaptive"]


@pytest.mark.parametrize("term", TERMS)
def test_each_term_is_linked_to_the_glossary_where_the_readme_first_uses_it(term):
    assert re.search(rf"^## {re.escape(term)}$", GLOSSARY, re.M | re.I), \
        f"docs/glossary.md does not define {term}"
    # After the title's lines, outside code (an option's value is no use of the term).
    raw = re.sub(r"```.*?```", "", README.split("\n## ", 1)[1], flags=re.S)
    raw = re.sub(r"`[^`\n]*`", "", raw)
    first = re.search(rf"(?<![\w-]){re.escape(term)}", raw, re.I)
    if first is None:
        return
    assert re.match(rf"\[{re.escape(term)}[^\]]*\]\(docs/glossary\.md#", raw[first.start() - 1:], re.I), \
        f"README first uses {term!r} without a link to docs/glossary.md: " \
        f"...{raw[max(0, first.start() - 60):first.end() + 20]}..."
