"""QEMU's own failures are results with QEMU's words, not QMP timeouts (the real qemu-system-x86_64)."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest
from common import require_setup_package

from lab.placement.pinning import Backing, Placement
from lab.topology.model.ref import TopologyRef
from lab.vm.backend import BootSpec, VmRequest
from lab.vm.qemu.qemu_backend import run_vm

QEMU = shutil.which("qemu-system-x86_64")


def _request(tmp_path: Path, qmp: bool, timeout_s: float, **kw) -> VmRequest:
    """A request for a bare QEMU: nothing pinned, no memory placed (nothing to watch), no share."""
    boot = BootSpec("", "", "", "", str(tmp_path / "console.log"), str(tmp_path / "qmp.sock") if qmp else None)
    placement = Placement((), (), Backing("ram"), 1)
    return VmRequest(TopologyRef("ring-2", 1, "256M").load(), placement, boot, tmp_path, timeout_s, **kw)


@pytest.fixture(autouse=True)
def _needs_qemu() -> None:
    require_setup_package(QEMU is not None, "qemu-system-x86_64", "qemu-system-x86")


def test_qemu_that_does_not_start_is_reported_at_once_with_what_it_said(tmp_path) -> None:
    argv = [QEMU, "-machine", "q35", "-display", "none", "-nodefaults", "-smp", "4096",
            "-qmp", f"unix:{tmp_path}/qmp.sock,server=on,wait=off", "-S"]  # fmt: skip
    t0 = time.monotonic()
    out = run_vm(_request(tmp_path, True, 60), argv)
    assert time.monotonic() - t0 < 10  # not the 15 s QMP timeout
    assert out.exit_code == 1
    assert out.vm_failure.startswith("QEMU exited with 1: "), out.vm_failure
    assert "Invalid SMP CPUs 4096" in out.vm_failure, out.vm_failure


def test_qemu_killed_by_a_signal_says_which(tmp_path) -> None:
    argv = [QEMU, "-machine", "q35", "-display", "none", "-nodefaults", "-accel", "tcg"]

    def kill_it() -> None:
        time.sleep(1.0)
        for pid in os.listdir("/proc"):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmd[: len(argv)] == [a.encode() for a in argv] and int(pid) != os.getpid():
                os.kill(int(pid), signal.SIGKILL)

    threading.Thread(target=kill_it, daemon=True).start()
    out = run_vm(_request(tmp_path, False, 30), argv)
    assert out.exit_code == -signal.SIGKILL
    assert out.vm_failure == "QEMU was killed by SIGKILL"
    assert not out.timed_out


def test_a_cancel_stops_qemu_as_its_timeout_would(tmp_path) -> None:
    """lab.host.nested.libvirt_host's stop for an outer guest that does not end: the caller's Event, long
    before the timeout, and the VM's state is read as at a timeout (here QEMU still answers: no guest)."""
    argv = [QEMU, "-machine", "q35", "-display", "none", "-nodefaults", "-accel", "tcg",
            "-qmp", f"unix:{tmp_path}/qmp.sock,server=on,wait=off", "-S"]  # fmt: skip
    cancel = threading.Event()
    threading.Timer(1.0, cancel.set).start()
    t0 = time.monotonic()
    out = run_vm(_request(tmp_path, True, 300, cancel=cancel), argv)
    assert time.monotonic() - t0 < 30  # not the 300 s timeout
    assert out.timed_out and out.hang_state is not None and out.hang_state["status"] == "running", out.hang_state
