"""The access-matrix plugin's slowdown: one definition (lab.analysis.access_counts.slowdown) in the report and in
tests/bench/access_matrix.sh, a harmonic mean of the rates, and runs that never finished numa01-thread-alloc's
prefault flagged and left out (the workload is bimodal: 0.02-0.11 GB/s for those against about 1).

The records are copies of a real run (tests/data/runs/ring4-numa01-on-1) with their GB/s and per-thread
passes set to the two modes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from common import REPO

from lab.analysis.access_counts import prefault_unfinished, slowdown
from lab.analysis.record import RunRecord
from lab.analysis.stats import hmean
from lab.report.sections.access_section import slowdowns

SRC = REPO / "tests" / "data" / "runs" / "ring4-numa01-on-1"
INSTRUMENTED = {"local_pct": 80.0, "matrix": [[8, 1], [1, 8]], "plugin": {"sample": 64}, "accesses": 18,
                "window_s": [0, 10], "interval_ms": 200, "series": [], "problem": None}  # fmt: skip


def _record(tmp: Path, name: str, gbps: float, loops: list[int], access: bool) -> Path:
    d = tmp / name
    d.mkdir()
    for f in SRC.iterdir():
        if f.name != "manifest.json":
            (d / f.name).symlink_to(f)
    m = json.loads((SRC / "manifest.json").read_text())
    m["run_id"] = name
    m["workload"]["result"] |= {"gbps": gbps, "prefault": True, "thread_alloc": True,
                                "per_task": [{"loops": n, "bytes_touched": 1} for n in loops]}  # fmt: skip
    if access:
        m["access_matrix"] = INSTRUMENTED
    (d / "manifest.json").write_text(json.dumps(m))
    return d


def test_the_definition() -> None:
    assert hmean([1.0, 0.5]) == pytest.approx(2 / 3)  # not the Amean 0.75
    assert slowdown([1.0, 0.5], [0.25]) == pytest.approx((2 / 3) / 0.25)
    assert slowdown([1.0, 0.5], [0.25, 0.125]) == pytest.approx((2 / 3) / (1 / 6))
    assert slowdown([], [0.25]) is None and slowdown([1.0], [0.0]) is None
    assert prefault_unfinished({"prefault": True, "per_task": [{"loops": 0}, {"loops": 4}]}) == (
        "1 of 2 threads never finished the prefault (0 passes)"
    )
    assert prefault_unfinished({"prefault": True, "per_task": [{"loops": 1}, {"loops": 4}]}) is None
    assert prefault_unfinished({"prefault": False, "per_task": [{"loops": 0}]}) is None  # numa01: no prefault


def test_the_report_uses_it_and_leaves_out_runs_stuck_in_the_prefault(tmp_path: Path) -> None:
    from lab.report.report_model import build_report

    dirs = [
        _record(tmp_path, "plain-1", 1.0, [5, 6], False),
        _record(tmp_path, "plain-2", 0.5, [3, 2], False),
        _record(tmp_path, "plain-stuck", 0.05, [0, 0], False),  # the other mode: left out of the baseline
        _record(tmp_path, "inst", 0.25, [1, 1], True),
        _record(tmp_path, "inst-stuck", 0.02, [0, 1], True),
    ]
    slow = slowdowns([RunRecord.load(d) for d in dirs])
    assert slow["inst"]["factor"] == round((2 / 3) / 0.25, 2) == 2.67  # Hmean, not the Amean's 3.0
    assert slow["inst"]["plain_runs"] == 2 and slow["inst"]["plain_left_out"] == 1
    assert slow["inst-stuck"]["factor"] is None and "never finished the prefault" in slow["inst-stuck"]["prefault"]
    html = build_report(dirs, tmp_path / "report.html").html.read_text()
    assert "slowed the workload 2.67x" in html and "1 plain run(s) that never finished the prefault left out" in html
    assert "slowdown not measured: this run&#x27;s 1 of 2 threads never finished the prefault" in html
