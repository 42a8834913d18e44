"""Trace analysis, mmtests formulas and A/B statistics, on real run records from tests/data/runs.

The run records were made by numalab itself from real VM runs (see
tests/data/runs/README.md); counts are checked against the real
``trace-cmd report`` output, grepped.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import pytest
from common import assert_one_line_error, numalab

from lab.analysis import compare as cmp
from lab.analysis import stats
from lab.analysis.metrics import metric_values, run_metrics
from lab.analysis.mmtests import autonuma_cost, derived_rows, hint_local_percent
from lab.analysis.numa import NUMA_KINDS
from lab.analysis.record import RunRecord
from lab.errors import LabError
from lab.report import ab_table
from lab.trace.tracedat import check_file, read_trace

DATA = Path(__file__).resolve().parents[1] / "data" / "runs"
ON = sorted(DATA.glob("ring4-numa01-on-*"))
OFF = sorted(DATA.glob("ring4-numa01-off-*"))


def grep_count(trace: Path, event: str) -> int:
    out = subprocess.run(["trace-cmd", "report", "-i", str(trace)], capture_output=True, text=True, check=True).stdout
    return sum(1 for line in out.splitlines() if f" {event}:" in line)


# --- mmtests formulas ---------------------------------------------------------


def test_autonuma_cost_known_vector() -> None:
    assert round(autonuma_cost(976844, 226763, 220146), 2) == 1144.84


def test_hint_local_percent() -> None:
    assert hint_local_percent(0, 0) == 100.0
    assert hint_local_percent(16113, 8407) == pytest.approx(52.18, abs=0.01)  # seed 003's baseline row
    rows = derived_rows(
        {
            "numa_pte_updates": 2048,
            "numa_huge_pte_updates": 3,
            "numa_hint_faults": 10,
            "numa_hint_faults_local": 5,
            "numa_pages_migrated": 7,
        }
    )
    assert rows["NUMA PTE updates"] == 2048 - 3 * 512
    assert rows["NUMA hint local percent"] == 50.0


# --- trace reading --------------------------------------------------------------


@pytest.mark.parametrize("run", ON + OFF, ids=lambda p: p.name)
def test_counts_match_trace_cmd_report(run: Path) -> None:
    data = read_trace(run / "trace.dat")
    assert data.problems == []
    counts = data.counts
    for ev in (*(k for k in NUMA_KINDS), "mm_migrate_pages"):
        assert counts.get(ev, 0) == grep_count(run / "trace.dat", ev)


def test_balancing_on_has_numa_events_and_off_has_none() -> None:
    assert ON and OFF, "tests/data/runs is missing its run records"
    for run in ON:
        c = read_trace(run / "trace.dat").counts
        assert sum(c.get(k, 0) for k in NUMA_KINDS) > 0
    for run in OFF:
        c = read_trace(run / "trace.dat").counts
        assert sum(c.get(k, 0) for k in NUMA_KINDS) == 0


def test_truncated_trace_is_marked_not_silently_short(tmp_path: Path) -> None:
    src = ON[0] / "trace.dat"
    cut = tmp_path / "trace.dat"
    cut.write_bytes(src.read_bytes()[: src.stat().st_size * 6 // 10])
    assert check_file(cut), "a truncated file must be reported"
    data = read_trace(cut)
    assert data.problems


def test_run_metrics_on_a_real_record() -> None:
    r = RunRecord.load(ON[0])
    m = run_metrics(r.path, r.topology, tuple(r.manifest["settings"]["trace_events"]), r.workload_start_uptime)
    ev = m["events"]
    moves = m["numa"]["node_moves"]
    # Every move/swap/stick with a destination lands in exactly one matrix cell.
    for kind, short in (("sched_move_numa", "move"), ("sched_swap_numa", "swap"), ("sched_stick_numa", "stick")):
        total = sum(map(sum, moves[short]["matrix"])) + moves[short]["without_destination"]
        assert total == ev[kind]
        assert sum(moves[short]["by_distance"].values()) == sum(map(sum, moves[short]["matrix"]))
    reasons = m["numa"]["stick_reasons"]
    assert sum(reasons.values()) == ev["sched_stick_numa"]
    sg = m["numa"]["swap_groups"]
    assert sg["same_group"] + sg["cross_group"] == ev["sched_swap_numa"]
    mp = m["numa"]["migrate_pages"].get("numa_misplaced", {})
    assert mp.get("calls", 0) <= ev["mm_migrate_pages"]
    rates = m["numa"]["rates"]["series"]
    assert sum(rates["move"]) == ev["sched_move_numa"]
    assert m["vmstat"]["numa_pages_migrated"] > 0
    assert m["numa"]["skipped"]["cross_node_lb"].startswith("needs sched_migrate_task")
    series = m["vmstat_series"]
    assert len(series["t"]) == len(series["numa_pages_migrated"]) > 3
    assert series["numa_pages_migrated"] == sorted(series["numa_pages_migrated"])  # cumulative


def test_lost_events_come_from_the_guest_stats(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(ON[0], run)
    text = (run / "trace-stats.txt").read_text()
    (run / "trace-stats.txt").write_text(text.replace("overrun: 0", "overrun: 7", 1))
    r = RunRecord.load(run)
    assert run_metrics(run, r.topology, tuple(r.manifest["settings"]["trace_events"]), None)["lost_events"] == 7


# --- statistics ---------------------------------------------------------------------


def test_stats_and_signed_diff() -> None:
    s = stats.Stats.of([1.0, 2.0, 3.0])
    assert (s.min, s.max, s.amean) == (1.0, 3.0, 2.0)
    assert s.stddev == pytest.approx(1.0)
    assert s.hmean == pytest.approx(3 / (1 + 1 / 2 + 1 / 3))
    assert s.coeffvar == pytest.approx(50.0)
    assert cmp.pct_better(10, 12, "higher") == pytest.approx(20.0)
    assert cmp.pct_better(10, 12, "lower") == pytest.approx(-20.0)
    assert cmp.pct_better(0, 0, "lower") == 0.0


def test_significance_rules() -> None:
    a = stats.Stats.of([10.0, 10.1, 9.9])
    b = stats.Stats.of([12.0, 12.1, 11.9])
    c = stats.Stats.of([10.0, 10.2, 9.8])
    assert stats.significant(a, b, "ci-overlap") is True
    assert stats.significant(a, c, "ci-overlap") is False
    assert stats.significant(a, b, "welch") is True
    assert stats.significant(a, c, "welch") is False
    assert stats.significant(stats.Stats.of([1.0, 2.0]), b) is None  # fewer than 3 repeats
    # Welch's p for t=2.228, dof=10 is 0.05 (two-sided).
    assert stats.t_two_sided_p(2.228, 10) == pytest.approx(0.05, abs=1e-3)
    assert math.isclose(stats.t_two_sided_p(1.0, 5), 0.3632, abs_tol=1e-3)


def test_compare_on_against_off_has_the_expected_direction() -> None:
    base = [RunRecord.load(p) for p in OFF]
    new = [RunRecord.load(p) for p in ON]
    c = cmp.compare_runs(base, new)
    moves = c.row("events.sched_move_numa")
    # Balancing on makes NUMA moves happen: more of a lower-is-better count, so '+' must not appear.
    assert moves.mean(moves.new) >= moves.mean(moves.base) == 0
    migrated = c.row("vmstat.numa_pages_migrated")
    assert migrated.mean(migrated.new) > 0 == migrated.mean(migrated.base)
    text = ab_table.to_text(c)
    assert "Amean" in text and "vmstat.numa_pages_migrated" in text
    assert json.loads(ab_table.to_json(c))["metrics"]
    assert "<table" in ab_table.to_html(c)
    if len(base) < 3:
        assert any("cannot be judged" in n for n in c.notes)


def test_compare_refuses_mixed_topologies(tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(ON[0], other)
    m = json.loads((other / "manifest.json").read_text())
    m["topology"]["name"] = "mesh-4"
    m["topology"]["distances"] = [[10 if i == j else 20 for j in range(4)] for i in range(4)]
    (other / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(LabError, match="mix topologies"):
        cmp.compare_runs([RunRecord.load(ON[0])], [RunRecord.load(other)])
    proc = numalab("compare", "--baseline", str(ON[0]), "--new", str(other))
    assert_one_line_error(proc, "mix topologies")


def test_metric_values_declare_direction() -> None:
    vals = metric_values(RunRecord.load(ON[0]).manifest)
    assert "vmstat.hint_local_pct" in vals and "events.sched_move_numa" in vals


# --- CLI bad input ---------------------------------------------------------------------


def test_report_on_a_directory_that_is_not_a_run(tmp_path: Path) -> None:
    proc = numalab("report", str(tmp_path))
    assert_one_line_error(proc, str(tmp_path), "not a numalab run")


def test_report_with_truncated_trace_warns_and_still_writes(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(ON[0], run)
    data = (run / "trace.dat").read_bytes()
    (run / "trace.dat").write_bytes(data[: len(data) * 6 // 10])
    out = tmp_path / "rep" / "report.html"
    proc = numalab("report", str(run), "--out", str(out))
    assert proc.returncode == 1
    assert "trace.dat" in proc.stderr and "Traceback" not in proc.stderr
    assert out.exists()
    report = json.loads(out.with_suffix(".json").read_text())
    assert report["runs"][0]["metrics"]["trace_problems"]


def test_trace_stats_in_both_dump_formats(tmp_path) -> None:
    """trace-stats.txt: "cpuN" headers and bare lines (older records), or grep -H's path-prefixed lines."""
    from lab.trace.tracedat import stats_lost

    old = tmp_path / "old.txt"
    old.write_text("cpu0\nentries: 5\noverrun: 2\ncommit overrun: 9\ncpu1\nentries: 1\noverrun: 0\n")
    new = tmp_path / "new.txt"
    new.write_text(
        "/sys/kernel/tracing/per_cpu/cpu0/stats:entries: 5\n/sys/kernel/tracing/per_cpu/cpu0/stats:overrun: 2\n"
        "/sys/kernel/tracing/per_cpu/cpu0/stats:commit overrun: 9\n/sys/kernel/tracing/per_cpu/cpu1/stats:entries: 1\n"
    )
    assert stats_lost(old) == stats_lost(new) == {"overrun": 2, "entries": 6}
