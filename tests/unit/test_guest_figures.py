"""Issue 38: a figure from the guest is checked before it is believed. No VM: the host's own limit on
collecting the guest's results, the plausibility checks of the guest's figures against what the host saw,
stage marks bound by the host's clock and the init's token, text that is not UTF-8, and the smaller ones
(tests/vm/test_vm_guest_fuzz.py proves the end-to-end path on a real VM)."""

from __future__ import annotations

import time

from lab.run.collect_limit import CollectLimit
from lab.run.execute import _guarded


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
