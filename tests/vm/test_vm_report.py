"""End to end: real runs with NUMA balancing on and off -> report, compare, headless Chromium.

Six short real VMs (ring-4, numa01, 3 repeats per side). The analysis tests
use committed records; this one makes its own, so a change anywhere on the
path from the guest init to the HTML shows up here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from common import numalab, require_setup_package, ring4_numa01_repeats
from test_report_html import CHROMIUM, load_in_chromium

from lab.analysis.numa import NUMA_KINDS

pytestmark = pytest.mark.vm

REPEATS = 3


def _runs(tmp: Path, balancing: str, *extra: str) -> list[Path]:
    return ring4_numa01_repeats(tmp, balancing, REPEATS, *extra)


def test_on_against_off_report_and_compare(tmp_path: Path, built_kernel) -> None:
    on, off = _runs(tmp_path, "on", *built_kernel), _runs(tmp_path, "off", *built_kernel)

    for run in off:
        events = json.loads((run / "manifest.json").read_text())["metrics"]["events"]
        assert all(events.get(k, 0) == 0 for k in NUMA_KINDS), events

    proc = numalab("compare", "--baseline", *map(str, off), "--new", *map(str, on), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["metric"]: r for r in json.loads(proc.stdout)["metrics"]}
    migrated = rows["vmstat.numa_pages_migrated"]
    assert migrated["baseline"]["max"] == 0 and migrated["new"]["min"] > 0
    faults = rows["vmstat.numa_hint_faults"]
    assert faults["baseline"]["max"] == 0 and faults["new"]["min"] > 0
    assert migrated["significant"] is not None  # 3 repeats a side: significance is judged

    html = tmp_path / "report.html"
    proc = numalab("report", *map(str, off + on), "--out", str(html), timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(html.with_suffix(".json").read_text())
    assert len(data["runs"]) == 2 * REPEATS
    require_setup_package(CHROMIUM is not None, "chromium (the report was built but not rendered)", "chromium")
    res = load_in_chromium(html, html.with_suffix(".png"))
    assert res["errors"] == []
    assert res["requests"] == [html.resolve().as_uri()]
    for section in ("summary", "topology", "runs", "compare"):
        assert res["dom"]["sections"][section] is not None, section
    assert res["dom"]["sections"]["compare"]["svgs"] >= 1
