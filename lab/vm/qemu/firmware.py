"""Guest firmware: qboot when QEMU ships it, else QEMU's default, SeaBIOS.

numalab boots its kernels directly (``-kernel``), so the firmware only has to
hand QEMU's ACPI tables (SRAT, SLIT, MADT) to the kernel and jump to it.
SeaBIOS also scans PCI, looks for boot devices and runs option ROMs; qboot,
which QEMU ships as ``qboot.rom`` for exactly this kind of guest, does not.
Under TCG the difference is visible in every run: an idle ring-4 run took
0.18 s less with qboot (medians of 9, interleaved with SeaBIOS runs, q35).
The guest's DMI line in ``dmesg-boot.txt`` names the firmware it booted
(qboot says "BIOS 0.1").

``--firmware seabios`` keeps QEMU's default. libvirt hosts always boot their
default firmware: a ROM path on a remote host cannot be checked from here
(lab.vm.libvirt.libvirt_backend.LibvirtBackend.firmware_rom).

qboot is looked up where the run's QEMU itself looks for ROMs, in its order
(lab.vm.qemu.emulator.Emulator.firmware_dirs: the -L directories of a private
prefix, then the binary's built-in path), never in a fixed list: a QEMU 10
must not boot the system 7.2's ``qboot.rom``.
"""

from __future__ import annotations

from pathlib import Path

from lab.errors import LabError
from lab.vm.backend import FIRMWARES

QBOOT = "qboot.rom"


def find_qboot(data_dirs: tuple[str, ...]) -> str | None:
    """qboot.rom in the first of ``data_dirs`` (the QEMU's own search path, in order) that has it."""
    for d in data_dirs:
        if (Path(d) / QBOOT).is_file():
            return str(Path(d) / QBOOT)
    return None


def resolve_firmware(choice: str, data_dirs: tuple[str, ...] = ()) -> str:
    """The ``-bios`` ROM for this run, or "" for QEMU's default (SeaBIOS); ``data_dirs``: where the run's
    QEMU looks for ROMs (lab.vm.qemu.emulator.Emulator.firmware_dirs)."""
    if choice not in FIRMWARES:
        raise LabError(f"--firmware {choice}: expected one of {', '.join(FIRMWARES)}")
    if choice == "seabios":
        return ""
    rom = find_qboot(data_dirs)
    if rom is None and choice == "qboot":
        where = ", ".join(data_dirs) or "none"
        raise LabError(f"--firmware qboot: {QBOOT} not found in this QEMU's data directories ({where}); "
                       "install qemu-system-data")  # fmt: skip
    return rom or ""


def firmware_name(rom: str) -> str:
    """resolve_firmware()'s result by name: a ROM is qboot, none is QEMU's default."""
    return "qboot" if rom else "seabios"
