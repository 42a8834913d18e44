"""Watching a VM's serial console file: the guest init's stage marks, for every backend."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lab.untrusted import to_float

STAGE_MARK = "NUMALAB-STAGE "


@dataclass
class Stage:
    name: str
    detail: str
    host_s: float  # seconds since the guest was started
    guest_uptime: float | None


@dataclass
class VmOutcome:
    exit_code: int | None
    timed_out: bool
    wall_s: float
    stages: list[Stage] = field(default_factory=list)
    pinned: dict[int, str] = field(default_factory=dict)  # vCPU -> the host CPUs it was pinned to (cpulist)
    pin_error: str | None = None
    limit: str | None = None  # why the run was stopped for sending too much (lab.vm.share.ShareGuard)
    vm_failure: str | None = None  # QEMU itself failed (did not start, exited with an error, was killed)
    hang_state: dict | None = None  # at a timeout: QEMU's run state and each vCPU's RIP (lab.vm.hang)
    boot_stalled: bool = False  # stopped at the boot deadline: the guest init never reported "booted"
    vcpu_time: dict | None = None  # the vCPU threads' CPU time over the workload window (lab.vm.vcpu_time)
    # The guest kernel said it panicked through the pvpanic device (QMP GUEST_PANICKED, libvirt's "crashed"):
    # a signal its userspace cannot fake, unlike a panic line on the console.
    guest_panicked: bool = False

    def stage(self, name: str) -> Stage | None:
        return next((s for s in self.stages if s.name == name), None)


def parse_stage(line: str, t: float) -> Stage | None:
    i = line.find(STAGE_MARK)
    if i < 0:
        return None
    words = line[i + len(STAGE_MARK) :].split()
    if not words:
        return None
    uptime = to_float(words[-1])  # (finite, of bounded length: the guest's word)
    if uptime is not None:
        words = words[:-1]
    if not words:
        return None
    return Stage(words[0][:64], " ".join(words[1:])[:512], t, uptime)


def watch(
    console_log: Path,
    outcome: VmOutcome,
    timeout_s: float,
    exited: Callable[[], int | None],
    on_stage: Callable[[Stage], None] | None = None,
    on_tick: Callable[[float], None] | None = None,
    poll_s: float = 0.1,
    wait: Callable[[float], None] = time.sleep,
    guard: Callable[[], str | None] | None = None,
    boot_deadline_s: float | None = None,
) -> None:
    """Follow the console until ``exited()`` returns an exit code or the timeout passes.

    Between looks it calls ``wait(poll_s)``: a backend that can wake up as soon as its VM exits
    passes a wait that does (QemuBackend waits on QEMU's pidfd), so the run does not idle up to
    ``poll_s`` after the guest powers off.

    ``guard`` (if given) is asked at every look: a reason it returns ends the watch, with the
    reason in ``outcome.limit``; the backend then stops the VM.

    ``boot_deadline_s`` (if given): a guest whose init has not reported "booted" by then is given up
    on as a timeout with ``outcome.boot_stalled`` set (lab.run.execute boots it once more)."""
    start = time.monotonic()
    pos = 0
    pending = b""
    while True:
        code = exited()
        now = time.monotonic() - start
        if console_log.exists():
            with open(console_log, "rb") as f:
                f.seek(pos)
                chunk = f.read()
            pos += len(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                st = parse_stage(raw.decode(errors="replace"), now)
                if st:
                    outcome.stages.append(st)
                    if on_stage:
                        on_stage(st)
        if code is not None:
            outcome.exit_code = code
            if guard is not None and (reason := guard()):  # it went over just before it exited
                outcome.limit = reason
            return
        if now > timeout_s:
            outcome.timed_out = True
            return
        if boot_deadline_s is not None and now > boot_deadline_s and outcome.stage("booted") is None:
            outcome.timed_out = outcome.boot_stalled = True
            return
        if guard is not None and (reason := guard()):
            outcome.limit = reason
            return
        if on_tick:
            on_tick(now)
        wait(poll_s)
