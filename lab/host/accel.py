"""Which accelerator really works on the host a backend runs VMs on: a real boot under KVM, with a short timeout.

/dev/kvm existing proves nothing (on some hosts guests hang right after the
BIOS), so the probe boots the stock kernel with a tiny initramfs whose init
prints a marker and powers off, through the backend itself: direct QEMU on
this machine, or a transient domain on a libvirt host (local or remote: the
daemon runs QEMU as its own user, with its own access to KVM). The verdict is
cached per host as the backend describes it (``Backend.probe_host``: this
machine and its kernel; a libvirt URI, its host's name and versions).
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import time
from pathlib import Path

from lab.errors import LabError
from lab.guest.image import minimal_initrd
from lab.paths import cache_dir, json_text, write_text_atomic
from lab.placement.host_inventory import read_inventory
from lab.placement.pinning import plan_placement
from lab.record_files import CONSOLE_LOG
from lab.topology.model.topology import Node, Topology
from lab.vm.backend import Backend, BootSpec, VmRequest
from lab.vm.qemu.qemu_backend import QemuBackend

PROBE_MARK = "NUMALAB-PROBE-OK"
# A guest that has printed nothing at all by PROBE_SILENCE_S has hung (some hosts' /dev/kvm hang right after
# the BIOS); one whose kernel is printing may take up to PROBE_TIMEOUT_S. Nested KVM (KVM inside a TCG guest,
# lab.host.nested) boots at TCG's speed or slower: its first console line came after more than 25 s here.
PROBE_SILENCE_S = 60.0
PROBE_TIMEOUT_S = 150.0
TCG_PROBE_TIMEOUT_S = 60.0
# loglevel=6: the kernel's banner and notices, so a booting guest is seen to boot. edd=off: the real-mode
# setup stub prints "Probing EDD ... ok" before the kernel proper runs; on this host (2026-11-26) a KVM guest
# printed just that line and hung, which the silence check took for a kernel that was printing.
PROBE_CMDLINE = "console=ttyS0 loglevel=6 panic=-1 edd=off"
# Lines the setup stub and the decompressor print before the kernel itself: not a sign the kernel runs.
_STUB_LINES = ("Probing EDD", "Decompressing Linux", "Parsing ELF", "Booting the kernel", "early console")
# One node, one vCPU: the smallest machine the run's own command line writer (or domain XML) makes.
PROBE_TOPOLOGY = Topology("kvm-probe", (Node(0, 1, 256),), ((10,),))
_PROBE_INIT = f"""#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox echo {PROBE_MARK}
/bin/busybox poweroff -f
"""


ACCEL_DIR = "accel"  # the verdicts, in numalab's cache: this host's own (lab.host.nested hides them)


def _cache_file(key: str) -> Path:
    return cache_dir(ACCEL_DIR) / f"{key}.json"


def probe_boot(accel: str, kernel: Path, workdir: Path, firmware: str = "") -> BootSpec:
    """The probe guest's boot: no share, no QMP, not paused (nothing to pin), the marker on the console;
    ``firmware``: the backend's qboot ROM where it has one (SeaBIOS takes many seconds under nested KVM)."""
    return BootSpec(
        kernel=str(kernel),
        initrd=str(minimal_initrd(workdir / "initrd", _PROBE_INIT)),
        cmdline=PROBE_CMDLINE,
        results_dir="",
        console_log=str(workdir / CONSOLE_LOG),
        qmp_socket=None,
        accel=accel,
        name=f"numalab-probe-{accel}-{os.getpid()}-{secrets.token_hex(3)}",  # never a leftover's name
        start_paused=False,
        firmware=firmware,
    )


class _Silent(Exception):
    """The probe guest printed nothing within PROBE_SILENCE_S: given up on (the VM is stopped)."""


def kernel_printed(text: str) -> bool:
    """Whether the console shows the kernel's own output, not just the setup stub's or the decompressor's."""
    return any(line.strip() and not line.lstrip().startswith(_STUB_LINES) for line in text.splitlines())


def _silence_check(console: Path, silence_s: float):
    """An on_tick that gives up on a guest whose kernel has printed nothing after ``silence_s``."""

    seen = False

    def tick(now: float) -> None:
        nonlocal seen
        if seen or now <= silence_s:
            return
        seen = console.exists() and kernel_printed(console.read_text(errors="replace"))
        if not seen:
            raise _Silent

    return tick


def probe(accel: str, kernel: Path, timeout_s: float = PROBE_TIMEOUT_S, backend: Backend | None = None,
          silence_s: float = PROBE_SILENCE_S) -> dict:  # fmt: skip
    """Boot a 1-vCPU guest with ``accel`` through ``backend`` (direct QEMU by default);
    {"ok", "seconds", "detail"}. A guest silent for ``silence_s`` has hung; one that is printing has
    ``timeout_s`` to show the marker."""
    backend = backend or QemuBackend()
    if accel == "kvm":
        missing = backend.kvm_missing()
        if missing:
            return {"ok": False, "seconds": 0.0, "detail": missing}
    with tempfile.TemporaryDirectory(prefix="numalab-probe-") as tmp_s:
        tmp = Path(tmp_s)
        try:
            firmware = backend.firmware_rom("auto")
        except LabError:
            firmware = ""
        boot = probe_boot(accel, kernel, tmp, firmware)
        placement = plan_placement(PROBE_TOPOLOGY, read_inventory(), pinning="node")
        t0 = time.monotonic()
        try:
            tick = _silence_check(Path(boot.console_log), silence_s)
            outcome, _info = backend.run(VmRequest(PROBE_TOPOLOGY, placement, boot, tmp, timeout_s, on_tick=tick))
        except LabError as err:  # e.g. a libvirt host that refuses the domain
            return {"ok": False, "seconds": round(time.monotonic() - t0, 2), "detail": str(err)}
        except _Silent:
            return {"ok": False, "seconds": round(time.monotonic() - t0, 2),
                    "detail": f"the guest hung: no kernel output within {silence_s:.0f}s"}  # fmt: skip
        seconds = round(time.monotonic() - t0, 2)
        console = Path(boot.console_log)
        text = console.read_text(errors="replace") if console.exists() else ""
    if PROBE_MARK in text:
        return {"ok": True, "seconds": seconds, "detail": f"a guest booted and powered off in {seconds:.1f}s"}
    if outcome.timed_out:
        detail = f"the guest hung: its kernel printed, but init gave no sign within {timeout_s:.0f}s"
    else:
        detail = outcome.vm_failure or f"the guest stopped (exit {outcome.exit_code}) without the probe's marker"
    return {"ok": False, "seconds": seconds, "detail": detail}


def accel_verdict(kernel: Path, backend: Backend | None = None, refresh: bool = False) -> dict:
    """{"accel": "kvm"|"tcg", "kvm": probe, "tcg": probe|None, "warning", "cached": bool, ...} for the host
    ``backend`` runs VMs on (direct QEMU, this machine, by default), cached per that host."""
    backend = backend or QemuBackend()
    host = backend.probe_host()
    path = _cache_file(host["key"])
    if path.exists() and not refresh:
        try:
            verdict = json.loads(path.read_text())
            verdict["cached"] = True
            return verdict
        except (json.JSONDecodeError, OSError):
            pass
    kvm = probe("kvm", kernel, backend=backend)
    verdict = {
        "accel": "kvm" if kvm["ok"] else "tcg",
        "kvm": kvm,
        **{k: v for k, v in host.items() if k != "key"},
        "probed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if not kvm["ok"]:
        verdict["tcg"] = probe("tcg", kernel, timeout_s=TCG_PROBE_TIMEOUT_S, backend=backend,
                               silence_s=TCG_PROBE_TIMEOUT_S)  # fmt: skip
        verdict["warning"] = (
            f"KVM is unusable{host['where']} ({kvm['detail']}); using TCG software emulation "
            "(-accel tcg,thread=multi), which is much slower"
        )
    write_text_atomic(path, json_text(verdict, indent=2) + "\n")
    verdict["cached"] = False
    return verdict
