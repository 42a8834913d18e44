"""Issue 38: a figure from the guest is checked before it is believed. No VM: the host's own limit on
collecting the guest's results, the plausibility checks of the guest's figures against what the host saw,
stage marks bound by the host's clock and the init's token, text that is not UTF-8, and the smaller ones
(tests/vm/test_vm_guest_fuzz.py proves the end-to-end path on a real VM)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lab.analysis.plausible import Windows, counter_problems, cpu_problems, host_windows, result_problems
from lab.report.html_parts import e
from lab.run.collect import _guarded, in_record
from lab.run.collect_limit import CollectLimit
from lab.run.manifest import workload_seconds
from lab.vm.console import Stage, VmOutcome, WatchRules, check_marks, watch
from lab.workloads.registry import SECONDS_METRICS


def _spin(seconds: float) -> str:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return "done"


def test_a_reader_that_runs_past_the_collection_limit_is_stopped_and_named() -> None:
    problems: list[str] = []
    limit = CollectLimit(0.3)
    t0 = time.monotonic()
    with limit.armed():
        assert _guarded(problems, "workload output", _spin, {"parse_error": "x"}, 30, limit=limit) == {
            "parse_error": "x"
        }
        assert _guarded(problems, "metrics", _spin, {}, 0.0, limit=limit) == {}  # (after the limit: not started)
    assert time.monotonic() - t0 < 3
    assert problems == [
        "workload output: not read (the host's collection of the guest's results ran past its limit of 0.3 s)",
        "metrics: not read (the host's collection of the guest's results ran past its limit of 0.3 s)",
    ]


def test_outside_a_reader_the_alarm_interrupts_nothing() -> None:
    problems: list[str] = []
    limit = CollectLimit(0.1)
    with limit.armed():
        assert _spin(0.5) == "done"  # (the manifest is built and written whatever the clock says)
    assert _guarded(problems, "x", _spin, None, 0.0) == "done" and not problems


# --- stage marks: the init's token, the host's clock ------------------------------------------------------

TOKEN = "0123456789abcdef0123456789abcdef"


def _watch(tmp_path: Path, lines: list[str], token: str = TOKEN) -> VmOutcome:
    console = tmp_path / "console.log"
    console.write_text("".join(f"{ln}\n" for ln in lines))
    outcome = VmOutcome(None, False, 0.0)
    seen: list[str] = []
    watch(console, outcome, WatchRules(10), lambda: 0, on_stage=lambda st: seen.append(st.name), token=token)
    assert seen == [s.name for s in outcome.stages]  # (a forged mark reaches no callback: no vCPU sample)
    return outcome


def test_a_mark_without_the_runs_token_is_kept_aside_not_taken(tmp_path: Path) -> None:
    outcome = _watch(tmp_path, [
        f"NUMALAB-STAGE {TOKEN} booted 1.5",
        "NUMALAB-STAGE workload-start 1.0",  # (what a workload writing to /dev/console printed)
        f"NUMALAB-STAGE {TOKEN} workload-start 2.0",
        "NUMALAB-STAGE failed results-mount 3.0",
        f"NUMALAB-STAGE {TOKEN[:-1]}0 workload-end 0 99999",  # (a guessed token)
        f"junk NUMALAB-STAGE {TOKEN} workload-end 0 3.0",
    ])  # fmt: skip
    assert [(s.name, s.guest_uptime) for s in outcome.stages] == [
        ("booted", 1.5), ("workload-start", 2.0), ("workload-end", 3.0)
    ]  # fmt: skip
    assert outcome.stage("failed") is None and outcome.forged_count == 3
    problems = check_marks(outcome, host_clock=False)
    assert len(problems) == 3 and all("a stage mark without the init's token" in p for p in problems), problems
    assert "'failed' 'results-mount'" in problems[1]
    assert TOKEN not in " ".join(problems)


def _outcome(*marks: tuple[str, float, float | None], wall: float = 20.0) -> VmOutcome:
    return VmOutcome(0, False, wall, [Stage(n, "", h, u) for n, h, u in marks])


def test_marks_the_hosts_clock_contradicts_are_problems_not_timings() -> None:
    # issue 38's runs: workload_s of -9.02 s and 99,992.7 s in runs of 8.6 s
    for end_uptime, why in ((-4.0, "before the workload-start mark's 5 s"), (99997.7, "the VM had run 7.0 s")):
        outcome = _outcome(("booted", 3.0, 2.5), ("workload-start", 5.6, 5.0), ("workload-end", 7.0, end_uptime))
        problems = check_marks(outcome)
        assert len(problems) == 1 and "stage mark workload-end: " in problems[0] and why in problems[0], problems
        assert problems[0].endswith("the host's clock contradicts it (not a timing)")
        assert workload_seconds(outcome) is None and workload_seconds(outcome, host=True) is None
    # a late mark that claims the workload took 1 s where the host saw 30
    outcome = _outcome(("workload-start", 5.0, 4.0), ("workload-end", 35.0, 5.0), ("done", 35.5, 34.5))
    problems = check_marks(outcome)
    assert problems == ["stage mark workload-end: 1.00 s by the guest's uptime after the workload-start mark, 30.00 s "
                        "by the host's clock; the host's clock contradicts it (not a timing)"]  # fmt: skip
    assert not outcome.stage("done").contradicted  # (measured from the last mark that stood: 30.5 s, 30 s)
    # an honest run (tests/data/runs/ring4-numa01-on-1) stands, with both clocks recorded
    honest = _outcome(("booted", 6.62, 5.22), ("topology", 7.53, 6.15), ("workload-start", 7.74, 6.28),
                      ("workload-end", 18.06, 16.67), ("collect", 21.64, 20.27), ("done", 21.85, 20.47))  # fmt: skip
    assert check_marks(honest) == []
    assert workload_seconds(honest) == pytest.approx(10.39) and workload_seconds(honest, host=True) == pytest.approx(
        10.32
    )
    # --clock virtual: guest seconds count instructions; only their order is checked
    assert check_marks(_outcome(("workload-start", 5.0, 4.0), ("workload-end", 35.0, 5.0)), host_clock=False) == []


# --- figures against what the host saw --------------------------------------------------------------------

WINDOWS = Windows(workload_s=8.0, stat_s=10.0, vm_s=20.0)


def test_impossible_workload_figures_are_named() -> None:
    seconds = set(SECONDS_METRICS)
    result = {"elapsed_s": -5, "gbps": 1e30, "bytes_touched": 10, "converged_s": 99992.7}
    assert result_problems(result, WINDOWS, seconds, set()) == [
        "the workload's elapsed_s is -5, below 0",
        "the workload's gbps is 1e+30, beyond any 64-bit figure (an overflow)",
        "the workload's converged_s is 99992.7 s, longer than the workload window the host saw (8.00 s; 10.80 s with "
        "the slack)",
    ]
    assert result_problems({"elapsed_s": 10.5, "gbps": 0.0}, WINDOWS, seconds, set()) == []  # (within the slack)
    perf = {"summary": {"total-speed": {"value": -3.0, "unit": "GB/sec"}}, "elapsed_s": 1.0}
    assert result_problems(perf, WINDOWS, seconds, set()) == ["the workload's summary.total-speed is -3, below 0"]
    # a user's own figures may be below 0, not those compared as built-ins; no window: the VM's whole run
    user = {"delta": -3.0, "elapsed_s": -1.0, "wait_s": 25.0}
    assert result_problems(user, Windows(None, None, 20.0), seconds | {"wait_s"}, {"delta", "wait_s"}) == [
        "the workload's elapsed_s is -1, below 0",
        "the workload's wait_s is 25 s, longer than the VM's whole run the host saw (20.00 s; 24.00 s with the slack)",
    ]
    assert result_problems({"parse_error": "x"}, WINDOWS, seconds, set()) == []


def test_counters_that_went_down_or_overflowed_are_named() -> None:
    """issue 38: a rewritten vmstat.start gave numa_pages_migrated -999999999999999999999999999999 and an
    autonuma_cost of -1.9e25; a rewritten stat.start a node's busy time of -1e12 s."""
    metrics = {"vmstat": {"numa_pages_migrated": -999999999999999999999999999999, "numa_hint_faults": 3,
                          "pgfault": 1 << 70, "autonuma_cost": -1.9e25, "hint_local_pct": None}}  # fmt: skip
    assert counter_problems(metrics) == [
        "vmstat: numa_pages_migrated went down by 999,999,999,999,999,999,999,999,999,999 between vmstat.start and "
        "vmstat.end (a counter only grows)",
        "vmstat: pgfault grew by 1.181e+21 between vmstat.start and vmstat.end, more than a 64-bit counter can",
    ]
    node_cpu = {"busy_s": {"0": -1e12, "1": 1.0}, "idle_s": {"0": 1.0, "1": 1.0}}
    assert cpu_problems(node_cpu, 4, WINDOWS) == [
        "/proc/stat: node 0's busy time went down by 1e+12 s between stat.start and stat.end (a counter only grows)"
    ]
    busy = {"busy_s": {"0": 30.0, "1": 30.0}, "idle_s": {"0": 0.0, "1": 0.0}}
    assert cpu_problems(busy, 4, WINDOWS) == [
        "/proc/stat: 60 s of CPU busy time, more than 4 vCPUs x the 10.00 s between the copies the host saw (52.00 s "
        "with the slack)"
    ]
    assert cpu_problems(busy, 8, WINDOWS) == [] and counter_problems({"vmstat": {"pgfault": 5}}) == []


def test_the_host_windows_come_from_the_marks_that_stood() -> None:
    outcome = _outcome(("topology", 2.0, 1.5), ("workload-start", 3.0, 2.5), ("workload-end", 11.0, 10.5),
                       ("done", 12.0, 11.5))  # fmt: skip
    assert host_windows(outcome) == Windows(8.0, 10.0, 20.0)
    outcome.stages[2].contradicted = True
    assert host_windows(outcome) == Windows(None, 10.0, 20.0)


def test_a_mark_the_init_gives_once_is_contradicted_when_it_comes_twice() -> None:
    outcome = _outcome(("workload-start", 3.0, 2.5), ("workload-start", 4.0, 3.5), ("workload-end", 11.0, 10.5))
    assert check_marks(outcome) == ["stage mark workload-start: a second time (the init gives it once; not a timing)"]
    assert workload_seconds(outcome) is None and host_windows(outcome).workload_s is None


# --- the smaller ones ------------------------------------------------------------------------------------


def test_a_problem_names_a_file_by_its_place_in_the_record_not_the_partial_directory(tmp_path: Path) -> None:
    partial = tmp_path / ".run.partial"
    (partial / "vmstat.start").mkdir(parents=True)
    problems: list[str] = []
    _guarded(problems, "vmstat", (partial / "vmstat.start").read_text, None)
    assert str(partial) in problems[0]
    assert in_record(problems, partial) == [
        "reading the vmstat failed: IsADirectoryError: [Errno 21] Is a directory: 'vmstat.start'"
    ]


def test_control_characters_from_the_guest_are_shown_in_the_report_html() -> None:
    assert e("6.1\x1b]0;pwned\x07 <b>\r\n") == "6.1\\x1b]0;pwned\\x07 &lt;b&gt;\\x0d\n"


def test_under_the_virtual_clock_the_windows_are_the_guests_own() -> None:
    """--clock virtual: guest seconds count instructions (an idle guest's pass faster than the host's)."""
    outcome = _outcome(("topology", 2.0, 1.5), ("workload-start", 3.0, 2.5), ("workload-end", 4.0, 22.5),
                       ("done", 4.5, 23.0))  # fmt: skip
    windows = host_windows(outcome, host_clock=False)
    assert windows == Windows(20.0, 21.5, None)
    assert result_problems({"elapsed_s": 20.01}, windows, set(SECONDS_METRICS), set()) == []
    assert result_problems({"elapsed_s": 20.01}, host_windows(outcome), set(SECONDS_METRICS), set())  # (host's: 1 s)
    assert result_problems({"elapsed_s": 1e6}, Windows(None, None, None), set(SECONDS_METRICS), set()) == []
