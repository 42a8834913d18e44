"""The seam between a run and whatever starts its VM (direct QEMU, libvirt): the protocol a backend implements
(:class:`Backend`) and the types it is handed, what to boot (:class:`BootSpec`) and the VM to run
(:class:`VmRequest`). Every backend imports them from here; none imports another backend."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from lab.placement.pinning import Placement
from lab.topology.model.topology import Topology
from lab.vm.console import Stage, VmOutcome
from lab.vm.share import ShareLimits
from lab.vm.tcg.guest_clock import GuestClock

# --firmware's choices (Backend.firmware_rom): the default, qboot where the QEMU ships it, or SeaBIOS.
FIRMWARES = ("auto", "qboot", "seabios")


@dataclass(frozen=True)
class BootSpec:
    """What to boot and where the VM talks to the host (paths on the host)."""

    kernel: str
    initrd: str
    cmdline: str
    results_dir: str  # the guest's drop directory (lab.vm.share): virtio-9p, mount tag "results", mapped-file;
    # "" for a guest that sends nothing back (the KVM probe): no share device (direct QEMU)
    console_log: str
    qmp_socket: str | None = None
    accel: str = "tcg"
    name: str = "numalab"
    start_paused: bool = True  # so vCPUs can be pinned before the guest runs
    firmware: str = ""  # a -bios ROM (Backend.firmware_rom: qboot); "" for QEMU's default, SeaBIOS
    plugin: str = ""  # a TCG plugin, the value of -plugin (lab.vm.tcg.access_plugin); "" for none
    clock: GuestClock = GuestClock()  # TCG: the host's clock, or one that counts instructions (lab.vm.tcg.guest_clock)
    stage_token: str = ""  # the run's stage-mark token, in the initramfs (lab.vm.console); "": marks unchecked
    cpu: str = ""  # TCG's -cpu model ("max" exposes AMD SVM with nested paging: lab.host.nested); "": QEMU's default
    host_share: str = ""  # a host directory shared read-only over virtio-9p, tag "hostroot" (lab.host.nested)
    ssh_port: int = 0  # the only network: user-mode, restrict=on, 127.0.0.1:ssh_port -> the guest's :22
    # (lab.host.nested's libvirt host); 0: no network device at all


@dataclass(frozen=True)
class VmRequest:
    """One VM for a backend to run (Backend.run): what to boot and where, and how it is watched.

    ``boot.results_dir`` is the run's share (lab.vm.share), a directory on this machine that the guest's
    files must end up in; ``limits`` bound what the guest may send (console, share): the backend stops a VM
    that goes over them and says why in ``outcome.limit``. A VM whose guest init has not reported "booted"
    ``boot_deadline_s`` after the start is stopped as a timeout with ``outcome.boot_stalled``
    (console.watch). ``on_stage`` hears each stage mark of the console, ``on_tick`` the seconds since the start at
    every look at the console (a few times a second)."""

    topo: Topology
    placement: Placement
    boot: BootSpec
    run_dir: Path  # the run's directory: the backend's own files (QEMU's argv and log, domain XML)
    timeout_s: float
    on_stage: Callable[[Stage], None] | None = None
    on_tick: Callable[[float], None] | None = None
    limits: ShareLimits = field(default_factory=ShareLimits)
    boot_deadline_s: float | None = None
    cancel: threading.Event | None = None  # set: stop the VM now, as at its timeout (the direct QEMU backend)


class Backend(Protocol):
    """What a run and the accelerator probe (lab.host.accel) ask of whatever starts VMs.

    Nothing above this layer asks which backend it has: what differs between them (which host the
    VMs run on, how KVM is checked there) is asked here."""

    name: str
    # "" when the VMs run on this machine; else which host they run on (a libvirt URI), whose own
    # facts (its TSC frequency: lab.vm.tcg.tcg_clock) must not be mixed with this machine's.
    host_id: str
    # The QEMU binary on this machine that runs the VMs (lab.vm.qemu.emulator.Emulator), whose build's features
    # some options need (--quantum's parallel guest time, --clock virtual's pause, the access matrix's and the
    # remote-latency model's charged time); None when a daemon runs its own QEMU (libvirt), which is asked for
    # its version only (emulator_version). (Not typed here: the seam sits below the backends that own it.)
    emulator: Any

    def probe_host(self) -> dict:
        """The host the VMs run on, as far as an accelerator verdict depends on it: "key" (a file-name-safe
        string the verdict is cached under), "host", "host_kernel", "where" ("" for this machine, else
        " on <the host>" for messages), and whatever else tells this host from another."""
        ...

    def kvm_missing(self) -> str:
        """Why a KVM boot cannot even be tried there ("" when it can: only a real boot says if it works)."""
        ...

    def emulator_version(self) -> str:
        """The QEMU that runs the VMs, as its ``--version`` line (the access-matrix plugin follows it)."""
        ...

    def firmware_rom(self, choice: str) -> str:
        """--firmware auto|qboot|seabios -> the ROM to boot ("" for the default), from the QEMU's own data
        directories; a one-line LabError for a choice this backend cannot boot."""
        ...

    def check_machine(self, topo: Topology) -> None:
        """A one-line LabError when this backend cannot boot ``topo`` as specified (before any image is built)."""
        ...

    def run(self, req: VmRequest) -> tuple[VmOutcome, dict]:
        """Boot the VM, follow its console (lab.vm.console.watch) until it powers off or the
        timeout passes, and make sure it is gone on every path (timeout, error, signal); ``req`` says
        what and how (VmRequest). Returns the outcome and the manifest's "backend" section (it must
        hold "name")."""
        ...
