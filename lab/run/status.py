"""One classification of a finished run, whichever backend ran its VM: the run's, from what the backend observed
and what the run's collection read (:class:`Evidence`, gathered by lab.run.collect)."""

from __future__ import annotations

from dataclasses import dataclass

STATUSES = (
    "ok",
    "panic",
    "limit-exceeded",
    "timeout",
    "boot-failed",
    "workload-failed",
    "topology-mismatch",
    "kernel-mismatch",  # the guest's build-id is not the kernel's asked for
    "implausible",  # a figure or a stage mark the host's own observation contradicts
    "placement-broken",  # the vCPUs or the memory were not where the plan put them (lab.vm.placement_watch)
    "scheduler-ejected",  # the sched_ext scheduler asked for did not run, with its ops, throughout (lab.run.scheduler)
)
PANIC_MARKS = ("Kernel panic - not syncing", "---[ end Kernel panic")


@dataclass(frozen=True)
class Evidence:
    """What a backend observed; everything the classification needs."""

    console_tail: str
    timed_out: bool
    booted: bool  # the guest init reached its "booted" stage
    guest_done: bool  # the init wrote all results and said so
    workload_rc: int | None
    trace_rc: int | None
    topology_problems: tuple[str, ...]
    unpack_problems: tuple[str, ...] = ()  # the guest's result tars that did not unpack
    limit: str | None = None  # the guest sent more than it may (console, share, tars): it was stopped
    vm_failure: str | None = None  # QEMU itself failed: did not start, or was killed by a signal
    guest_panicked: bool = False  # the guest kernel said so through pvpanic (lab.vm.console.VmOutcome)
    result_problem: str | None = None  # the workload's result was refused (lab.workloads.workload_output.parse_output)
    data_problems: tuple[str, ...] = ()  # the guest's files that could not be read at all (lab.run.collect)
    kernel_problem: str | None = None  # the guest runs another kernel than the one asked for (build-id)
    # The init's own failure mark (with the run's token, lab.vm.console): a failure reason comes only from it.
    init_failure: str | None = None
    # Figures or stage marks the host's own observation contradicts (lab.analysis.plausible, lab.vm.console).
    implausible: tuple[str, ...] = ()
    # Where the vCPUs ran or the memory sat against the plan, read from outside QEMU (lab.placement.check).
    placement_problems: tuple[str, ...] = ()
    # At a timeout, what the vCPU threads were doing (lab.vm.hang.kind): guest-spinning, guest-idle,
    # emulator-stalled, or None when not known.
    hang_kind: str | None = None
    # --scheduler: why the sched_ext scheduler asked for was not enabled, with its ops, from the workload's start
    # to its end (the kernel's word, or the scheduler's own: lab.run.scheduler); None when it was, or for fair.
    scheduler_problem: str | None = None
    # At a timeout under a sched_ext scheduler, the scheduler named with what is known of it (lab.run.scheduler
    # .at_timeout): a scheduler that stalls the guest may outlast the host's timeout before its watchdog speaks.
    scheduler_at_timeout: str | None = None


def panic_line(console: str) -> str | None:
    """The console's first panic line, or None. Only a hint: guest userspace can print one (a run's panic is
    the kernel's word through pvpanic, :attr:`Evidence.guest_panicked`)."""
    for mark in PANIC_MARKS:
        if mark in console:
            return next((ln for ln in console.splitlines() if mark in ln), mark).strip()[:200]
    return None


def classify(ev: Evidence) -> tuple[str, str]:
    """(status, one-line reason). Earlier rules win: a panic explains a timeout, etc."""
    if ev.limit:
        return "limit-exceeded", f"stopped: {ev.limit}"
    hint = panic_line(ev.console_tail)
    if ev.guest_panicked:
        return "panic", hint or "the guest kernel panicked (pvpanic; no panic line on the console)"
    if ev.timed_out:
        why = {"emulator-stalled": "QEMU stopped running its vCPUs", "guest-spinning": "the guest was spinning",
               "guest-idle": "the guest was idle, every vCPU halted"}.get(ev.hang_kind or "")  # fmt: skip
        parts = ["the VM did not power off before the timeout" + ("" if ev.booted else " (it never booted)"), why,
                 ev.scheduler_at_timeout]  # fmt: skip
        return "timeout", "; ".join(p for p in parts if p)
    if ev.vm_failure:
        return ("boot-failed" if not ev.booted else "workload-failed"), ev.vm_failure
    failed = f"the guest init failed: {ev.init_failure}" if ev.init_failure is not None else ""
    if not ev.booted:
        if hint and not failed:
            return "boot-failed", f"{hint} (on the console; the kernel did not report a panic through pvpanic)"
        return "boot-failed", failed or "the guest init never reported 'booted'"
    return _booted(ev, failed)


def _booted(ev: Evidence, failed: str) -> tuple[str, str]:
    """The rules for a guest that booted: the kernel it runs, its topology, then what it wrote."""
    if ev.kernel_problem:
        return "kernel-mismatch", ev.kernel_problem
    if ev.topology_problems:
        return "topology-mismatch", ev.topology_problems[0]
    if not ev.guest_done:
        return "workload-failed", failed or "the guest powered off without writing all results"
    if ev.unpack_problems:
        return "workload-failed", f"the guest's results did not unpack: {ev.unpack_problems[0]}"
    if ev.scheduler_problem:  # (before the workload's exit: a scheduler ejected explains what followed)
        return "scheduler-ejected", f"the sched_ext scheduler did not run throughout: {ev.scheduler_problem}"
    if ev.trace_rc not in (None, 0):
        return "workload-failed", f"trace capture failed (exit {ev.trace_rc}; see trace-record.log)"
    if ev.workload_rc != 0:
        return "workload-failed", f"the workload exited {ev.workload_rc}"
    if ev.result_problem:
        return "workload-failed", f"the workload's result was refused: {ev.result_problem}"
    if ev.data_problems:
        return "workload-failed", f"the guest's files were refused: {ev.data_problems[0]}"
    if ev.implausible:
        return "implausible", f"the host's own observation contradicts the guest: {ev.implausible[0]}"
    if ev.placement_problems:
        return "placement-broken", f"the placement did not hold: {ev.placement_problems[0]}"
    return "ok", "the guest ran the plan and wrote all results"


def console_excerpt(console: str, status: str, lines: int = 40) -> list[str]:
    """The console lines a failed run's manifest keeps: the last ``lines``, or for a panic the panic
    itself (a long backtrace, or other CPUs' dumps, can push its first line out of a plain tail)."""
    all_lines = console.splitlines()
    tail = all_lines[-lines:]
    if status != "panic":
        return tail
    first = next((i for i, ln in enumerate(all_lines) if any(m in ln for m in PANIC_MARKS)), None)
    if first is None or first >= len(all_lines) - lines:
        return tail
    head = all_lines[max(0, first - 5) : first + lines]
    if first + lines >= len(all_lines) - 10:
        return all_lines[max(0, first - 5) :]
    return [*head, "[...]", *all_lines[-10:]]
