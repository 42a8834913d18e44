"""The numbers around verdicts (issue 26): all-zero baselines, one cell label, no runs-needed estimate from
1+1 runs, the absolute change on a near-zero baseline, and no hint-local percent from 0 hint faults.

On the real ring-4 numa01 records of tests/data/runs (balancing off has 0 pages migrated in every run: a
real all-zero baseline) and on figures shaped like the seeds' re-runs.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from test_analysis import OFF, ON

from lab.analysis import compare as cmp
from lab.analysis import verdict as vd
from lab.analysis.metrics import metric_values, run_metrics
from lab.analysis.record import RunRecord
from lab.matrix import auto_cells as mauto
from lab.matrix.definition import parse_matrix
from lab.record_files import VMSTAT_END, VMSTAT_START
from lab.report import ab_table
from lab.run import auto_pairs as ab_auto
from lab.run.options import RunOptions
from lab.topology.model.spec import load_topology


def _off_vs_on() -> cmp.Comparison:
    return cmp.compare_runs([RunRecord.load(p) for p in OFF], [RunRecord.load(p) for p in ON])


def test_an_all_zero_baseline_has_one_verdict_in_text_markdown_and_html() -> None:
    c = _off_vs_on()
    row = c.row("vmstat.numa_pages_migrated")
    assert row is not None and row.base.amean == 0 < row.new.amean
    assert row.significant is True  # 0 0 0 against three positive counts
    # a mechanism counter went up: changed (not judged), though the %diff of a 0 baseline is n/a
    assert row.verdict() == "changed"
    assert row.diff_text() == f"Δ{row.new.amean:+.4g}"
    text_line = next(
        ln for ln in ab_table.to_text(c).splitlines() if ln.startswith("Amean") and "numa_pages_migrated" in ln
    )
    md_line = next(ln for ln in ab_table.to_markdown(c).splitlines() if ln.startswith("| vmstat.numa_pages_migrated "))
    assert text_line.rstrip().endswith("*") and f"*{row.diff_text():>8}*" in text_line  # starred, with the Δ
    assert f"**{row.diff_text()}**" in md_line and md_line.rstrip(" |").endswith("changed")
    html = ab_table.to_html(c)
    assert f'class="changed">{row.diff_text()} *</td>' in html and "shown, not judged" in html
    assert "Δ: the absolute change" in ab_table.to_text(c) and "Δ: the absolute change" in ab_table.to_markdown(c)
    # no row of any stat reads a %diff past PCT_SHOWN_MAX (Min, Max, Stddev of a 0 baseline included)
    pcts = [float(x) for x in re.findall(r"(-?\d+\.\d+)%[*)]", ab_table.to_text(c))]
    assert pcts and max(map(abs, pcts)) <= cmp.PCT_SHOWN_MAX
    # and a row that is not significant is neither starred nor bold, in either
    text = ab_table.to_text(c).splitlines()
    for r in c.rows:
        tl = next(ln for ln in text if re.match(rf"(Amean|Hmean)\s+{re.escape(r.metric.key)}\s", ln))
        ml = next(ln for ln in ab_table.to_markdown(c).splitlines() if ln.startswith(f"| {r.metric.key} |"))
        tl = tl.removesuffix(f"  {r.verdict_text()}") if r.caveat else tl  # (a row's caveat follows its mark)
        assert tl.rstrip().endswith("*") == bool(r.significant) == ("**" in ml), (r.metric.key, tl, ml)


def test_a_verdict_on_an_all_zero_baseline_has_a_direction() -> None:
    v = vd.verdict_of("vmstat.numa_pages_migrated", [0.0, 0.0, 0.0], [120.0, 95.0, 140.0], sides=vd.Sides("tcg"))
    assert v.pct_diff is None and v.moved == "higher" and v.direction == "changed"
    assert "B vs A: changed, Δ+118.3, significant (welch)" in v.line()
    # a judged metric's all-zero baseline still has a better/worse direction
    w = vd.verdict_of("tasks.pingpong", [0.0, 0.0, 0.0], [3.0, 4.0, 5.0], sides=vd.Sides("tcg"))
    assert w.moved == "worse" and w.direction == "worse"
    # equal means did not move ("unchanged": a description of the means, not a verdict, issue 71); identical
    # constant runs are the same within any margin, a baseline of 0 included
    zeros = vd.verdict_of("vmstat.numa_pages_migrated", [0.0] * 3, [0.0] * 3)
    assert zeros.moved == "unchanged" and zeros.direction == "same" and zeros.decision == "same within ±1%"


def test_a_near_zero_baseline_shows_the_absolute_change_not_minus_33331_percent() -> None:
    # seed 004's shape: a count whose baseline mean is 0.003 of the new one
    assert cmp.diff_text(0.3, 100.29, "lower") == "Δ+99.99"
    assert cmp.pct_better(0.3, 100.29, "lower") == pytest.approx(-33330, rel=1e-3)  # still in the JSON
    assert cmp.diff_text(10.0, 12.0, "higher") == "+20.00%"
    assert cmp.diff_text(10.0, 110.0, "lower") == "-1000.00%"  # up to PCT_SHOWN_MAX a %diff reads fine
    assert cmp.diff_text(10.0, 110.1, "lower").startswith("Δ+100.1")
    assert cmp.diff_text(0.0, 0.0, "lower") == "+0.00%"


def test_no_runs_needed_estimate_from_fewer_than_three_runs_a_side() -> None:
    # "~5860/side" after 1+1 runs: no spread to estimate from
    for n in (1, 2):
        v = vd.verdict_of("workload.gbps", [1.0, 1.2][:n], [1.05, 1.22][:n], sides=vd.Sides("tcg"))
        assert v.needed_per_side is None and "needed" not in v.line(), v.line()
    v = vd.verdict_of("workload.gbps", [1.0, 1.2, 1.1], [1.05, 1.22, 1.12], sides=vd.Sides("tcg"))
    assert v.needed_per_side is not None and f"~{v.needed_per_side}/side needed" in v.line()


def test_one_cell_label_from_run_repeat_auto_and_from_a_matrix() -> None:
    spec = parse_matrix({"name": "m", "topologies": ["ring-2"], "kernels": ["a", "b"], "workloads": ["pairs"],
                         "baseline": {"kernel": "a"}, "repeats": "auto"}, "m.yaml", "m")  # fmt: skip
    run = spec.runs[0]
    assert mauto.cell_key(spec, run) == "ring-2/pairs/default"
    opts = RunOptions(kernels=("a", "b"), workload="pairs")
    assert vd.cell_label("ring-2", "pairs", ab_auto.settings_name(opts)) == "ring-2/pairs/default"
    off = RunOptions(kernels=("a", "b"), numa_balancing="off", knobs=("scan_delay_ms=10",))
    assert ab_auto.settings_name(off) == "balancing-off+knobs"
    v = vd.verdict_of("workload.gbps", [1.0] * 3, [1.0] * 3, sides=vd.Sides(context=mauto.cell_key(spec, run)))
    assert v.line().endswith("[ring-2/pairs/default]")


def test_no_hint_local_percent_from_zero_hint_faults(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(OFF[0], run)
    start = (run / VMSTAT_START).read_text()
    (run / VMSTAT_END).write_text(start)  # no hint fault between the snapshots
    topo = load_topology("ring-4")
    vm = run_metrics(run, topo, (), None)["vmstat"]
    assert vm["numa_hint_faults"] == 0 and vm["hint_local_pct"] is None
    assert "vmstat.hint_local_pct" not in metric_values({"metrics": {"vmstat": vm}})
    on = run_metrics(ON[0], topo, (), None)["vmstat"]
    assert on["numa_hint_faults"] > 0 and 0 <= on["hint_local_pct"] <= 100
