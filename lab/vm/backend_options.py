"""The VM's backend as a run asks for it (:class:`BackendOptions`, a piece of lab.run.options.RunOptions): direct
QEMU or a libvirt daemon, the QEMU binary, the libvirt host's URI, pool and uploads, the firmware and the
accelerator, checked here beside the seam every backend implements (lab.vm.backend).

The field names are the run options' (``--backend``, ``--qemu``, ``--connect``, ``--pool-dir``, ``--no-upload``,
``--firmware``, ``--accel``; the same keys in a saved options file). Making the backend itself needs both backends
(lab.vm.qemu, lab.vm.libvirt), a layer above this module: the planner does it (lab.run.batch.backend_of), as it
probes the accelerator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lab.errors import LabError, check_choice
from lab.vm.backend import FIRMWARES

ACCELS = ("auto", "kvm", "tcg")
BACKENDS = ("qemu", "libvirt")


@dataclass(frozen=True)
class BackendOptions:
    backend: str = "qemu"
    qemu: str = ""  # the QEMU binary (path or command); "" is $NUMALAB_QEMU, else the PATH's qemu-system-x86_64
    connect: str | None = None  # libvirt URI
    pool_dir: str | None = None
    no_upload: bool = False
    firmware: str = "auto"
    accel: str = "auto"

    # (not a field: the choices of its word options, which the command line offers)
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"firmware": FIRMWARES, "accel": ACCELS, "backend": BACKENDS}

    def check(self) -> None:
        """One-line errors naming the flag: the words, and each libvirt option only with --backend libvirt, qboot
        only with direct QEMU (before any connection to a libvirt host)."""
        for name, choices in self.CHOICES.items():
            check_choice("--" + name, getattr(self, name), choices)
        if self.backend != "qemu" and self.firmware == "qboot":
            raise LabError("--firmware qboot: only with --backend qemu (libvirt hosts boot their default firmware)")
        if self.backend != "libvirt":
            for opt in ("connect", "pool_dir", "no_upload"):
                if getattr(self, opt):
                    raise LabError(f"--{opt.replace('_', '-')}: only with --backend libvirt")

    @property
    def asked_accel(self) -> str | None:
        """--accel as asked: kvm or tcg, None for auto (the probe chooses)."""
        return None if self.accel == "auto" else self.accel
