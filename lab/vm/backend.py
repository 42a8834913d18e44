"""The seam between a run and whatever starts its VM (direct QEMU, libvirt)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from lab.placement.plan import Placement
from lab.topology.model import Topology
from lab.vm.console import Stage, VmOutcome
from lab.vm.qemu_argv import BootSpec


class Backend(Protocol):
    name: str

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
        """Boot the VM, follow its console (lab.vm.console.watch) until it powers off or the
        timeout passes, and make sure it is gone on every path (timeout, error, signal).
        Returns the outcome and the manifest's "backend" section (it must hold "name")."""
        ...
