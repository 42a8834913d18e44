"""Run one VM with QEMU directly: start paused, pin vCPUs over QMP, watch, enforce a timeout.

QEMU is started with PR_SET_PDEATHSIG so it dies with us even on SIGKILL, and
killed in a ``finally`` on every other path: no orphans.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import select
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from lab.cpulist import format_cpulist
from lab.errors import LabError
from lab.paths import cache_dir, write_text_atomic
from lab.placement.plan import Placement
from lab.topology.model import Topology
from lab.vm.console import Stage, VmOutcome, watch
from lab.vm.qemu_argv import BootSpec, qemu_argv
from lab.vm.qmp import Qmp

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _exit_waiter(pidfd: int | None) -> Callable[[float], None]:
    """A sleep that ends early when the process behind ``pidfd`` exits (a plain sleep without one)."""
    if pidfd is None:
        return time.sleep
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return lambda seconds: poller.poll(seconds * 1000)


def run_vm(
    argv: list[str],
    console_log: Path,
    qmp_socket: Path | None,
    pins: dict[int, tuple[int, ...]],
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
        pidfd: int | None = os.pidfd_open(proc.pid)
    except OSError:  # a kernel before 5.3
        pidfd = None
    try:
        if qmp_socket is not None:
            qmp = Qmp(qmp_socket, timeout=15)
            try:
                for vcpu, tid in qmp.vcpu_threads().items():
                    cpus = pins.get(vcpu)
                    if not cpus:
                        continue
                    try:
                        os.sched_setaffinity(tid, cpus)
                        outcome.pinned[vcpu] = format_cpulist(os.sched_getaffinity(tid))
                    except OSError as err:
                        outcome.pin_error = f"vCPU {vcpu} -> CPUs {format_cpulist(cpus)}: {err.strerror}"
                qmp.command("cont")
            finally:
                qmp.close()
        start = time.monotonic()
        watch(console_log, outcome, timeout_s, proc.poll, on_stage, on_tick, wait=_exit_waiter(pidfd))
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        outcome.wall_s = time.monotonic() - start
        if pidfd is not None:
            os.close(pidfd)
    return outcome


def qemu_version(qemu: str = "qemu-system-x86_64") -> str:
    path = shutil.which(qemu)
    if path is None:
        return ""
    st = os.stat(path)
    return _qemu_version(path, st.st_size, st.st_mtime_ns)


@functools.cache
def _qemu_version(path: str, size: int, mtime_ns: int) -> str:
    """``qemu --version``'s first line, remembered per binary (path, size and mtime) in the cache
    directory: asking costs a QEMU start, 20-60 ms, on every run. An upgraded binary is asked again."""
    key = f"{path}:{size}:{mtime_ns}"
    store = cache_dir() / "qemu-versions.json"
    try:
        known = json.loads(store.read_text())
    except (OSError, ValueError):
        known = {}
    if isinstance(known, dict) and isinstance(known.get(key), str):
        return known[key]
    out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    version = out.splitlines()[0] if out else ""
    if version:
        known = {k: v for k, v in known.items() if not k.startswith(f"{path}:")} if isinstance(known, dict) else {}
        known[key] = version
        write_text_atomic(store, json.dumps(known, indent=1, sort_keys=True) + "\n")
    return version


class QemuBackend:
    """Direct QEMU on this host: no daemon needed."""

    name = "qemu"

    def run(
        self,
        topo: Topology,
        placement: Placement,
        boot: BootSpec,
        run_dir: Path,
        timeout_s: float,
        on_stage: Callable[[Stage], None] | None = None,
        on_tick: Callable[[float], None] | None = None,
    ) -> tuple[VmOutcome, dict]:
        argv = qemu_argv(topo, placement, boot)
        (run_dir / "qemu-argv.txt").write_text(shlex.join(argv) + "\n")
        outcome = run_vm(
            argv,
            Path(boot.console_log),
            Path(boot.qmp_socket) if boot.qmp_socket else None,
            dict(enumerate(placement.vcpu_pins)),
            timeout_s,
            run_dir / "qemu.log",
            on_stage,
            on_tick,
        )
        return outcome, {"name": self.name, "version": qemu_version(), "argv": argv, "exit_code": outcome.exit_code}
