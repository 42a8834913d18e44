"""Issue 71: verdict words that mean what they say. "same" only where the equivalence test shows it, decided in one
place (lab.analysis.judgement.judge); undecided, with its runs, where neither a difference nor sameness is shown.

The code is searched for the words: no string in lab/ that a verdict could be made of says "same" outside the
deciding function, except where the word is compared with (``word == "same"``) or is the input vocabulary of a
seed's expectations. Then the words themselves, on the demo's own example (0 against 35,082 pages migrated over 3
runs), two tight equal samples and a clear difference, in every renderer."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from common import REPO

from lab.analysis import compare as cmp
from lab.analysis import finding
from lab.analysis import verdict as vd
from lab.analysis.judgement import judge
from lab.analysis.metrics import get_metric
from lab.analysis.stats import Stats, significant
from lab.report import ab_table
from lab.report.sections.ab_section import _verdict_words

LAB = REPO / "lab"
PRODUCER = LAB / "analysis" / "judgement.py"
# A sameness claim a verdict could be made of: the bare word, "same (...)" (the old "same (not significant)",
# "same (significant but below 1%)") or "same within ...".
CLAIM = re.compile(r"\bsame(?: \(| within\b)")
# Where the bare word is not a verdict: the directions a seed's matrix may expect (lab.analysis.expectations),
# which numalab checks its verdicts against, never prints as its own.
INPUT_VOCABULARY = {("lab/analysis/expectations.py", "DIRECTIONS")}


def _claims(source: str, rel: str) -> list[tuple[str, int, str]]:
    """(file, line, string) of every string in ``source`` that makes "same" a verdict outside a comparison with
    the word, a lookup keyed by it, or the input vocabulary; docstrings are documentation, not output."""
    tree = ast.parse(source)
    parent = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        text = node.value
        if isinstance(parent.get(node), ast.Expr):  # a docstring (or a bare string statement)
            continue
        if text.strip() != "same" and not CLAIM.search(text):
            continue
        if text.strip() == "same" and _compared_or_named(node, parent, rel):
            continue
        out.append((rel, node.lineno, text))
    return out


def _compared_or_named(node: ast.AST, parent: dict, rel: str) -> bool:
    """The bare word as an operand of ==, != or in (a tuple of words included), a dict key, or a name of
    :data:`INPUT_VOCABULARY`."""
    up = parent.get(node)
    while isinstance(up, (ast.Tuple, ast.List, ast.Set)):
        node, up = up, parent.get(up)
    if isinstance(up, ast.Compare):
        return True
    if isinstance(up, ast.Dict) and node in up.keys:
        return True
    while up is not None and not isinstance(up, (ast.Assign, ast.AnnAssign)):
        up = parent.get(up)
    targets = [] if up is None else (up.targets if isinstance(up, ast.Assign) else [up.target])
    return any(isinstance(t, ast.Name) and (rel, t.id) in INPUT_VOCABULARY for t in targets)


def test_no_code_path_says_same_without_the_equivalence_test() -> None:
    found, produced = [], []
    for path in sorted(LAB.rglob("*.py")):
        rel = str(path.relative_to(REPO))
        claims = _claims(path.read_text(), rel)
        (produced if path == PRODUCER else found).extend(claims)
    assert found == [], "a verdict word 'same' made outside lab.analysis.judgement.judge:\n" + "\n".join(
        f"  {f}:{n}: {t!r}" for f, n, t in found
    )
    assert any(t == "same" for _f, _n, t in produced) and any("same within" in t for _f, _n, t in produced)


# A module that does not exist (built, so the check that the tree names only files that exist passes it by).
ELSEWHERE = "/".join(("lab", "analysis", "elsewhere.py"))


@pytest.mark.parametrize(
    "snippet",
    [
        'words = "same (not significant)"',  # the demo's old finding
        'def verdict(sig):\n    return "same" if not sig else "better"',  # not significant called same
        'label = f"same within ±{pct}%"',
        'TEXT = {"unknown": "n/a", "x": "same"}',
    ],
)
def test_the_search_would_find_a_same_made_elsewhere(snippet: str) -> None:
    assert _claims(snippet, ELSEWHERE), snippet


def test_the_search_lets_comparisons_lookups_and_the_expected_directions_be() -> None:
    ok = (
        'if word == "same":\n    pass\n'
        'x = v in ("better", "same")\n'
        'how = {"same": "as local as"}.get(word)\n'
        'def f():\n    """Not significant is never "same within ±1%": a docstring."""\n'
        'outcome = "same direction, not significant"\n'
    )
    assert _claims(ok, ELSEWHERE) == []
    vocabulary = 'DIRECTIONS = ("better", "worse", "same", "higher", "lower")'
    assert _claims(vocabulary, "lab/analysis/expectations.py") == []
    assert _claims(vocabulary, ELSEWHERE)  # the name alone does not allow it elsewhere


# --- the words ---------------------------------------------------------------------------------------------

MIGRATED = "vmstat.numa_pages_migrated"
# The demo's closing finding of issue 71: stock (balancing off) 0, stock 35,082 (1 to 105,243, 3 runs)
OFF_PAGES, ON_PAGES = [0.0, 0.0, 0.0], [1.0, 2.0, 105243.0]


def _row(
    key: str, base: list[float], new: list[float], significance: str = "welch", min_effect: float = 1.0
) -> cmp.Row:
    m, bs, ns = get_metric(key), Stats.of(base), Stats.of(new)
    row = cmp.Row(m, bs, ns, None, min_effect, significance=significance)
    row.significant = significant(bs, ns, significance, row.mean_name.lower())
    return row


def _comparison(rows: list[cmp.Row]) -> cmp.Comparison:
    return cmp.Comparison("stock (balancing off)", "stock", "ring-2", "numa01", "welch", rows, ["r1", "r2", "r3"],
                          ["r1", "r2", "r3"])  # fmt: skip


def test_zero_against_35082_over_three_runs_is_undecided_not_same() -> None:
    row = _row(MIGRATED, OFF_PAGES, ON_PAGES)
    j = row.judgement
    assert row.significant is False and j.word == "undecided" and j.equivalent is False and not j.decided
    # a baseline of 0 has a margin of 0: no number of runs shows it the same; ~24 a side would show the difference
    assert j.margin == 0 and j.needed == 24
    assert j.text == "undecided (3+3 runs; ~24 a side needed)" == row.verdict_text()
    v = vd.verdict_of(MIGRATED, OFF_PAGES, ON_PAGES, sides=vd.Sides(labels=("off", "on")))
    assert v.direction == "undecided" and not v.decided and v.needed_per_side == 24
    assert "on vs off: undecided (higher by the Amean), Δ+3.508e+04, not significant (welch), 3+3 runs" in v.line()
    assert "same" not in v.line() and "same" not in json.dumps(v.to_dict())


def test_the_demos_finding_reads_true_for_each_mechanism_row() -> None:
    """The finding `make demo` ends with, on runs like the issue's: each mechanism row says what its runs show."""
    c = _comparison([
        _row(MIGRATED, OFF_PAGES, ON_PAGES),
        _row("events.sched_move_numa", [0.0, 0.0, 0.0], [0.0, 1.0, 2.0]),
        _row("events.sched_swap_numa", [0.0, 0.0, 0.0], [0.0, 0.0, 4.0]),
        _row("vmstat.numa_hint_faults", [0.0, 0.0, 0.0], [312.0, 429.0, 646.0]),
    ])  # fmt: skip
    f = finding.finding(c)
    assert f is not None
    by = {r["metric"]: r for r in f.rows}
    assert by[MIGRATED]["line"] == (
        "pages migrated a run: stock (balancing off) 0, stock 35,082 (1 to 105,243, 3 runs); numalab: undecided "
        "(3+3 runs; ~24 a side needed)"
    )
    assert by["events.sched_move_numa"]["verdict"].startswith("undecided (3+3 runs; ~")
    assert by["events.sched_swap_numa"]["verdict"].startswith("undecided (3+3 runs; ~")
    text = finding.to_text(c) + finding.to_markdown(c) + finding.to_html(c) + json.dumps(finding.to_dict(c))
    assert "same" not in text.replace("the same", "")  # (no row says same: none was shown the same)


def test_two_tight_equal_samples_are_the_same_within_one_percent_everywhere() -> None:
    base, new = [10.0, 10.01, 9.99], [10.0, 10.01, 9.99]
    row = _row("workload.gbps", base, new)
    assert row.verdict() == "same" and row.verdict_text() == "same within ±1%" and row.judgement.equivalent
    v = vd.verdict_of("workload.gbps", base, new, sides=vd.Sides(labels=("a", "b")))
    assert v.direction == "same" and v.decided and v.decision == "same within ±1%"
    assert "b vs a: same within ±1%, +0.00%, not significant (welch), equivalent within ±1% (TOST p=" in v.line()
    c = _comparison([row])
    data = {m["metric"]: m for m in ab_table.to_dict(c)["metrics"]}["workload.gbps"]
    assert data["verdict"] == "same" and data["verdict_text"] == "same within ±1%"
    assert data["equivalence"]["equivalent"] is True and data["equivalence"]["p_value"] < 0.05
    assert data["equivalence"]["margin_pct"] == 1.0 and data["equivalence"]["margin"] == pytest.approx(0.1)
    assert data["p_value"] == pytest.approx(1.0) and data["ci95_diff"] is not None  # the p and interval it had
    assert "same within ±1%" in ab_table.to_text(c) and "same within ±1%" in ab_table.to_markdown(c)
    assert "same within ±1%" in ab_table.to_html(c) and _verdict_words(row) == "same within ±1%"
    # the same pair as a mechanism row of the finding
    loc = _row("vmstat.hint_local_pct", [80.0, 80.1, 79.9], [80.0, 80.1, 79.9])
    both = finding.both_sides_sentence(_comparison([loc]))
    assert both == ("NUMA balancing acted on both sides; stock's hint faults were as local as stock (balancing off)'s "
                    "(same within ±1%).")  # fmt: skip


@pytest.mark.parametrize(
    ("key", "base", "new", "word"),
    [
        ("workload.gbps", [10.0, 10.1, 9.9], [12.0, 12.1, 11.9], "better"),
        ("workload.gbps", [12.0, 12.1, 11.9], [10.0, 10.1, 9.9], "worse"),
        ("workload.elapsed_s", [10.0, 10.1, 9.9], [12.0, 12.1, 11.9], "worse"),  # lower is better
        (MIGRATED, [100.0, 110.0, 90.0], [500.0, 510.0, 490.0], "changed"),  # a mechanism counter has no better
        (MIGRATED, [0.0, 0.0, 0.0], [120.0, 95.0, 140.0], "changed"),
    ],
)
def test_a_clear_difference_is_better_worse_or_changed(key: str, base: list[float], new: list[float],
                                                       word: str) -> None:  # fmt: skip
    row = _row(key, base, new)
    assert row.significant and row.verdict() == word and row.verdict_text() == word
    assert vd.verdict_of(key, base, new).direction == word
    words = {m["metric"]: m for m in finding.mechanism_rows(_comparison([row]))}
    if key == MIGRATED:
        assert words[key]["verdict"] == f"{word} (significant)"


def test_significant_but_below_the_minimum_effect_and_not_shown_within_it_is_undecided() -> None:
    """+0.8%, significant after 4 runs a side, but the 90% interval reaches past +1%: neither better (it is below
    the minimum effect) nor the same (not shown within it). Before issue 71 it read "same (significant but
    below 1%)"."""
    base, new = [100.0, 100.01, 99.99, 100.0], [100.5, 100.7, 100.9, 101.1]
    row = _row("workload.gbps", base, new)
    assert row.significant and row.below_effect and row.verdict() == "undecided" and not row.judgement.equivalent
    why = "significant but below 1%, not shown within ±1%"
    assert row.verdict_text() == f"undecided ({why}; 4+4 runs; ~11 a side needed)"
    v = vd.verdict_of("workload.gbps", base, new)
    assert not v.decided and "undecided (better by the Hmean, below 1%, not shown within ±1%)" in v.line()
    assert row.said  # the text table says why its starred row is not better


def test_too_few_runs_are_not_judged() -> None:
    row = _row("workload.gbps", [10.0, 10.0], [10.0, 10.0])
    assert row.verdict() == "unknown" and row.verdict_text() == "not judged (fewer than 3 runs a side)"


def test_the_ci_overlap_rule_has_its_own_equivalence() -> None:
    """Under ci-overlap "same" is the rule's interval inside the margin: tight equal runs are, noisy equal runs
    (whose Welch TOST would need many more) are not; the JSON keeps Welch's TOST p whatever the rule."""
    tight = _row("workload.gbps", [10.0, 10.01, 9.99], [10.0, 10.01, 9.99], significance="ci-overlap")
    assert tight.verdict() == "same" and tight.judgement.to_dict()["test"] == "ci-overlap"
    noisy = _row("workload.gbps", [10.0, 10.5, 9.5], [10.0, 10.5, 9.5], significance="ci-overlap")
    assert noisy.verdict() == "undecided" and noisy.judgement.equivalence_p is not None


def test_one_function_decides_and_the_renderers_follow_it() -> None:
    """Row.verdict, the verdict line's direction and the finding all take judge's word."""
    cases = [(MIGRATED, OFF_PAGES, ON_PAGES), ("workload.gbps", [10.0, 10.01, 9.99], [10.0, 10.01, 9.99]),
             ("workload.gbps", [10.0, 10.1, 9.9], [12.0, 12.1, 11.9])]  # fmt: skip
    for key, base, new in cases:
        row = _row(key, base, new)
        j = judge(row.metric.better, row.base, row.new, row.significant, "welch", 1.0, row.mean_name.lower())
        assert row.judgement == j and vd.verdict_of(key, base, new).direction == j.word
        assert vd.verdict_of(key, base, new).decision == j.text


def test_docs_and_help_no_longer_call_noise_the_same() -> None:
    for page in (*sorted((REPO / "docs").rglob("*.md")), REPO / "README.md"):
        text = page.read_text()
        assert "same (not significant)" not in text and "same (significant but below" not in text, page
    assert Path(REPO / "CHANGELOG.md").read_text().count("### Changed (issue 71: verdict words)") == 1
