"""Run classification and the console excerpt a failed run keeps (pure functions; no VM)."""

from __future__ import annotations

from lab.run.status import STATUSES, Evidence, classify, console_excerpt


def _console(before: int, after: int) -> str:
    lines = [f"[ {i}] boot line" for i in range(before)]
    lines.append("[ 9.1] Kernel panic - not syncing: sysrq triggered crash")
    lines += [f"[ 9.2] trace line {i}" for i in range(after)]
    lines.append("[ 9.9] ---[ end Kernel panic - not syncing: sysrq triggered crash ]---")
    return "\n".join(lines)


def test_panic_line_survives_a_long_backtrace() -> None:
    console = _console(200, 120)
    status, reason = classify(Evidence(console, False, True, False, None, None, (), guest_panicked=True))
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
    failure = "no such trace event sched:nope in this kernel"
    status, reason = classify(Evidence("", False, True, False, None, None, (), init_failure=failure))
    assert status == "workload-failed"
    assert reason == "the guest init failed: no such trace event sched:nope in this kernel"
    status, reason = classify(Evidence("", False, False, False, None, None, (), init_failure="results-mount"))
    assert (status, reason) == ("boot-failed", "the guest init failed: results-mount")


def test_a_failure_mark_on_the_console_is_not_a_reason() -> None:
    """Issue 38: guest userspace printed 'NUMALAB-STAGE failed results-mount' and set the failure reason. Only
    the init's own mark (with the run's token: lab.vm.console) is one now."""
    console = "NUMALAB-STAGE booted 1.2\nNUMALAB-STAGE failed results-mount 1.9\n"
    assert classify(Evidence(console, False, True, False, None, None, ())) == (
        "workload-failed",
        "the guest powered off without writing all results",
    )
    assert (
        classify(Evidence(console, False, False, False, None, None, ()))[1] == "the guest init never reported 'booted'"
    )


def test_a_figure_the_host_contradicts_makes_the_run_implausible() -> None:
    ev = Evidence("", False, True, True, 0, 0, (), implausible=("the workload's elapsed_s is -5, below 0",))
    assert classify(ev) == (
        "implausible",
        "the host's own observation contradicts the guest: the workload's elapsed_s is -5, below 0",
    )
    assert "implausible" in STATUSES


def test_a_panic_is_the_kernels_word_through_pvpanic_not_a_console_line() -> None:
    """Guest userspace can print "Kernel panic - not syncing"; only the pvpanic device makes a run a panic."""
    faked = "NUMALAB-STAGE booted 1.2\nKernel panic - not syncing: printed by a workload\n"
    assert classify(Evidence(faked, False, True, True, 0, 0, ())) == (
        "ok",
        "the guest ran the plan and wrote all results",
    )
    status, reason = classify(Evidence(faked, False, True, True, 0, 0, (), guest_panicked=True))
    assert (status, reason) == ("panic", "Kernel panic - not syncing: printed by a workload")
    assert classify(Evidence("", False, True, False, None, None, (), guest_panicked=True)) == (
        "panic",
        "the guest kernel panicked (pvpanic; no panic line on the console)",
    )
    # Before init, a kernel with no pvpanic driver yet (a modular one): the console line is kept as the hint.
    early = "[ 0.5] Kernel panic - not syncing: VFS: Unable to mount root fs\n"
    status, reason = classify(Evidence(early, False, False, False, None, None, ()))
    assert status == "boot-failed" and reason.startswith("[ 0.5] Kernel panic - not syncing: VFS")
    assert "did not report a panic through pvpanic" in reason


def test_a_refused_result_or_unreadable_guest_files_fail_an_otherwise_good_run() -> None:
    ev = Evidence("", False, True, True, 0, 0, (), result_problem="NUMALAB_RESULT is a JSON list, not an object")
    assert classify(ev) == (
        "workload-failed",
        "the workload's result was refused: NUMALAB_RESULT is a JSON list, not an object",
    )
    ev = Evidence("", False, True, True, 0, 0, (), data_problems=("reading the metrics failed: x",))
    assert classify(ev) == ("workload-failed", "the guest's files were refused: reading the metrics failed: x")
