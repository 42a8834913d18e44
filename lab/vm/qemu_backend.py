"""Run one VM with QEMU directly: start paused, pin vCPUs over QMP, watch, enforce a timeout.

QEMU is started with PR_SET_PDEATHSIG so it dies with us even on SIGKILL, and
killed in a ``finally`` on every other path: no orphans.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lab.errors import LabError
from lab.vm.qmp import Qmp

STAGE_MARK = "NUMALAB-STAGE "
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class Stage:
    name: str
    detail: str
    host_s: float  # seconds since the guest was started (cont)
    guest_uptime: float | None


@dataclass
class VmOutcome:
    exit_code: int | None
    timed_out: bool
    wall_s: float
    stages: list[Stage] = field(default_factory=list)
    pinned: dict[int, int] = field(default_factory=dict)
    pin_error: str | None = None

    def stage(self, name: str) -> Stage | None:
        return next((s for s in self.stages if s.name == name), None)


def _parse_stage(line: str, t: float) -> Stage | None:
    i = line.find(STAGE_MARK)
    if i < 0:
        return None
    words = line[i + len(STAGE_MARK) :].split()
    if not words:
        return None
    uptime = None
    try:
        uptime = float(words[-1])
        words = words[:-1]
    except ValueError:
        pass
    return Stage(words[0], " ".join(words[1:]), t, uptime)


def run_vm(
    argv: list[str],
    console_log: Path,
    qmp_socket: Path | None,
    pins: dict[int, int],
    timeout_s: float,
    qemu_log: Path,
    on_stage: Callable[[Stage], None] | None = None,
    on_tick: Callable[[float], None] | None = None,
) -> VmOutcome:
    """Boot, pin, and wait for QEMU to exit or the timeout to pass."""
    with open(qemu_log, "wb") as log:
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
            )
        except FileNotFoundError:
            raise LabError(f"{argv[0]}: not found; install qemu-system-x86 (make setup)") from None
    start = time.monotonic()
    outcome = VmOutcome(None, False, 0.0)
    try:
        if qmp_socket is not None:
            qmp = Qmp(qmp_socket, timeout=15)
            try:
                for vcpu, tid in qmp.vcpu_threads().items():
                    cpu = pins.get(vcpu)
                    if cpu is None:
                        continue
                    try:
                        os.sched_setaffinity(tid, {cpu})
                        outcome.pinned[vcpu] = cpu
                    except OSError as err:
                        outcome.pin_error = f"vCPU {vcpu} -> CPU {cpu}: {err.strerror}"
                qmp.command("cont")
            finally:
                qmp.close()
        start = time.monotonic()
        pos = 0
        pending = b""
        while True:
            code = proc.poll()
            now = time.monotonic() - start
            if console_log.exists():
                with open(console_log, "rb") as f:
                    f.seek(pos)
                    chunk = f.read()
                    pos += len(chunk)
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    st = _parse_stage(raw.decode(errors="replace"), now)
                    if st:
                        outcome.stages.append(st)
                        if on_stage:
                            on_stage(st)
            if code is not None:
                outcome.exit_code = code
                break
            if now > timeout_s:
                outcome.timed_out = True
                break
            if on_tick:
                on_tick(now)
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        outcome.wall_s = time.monotonic() - start
    return outcome
