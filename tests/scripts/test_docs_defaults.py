"""One answer in every document (issue #67, "one source per fact"): a sentence in README.md,
docs/ or a results folder's README that names a chunk as a default or an answer names the
design's answer, the one results/design-answer's campaign committed, unless it stands in a
labelled section:

- `<!-- record -->` ... `<!-- /record -->` (or the next heading): a reading under an earlier
  rule, kept as it was; a file whose first lines say "Record of the rule of DATE; today's
  answer: [link to results/design-answer]" is a record whole;
- `<!-- per-study -->` ... `<!-- /per-study -->` (or the next heading): one study's own knee,
  which must link the design's answer (results/design-answer) inside the section.

The sentences are found by what names a default ("the design's chunk", "the answer", "must stay
at", "the sweeps named", "X is the answer"...), with a size within a few words: a heuristic,
tight enough to pass the pages' other uses of sizes (an option's default, a pipe's capacity)."""
import json
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CAMPAIGN = ROOT / "results" / "design-answer" / "hosts" / "amd-epyc-2cpu-fc-v657" / "results.json"
ANSWER_LINK = "design-answer"

_GAP = r"(?:[\w'’/-]+[\s,:*]+){0,5}?"
_SIZE = r"(?:TCP |TLS )?\**(\d+)(?-i:K)\b"
NAMING = re.compile(
    r"\b(?:design'?s? (?:chunk|answer|default)|the answer|(?:a|the|its|today's) default"
    r"|must stay at|should (?:use|take)|(?:rule|recommender|sweeps?|runs?) "
    r"(?:names?|named|takes?|took|picks?|picked))[\s,:*]+" + _GAP + _SIZE
    + r"|" + _SIZE + r"[\s,:*]+(?:[\w'’/-]+[\s,:*]+){0,2}?(?:is|as) (?:the answer|the default)\b",
    re.I)
# Advice to run at a size, in a command's words: "fix `--buf 64k`", "use `--buf 16k`".
ADVICE = re.compile(r"\b(?:fix|use|set|choose|pick|take|run (?:at|with)|give (?:it|them))\s+"
                    r"`--buf (\d+)[kK]`", re.I)
# A record's banner: the rule's date and a link to today's answer, in its first lines.
RECORD = re.compile(r"Record of the rules? of \d{4}-\d\d-\d\d[^\n]*today's answer[^\n]*" + ANSWER_LINK)
_SECTION = re.compile(r"<!-- (record|per-study) -->(.*?)(?=<!-- /\1 -->|^#|\Z)", re.S | re.M)


def design_answer():
    """The design's chunk in K, as the committed campaign states it."""
    return json.loads(CAMPAIGN.read_text())["answer"] // 1024


def pages():
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
            *sorted((ROOT / "results").glob("**/README.md"))]


def _sentences(text, keep_code=False):
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    if not keep_code:
        text = re.sub(r"`[^`\n]*`", "CODE", text)
    for para in re.split(r"\n\s*\n", text):
        flat = " ".join(line.strip() for line in para.splitlines())
        yield from re.split(r"(?<=[.;])\s+(?=[A-Z*(\[])", flat)


def problems(name, text, answer):
    """Every sentence of `text` naming a default other than `answer` outside a labelled
    section, and every per-study section that does not link the design's answer."""
    if RECORD.search("\n".join(text.splitlines()[:5])):
        return []
    out = []
    for kind, body in _SECTION.findall(text):
        if kind == "per-study" and ANSWER_LINK not in body:
            out.append(f"{name}: a per-study section without a link to the design's answer: "
                       f"{body.strip()[:80]}")
    rest = _SECTION.sub("", text)
    for sentence in _sentences(rest):
        for m in NAMING.finditer(sentence):
            size = int(next(g for g in m.groups() if g))
            if size != answer:
                out.append(f"{name}: names {size}K as a default outside a record or per-study "
                           f"section ({m.group(0)!r}): {sentence[:140]}")
    for sentence in _sentences(rest, keep_code=True):
        for m in ADVICE.finditer(sentence):
            if int(m.group(1)) != answer:
                out.append(f"{name}: advises {m.group(1)}K outside a record or per-study "
                           f"section ({m.group(0)!r}): {sentence[:140]}")
    return out


def test_no_document_names_another_default():
    answer = design_answer()
    found = [p for page in pages()
             for p in problems(str(page.relative_to(ROOT)), page.read_text(), answer)]
    assert not found, "\n".join(found)


def test_a_document_naming_another_default_fails_unless_labelled():
    text = ("# Results\n\nThe design's chunk is 64K on this link.\n\n"
            "<!-- per-study -->\nThis sweep's knee: the sweeps named 64K "
            "([today's answer](../results/design-answer/README.md)).\n<!-- /per-study -->\n\n"
            "<!-- per-study -->\nThe runs picked 256K.\n<!-- /per-study -->\n\n"
            "<!-- record -->\nThe rule names 64K.\n\n## Later\n\nA disk-based primary must stay "
            "at 8K. The answer: **16K**. `--bufs 1k,64k` is the default.\n")
    found = problems("fixture.md", text, 16)
    assert len(found) == 3, found
    advice = problems("advice.md", "Give it N x 64K, or fix `--buf 64k` (TCP) / `--buf 16k` "
                      "(TLS) when memory is not the limit.\n", 16)
    assert len(advice) == 1 and "advises 64K" in advice[0], advice
    assert "names 64K" in found[1] and "design's chunk is 64K" in found[1]
    assert "without a link" in found[0] and "256K" in found[0]
    assert "must stay at 8K" in found[2]
    record = "# x\n\n> Record of the rule of 2026-11-28; today's answer: [{}](design-answer/)\n\n"
    assert problems("record.md", record.format("here") + "The answer is 64K.\n", 16) == []
    # A banner without today's answer linked is no banner.
    bare = "# x\n\n> Record of the rule of 2026-11-28.\n\nThe answer is 64K.\n"
    assert len(problems("bare.md", bare, 16)) == 1


def test_the_old_tie_break_is_named_only_in_records():
    """Issue #66: "by count" (the tie-break on the fewest calls, which named the largest size the
    runs could not part) appears in no output and in no committed file but a record under the
    rule that made it, its banner at the top."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True,
                            text=True, timeout=60).stdout.split()
    if not listed:
        pytest.skip("not a git checkout")
    found = []
    for name in listed:
        path = ROOT / name
        if path.suffix in (".xz", ".png", ".gz", ".json") or not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        if "by count" in text.lower() and not RECORD.search("\n".join(text.splitlines()[:5])):
            found.append(name)
    assert found == [str(Path(__file__).resolve().relative_to(ROOT))], found


def test_the_per_study_pages_read_against_the_committed_answer():
    from iobench_tools.commands import recommend
    assert recommend.DESIGN_ANSWER // 1024 == design_answer()
