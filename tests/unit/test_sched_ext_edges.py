"""sched_ext's edges in a run's status and a verdict's line (issue 71): a run that times out under a sched_ext
scheduler names the scheduler and what the kernel said of it (its watchdog may outlast the host's timeout), and a
verdict line says how many runs it left out for their status (a scheduler ejected, a timeout)."""

from __future__ import annotations

import json

from test_analysis import OFF, ON

from lab.analysis import verdict as vd
from lab.run.scheduler import at_timeout
from lab.run.status import Evidence, classify

STALL = (
    '[   31.2] sched_ext: BPF scheduler "qmap" disabled (runnable task stall)\n'
    "[   31.2] sched_ext: qmap: sh[77] failed to run for 5.120s\n"
)


def _timeout(word: str | None) -> tuple[str, str]:
    return classify(Evidence("", True, True, False, None, None, (), hang_kind="guest-idle",
                             scheduler_at_timeout=word))  # fmt: skip


def test_a_timeout_under_a_scheduler_names_it_and_the_kernels_word() -> None:
    word = at_timeout("booting\n" + STALL + "more\n", "scx_qmap-t-2", "qmap")
    assert word == ('under the sched_ext scheduler scx_qmap-t-2, enabled at the workload\'s start (ops qmap); '
                    'kernel: BPF scheduler "qmap" disabled (runnable task stall)')  # fmt: skip
    status, reason = _timeout(word)
    assert status == "timeout"
    assert reason == ("the VM did not power off before the timeout; the guest was idle, every vCPU halted; " + word)


def test_a_timeout_before_the_watchdog_spoke_says_it_may_have_cut_it_off() -> None:
    word = at_timeout("booting\n[ 3.0] numalab: stage scheduler\n", "scx_simple", "simple")
    assert word.startswith("under the sched_ext scheduler scx_simple, enabled at the workload's start (ops simple); "
                           "the kernel said nothing of it on the console")  # fmt: skip
    assert "watchdog" in word and "--timeout" in word
    assert at_timeout("", "scx_simple", None) == "under the sched_ext scheduler scx_simple, not yet started"
    assert at_timeout("", "scx_simple", "none") == (
        "under the sched_ext scheduler scx_simple, not enabled at the workload's start"
    )


def test_the_console_is_the_guests_text_escaped_and_bounded() -> None:
    word = at_timeout('sched_ext: BPF scheduler "q\x1b[2J" disabled (x' + "y" * 900 + ")\n", "scx_qmap", "qmap")
    assert "\x1b" not in word and len(word) <= 400


def test_a_plain_timeout_says_nothing_of_a_scheduler() -> None:
    assert "sched_ext" not in _timeout(None)[1]


def _manifests(paths, status_of=lambda i: "ok") -> list[dict]:
    out = []
    for i, p in enumerate(paths):
        m = json.loads((p / "manifest.json").read_text())
        out.append(m | {"status": status_of(i)})
    return out


def test_a_verdict_line_says_how_many_runs_it_left_out_and_why() -> None:
    base = _manifests(OFF)
    new = _manifests(ON, lambda i: "scheduler-ejected" if i == 0 else "ok")
    new += _manifests(ON[:1], lambda i: "timeout")
    (v,) = vd.verdicts_of(base, new, ["vmstat.numa_pages_migrated"], labels=("off", "on"))
    assert (v.n_base, v.n_new) == (3, 2)
    assert "3+2 runs (1 run marked scheduler-ejected and 1 run marked timeout left out)" in v.line(), v.line()
    assert v.to_dict()["left_out"] == {"scheduler-ejected": 1, "timeout": 1}
    (counted,) = vd.verdicts_of(base, new, ["vmstat.numa_pages_migrated"], labels=("off", "on"),
                                statuses=("ok", "scheduler-ejected"))  # fmt: skip
    line = counted.line()
    assert "(includes 1 run marked scheduler-ejected; 1 run marked timeout left out)" in line, line
    (clean,) = vd.verdicts_of(base, _manifests(ON), ["vmstat.numa_pages_migrated"])
    assert "left out" not in clean.line() and clean.to_dict()["left_out"] == {}
