"""Start-up or steady state (issue 66): a run's pages migrated by thirds of its workload, the record's
``balancing_phase``, and the words a throughput verdict carries where runs were still migrating at their end."""

from __future__ import annotations

import json

from test_analysis import OFF, ON

from lab.analysis import verdict as vd
from lab.analysis.caveats import row_caveat
from lab.analysis.steady_state import balancing_phase, phase_of, phase_words


def _series(t: list[float], pages: list[int]) -> dict:
    return {"t": t, "numa_pages_migrated": pages}


def test_a_run_that_keeps_migrating_is_in_its_start_up() -> None:
    # ring-4 numa01, 10 s, balancing on (a checked-in record): more pages a second at the end than at the start
    m = json.loads((ON[0] / "manifest.json").read_text())
    phase = balancing_phase(m["metrics"]["vmstat_series"], m["workload"]["duration_s"])
    assert phase["state"] == "migrating" and phase["third_s"] == 3.33
    assert phase["pages_per_s"][2] > phase["pages_per_s"][0] > 1000, phase
    assert phase_of(m) == "migrating"  # (read from the series: a record made before the field)
    assert phase_of(json.loads((OFF[0] / "manifest.json").read_text())) == "none"


def test_a_run_that_found_its_places_is_settled() -> None:
    # 9 000 pages in the first 3 s, 300 in the next 3, 30 in the last 3
    nine = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    p = balancing_phase(_series(nine, [0, 3000, 6000, 9000, 9100, 9200, 9300, 9310, 9320, 9330]), 9.0)
    assert p["state"] == "settled" and p["pages_per_s"] == [3000.0, 100.0, 10.0]
    # a trickle at the end is settled whatever came before (at most 10 pages a second)
    trickle = balancing_phase(_series([0, 1, 2, 3, 4, 5, 6], [0, 3, 5, 8, 10, 13, 15]), 6.0)
    assert trickle["state"] == "settled"
    # at the end still a third of the start's rate: migrating
    p = balancing_phase(_series(nine, [0, 300, 600, 900, 1100, 1300, 1500, 1600, 1700, 1800]), 9.0)
    assert p["state"] == "migrating"


def test_too_little_to_split_is_no_phase() -> None:
    assert balancing_phase(_series([0, 1, 2], [0, 5, 9]), 9.0) is None
    assert balancing_phase(_series([0, 1, 2, 3], [0, 5, 9, 12]), 2.0) is None
    assert balancing_phase(None, 9.0) is None
    assert balancing_phase(_series([0, 1, 2, "x"], [0, 1, 2, 3]), 9.0) is None  # (the record's words: checked)


def test_a_throughput_verdict_says_its_runs_were_still_migrating() -> None:
    base = [json.loads((p / "manifest.json").read_text()) for p in OFF]
    new = [json.loads((p / "manifest.json").read_text()) for p in ON]
    words = phase_words(base + new)
    assert words == "3 of 6 runs still migrating pages in their last third (NUMA balancing's start-up, not its " \
        "steady state)"  # fmt: skip
    (v,) = vd.verdicts_of(base, new, ["workload.gbps"])
    assert v.caveat.endswith("; " + words), v.caveat
    (mech,) = vd.verdicts_of(base, new, ["vmstat.numa_pages_migrated"])
    assert words not in mech.caveat  # a mechanism row is the kernel's, in any phase
    assert row_caveat("workload.gbps", "GB/s", None, "", "") == ""
