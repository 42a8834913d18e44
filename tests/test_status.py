"""Run classification and the console excerpt a failed run keeps (pure functions; no VM)."""

from __future__ import annotations

from lab.vm.status import Evidence, classify, console_excerpt


def _console(before: int, after: int) -> str:
    lines = [f"[ {i}] boot line" for i in range(before)]
    lines.append("[ 9.1] Kernel panic - not syncing: sysrq triggered crash")
    lines += [f"[ 9.2] trace line {i}" for i in range(after)]
    lines.append("[ 9.9] ---[ end Kernel panic - not syncing: sysrq triggered crash ]---")
    return "\n".join(lines)


def test_panic_line_survives_a_long_backtrace() -> None:
    console = _console(200, 120)
    status, reason = classify(Evidence(console, False, True, False, None, None, ()))
    assert status == "panic" and reason.startswith("[ 9.1] Kernel panic - not syncing")
    kept = console_excerpt(console, status)
    assert any("Kernel panic - not syncing: sysrq" in ln for ln in kept)
    assert "[...]" in kept and kept[-1].startswith("[ 9.9] ---[ end Kernel panic")
    assert len(kept) <= 60


def test_short_panic_and_other_failures_keep_a_plain_tail() -> None:
    console = _console(200, 5)
    assert console_excerpt(console, "panic") == console.splitlines()[-40:]
    assert console_excerpt(console, "timeout") == console.splitlines()[-40:]


def test_results_that_did_not_unpack_fail_the_run_with_their_reason() -> None:
    ok = Evidence("", False, True, True, 0, 0, ())
    assert classify(ok)[0] == "ok"
    status, reason = classify(Evidence("", False, True, True, 0, 0, (), ("results.tar: unexpected end of data",)))
    assert status == "workload-failed" and reason.endswith("results.tar: unexpected end of data")
