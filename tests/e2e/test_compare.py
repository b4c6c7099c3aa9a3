"""`iobench compare`: per figure the ratio of medians, a bootstrap interval and the Mann-Whitney
U test, on synthetic results whose answers are known, and on real runs."""
import json

import pytest

from conftest import run


def results(label_runs):
    """A results file: {label: [(cpu_s_per_gib, gbps), ...]} for both sides alike."""
    def side(cpu, gbps):
        return {"cpu_s_per_gib": cpu, "throughput_gbps": gbps, "duration_ns": int(1e9 / gbps)}
    return {"results": [{"label": label, "runs": [
        {"run": i, "partial": False, "sender": side(c, g), "receiver": side(c, g)}
        for i, (c, g) in enumerate(runs)]} for label, runs in label_runs.items()]}


def write(tmp_path, name, doc):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return str(p)


def rows(p):
    return {(r["base_label"], r["side"], r["figure"]): r for r in json.loads(p.stdout)["rows"]}


def test_a_clear_difference_is_named_and_noise_is_not(tmp_path):
    base = write(tmp_path, "base.json", results({
        "16K": [(1.00, 10), (1.01, 10.1), (0.99, 9.9), (1.02, 10.2), (0.98, 9.8)],
        "64K": [(0.50, 20), (0.52, 20.5), (0.48, 19.5), (0.51, 20.2), (0.49, 19.8)]}))
    new = write(tmp_path, "new.json", results({
        "16K": [(0.80, 12), (0.81, 12.1), (0.79, 11.9), (0.82, 12.2), (0.78, 11.8)],
        "64K": [(0.51, 19.9), (0.49, 20.3), (0.50, 19.7), (0.47, 20.1), (0.53, 20.0)]}))
    p = run("compare", base, new, "--json", "-", check=0)
    r = rows(p)
    cpu = r[("16K", "sender", "cpu_s_per_gib")]
    # Fully separated, 5 vs 5: the exact two-sided p is 2 / C(10, 5).
    assert cpu["mann_whitney_p"] == pytest.approx(2 / 252)
    assert cpu["ratio"] == pytest.approx(0.80) and cpu["verdict"] == "better"
    assert cpu["ci95"][0] < 0.80 < cpu["ci95"][1] < 1
    assert r[("16K", "receiver", "throughput_gbps")]["verdict"] == "better"
    assert r[("16K", "sender", "wall_s")]["verdict"] == "better"
    for figure in ("cpu_s_per_gib", "throughput_gbps", "wall_s"):
        assert r[("64K", "sender", figure)]["verdict"] == "~", r[("64K", "sender", figure)]
    table = run("compare", base, new, check=0).stdout
    assert "16K sender   cpu_s_per_gib" in table and "better" in table and "  ~" in table


def test_three_runs_a_side_cannot_tell_even_when_separated(tmp_path):
    base = write(tmp_path, "b.json", results({"16K": [(1.0, 10), (1.1, 10), (1.2, 10)]}))
    new = write(tmp_path, "n.json", results({"16K": [(2.0, 10), (2.1, 10), (2.2, 10)]}))
    r = rows(run("compare", base, new, "--json", "-", check=0))
    cpu = r[("16K", "sender", "cpu_s_per_gib")]
    assert cpu["mann_whitney_p"] == pytest.approx(0.1) and cpu["verdict"] == "~"
    # With a looser level the same runs do tell: worse (CPU per GiB doubled).
    r = rows(run("compare", base, new, "--json", "-", "--alpha", "0.2", check=0))
    assert r[("16K", "sender", "cpu_s_per_gib")]["verdict"] == "worse"


def test_two_sizes_of_one_file(tmp_path):
    f = write(tmp_path, "one.json", results({
        "4K": [(2.0, 5), (2.1, 5.1), (1.9, 4.9), (2.05, 5.05), (1.95, 4.95)],
        "16K": [(1.0, 9), (1.05, 9.1), (0.95, 8.9), (1.02, 9.05), (0.98, 8.95)]}))
    p = run("compare", f + "#4K", f + "#16K", "--json", "-", check=0)
    r = {(x["base_label"], x["new_label"], x["side"], x["figure"]): x
         for x in json.loads(p.stdout)["rows"]}
    assert r[("4K", "16K", "sender", "cpu_s_per_gib")]["ratio"] == pytest.approx(0.5)
    assert r[("4K", "16K", "sender", "cpu_s_per_gib")]["verdict"] == "better"


@pytest.mark.parametrize("args,needle", [
    (["{f}", "{f}#16K"], "give a size to both sides"),
    (["{f}#1K", "{f}#16K"], "BASE has no size '1K'"),
    (["/nonexistent.json", "{f}"], "cannot read BASE '/nonexistent.json'"),
    (["{bad}", "{f}"], "BASE '{bad}' is not JSON"),
    (["{f}", "{f}", "--alpha", "1.5"], "invalid --alpha '1.5'"),
])
def test_bad_input_is_one_line(tmp_path, args, needle):
    f = write(tmp_path, "f.json", results({"16K": [(1.0, 10)]}))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    fill = {"f": f, "bad": str(bad)}
    p = run("compare", *[a.format(**fill) for a in args])
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert needle.format(**fill) in p.stderr, p.stderr


def test_real_runs_compare(cache_dir, tmp_path):
    out = tmp_path / "r.json"
    run("--buf", "4k,16k", "--bytes", "1M", "--repeat", "3", "--syscalls", "off", "--json", out,
        "-q", cache=cache_dir, check=0)
    p = run("compare", f"{out}#4K", f"{out}#16K", "--json", "-", check=0)
    doc = json.loads(p.stdout)
    assert len(doc["rows"]) == 6 and all(len(r["base_runs"]) == 3 for r in doc["rows"])
    assert all(r["verdict"] in ("~", "better", "worse") for r in doc["rows"])


def test_two_files_of_one_size_each_compare_as_they_are(tmp_path):
    """16K in one file, 64K in the other: that pair, no FILE#SIZE needed; two sizes against one
    still need the size named."""
    a = write(tmp_path, "a.json", results({"16K": [(1.0, 10), (1.01, 10), (0.99, 10), (1.02, 10),
                                                   (0.98, 10)]}))
    b = write(tmp_path, "b.json", results({"64K": [(0.5, 20), (0.51, 20), (0.49, 20), (0.52, 20),
                                                   (0.48, 20)]}))
    r = rows(run("compare", a, b, "--json", "-", check=0))
    cpu = r[("16K", "sender", "cpu_s_per_gib")]
    assert cpu["ratio"] == pytest.approx(0.5) and cpu["verdict"] == "better"
    two = write(tmp_path, "two.json", results({"4K": [(2.0, 5)] * 5, "8K": [(1.5, 6)] * 5}))
    p = run("compare", two, b, check=None)
    assert p.returncode != 0 and "no size in common (name one: FILE#16K)" in p.stderr
