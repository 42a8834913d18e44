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


def test_a_limit_and_qemu_failures_are_named() -> None:
    status, reason = classify(Evidence("", False, True, False, None, None, (), limit="console output over 64 MiB"))
    assert (status, reason) == ("limit-exceeded", "stopped: console output over 64 MiB")
    # A limit explains why the VM was stopped, whatever else the console shows.
    assert classify(Evidence("", True, True, False, None, None, (), limit="x"))[0] == "limit-exceeded"
    died = Evidence("", False, False, False, None, None, (), vm_failure="QEMU exited with 1: qemu: bad option")
    assert classify(died) == ("boot-failed", "QEMU exited with 1: qemu: bad option")
    killed = Evidence("", False, True, False, None, None, (), vm_failure="QEMU was killed by SIGKILL")
    assert classify(killed) == ("workload-failed", "QEMU was killed by SIGKILL")


def test_the_guest_inits_own_failure_is_the_reason() -> None:
    console = "NUMALAB-STAGE booted 1.2\nNUMALAB-STAGE failed no such trace event sched:nope in this kernel 1.9\n"
    status, reason = classify(Evidence(console, False, True, False, None, None, ()))
    assert status == "workload-failed"
    assert reason == "the guest init failed: no such trace event sched:nope in this kernel"
