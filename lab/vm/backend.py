"""The seam between a run and whatever starts its VM (direct QEMU, libvirt)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from lab.placement.plan import Placement
from lab.topology.model import Topology
from lab.vm.console import Stage, VmOutcome
from lab.vm.qemu_argv import BootSpec
from lab.vm.share import ShareLimits


class Backend(Protocol):
    name: str
    local: bool  # the VM runs on this machine (so this machine's KVM probe applies)

    def run(
        self,
        topo: Topology,
        placement: Placement,
        boot: BootSpec,
        run_dir: Path,
        timeout_s: float,
        on_stage: Callable[[Stage], None] | None = None,
        on_tick: Callable[[float], None] | None = None,
        limits: ShareLimits | None = None,
    ) -> tuple[VmOutcome, dict]:
        """Boot the VM, follow its console (lab.vm.console.watch) until it powers off or the
        timeout passes, and make sure it is gone on every path (timeout, error, signal).
        ``boot.results_dir`` is the run's share (lab.vm.share), a directory on this machine that the
        guest's files must end up in; ``limits`` bound what the guest may send (console, share):
        the backend stops a VM that goes over them and says why in ``outcome.limit``.
        Returns the outcome and the manifest's "backend" section (it must hold "name")."""
        ...
