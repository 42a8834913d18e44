"""What a workload's programs need on the host to run in the guest: an ELF file's loader (:func:`elf_interpreter`,
a dynamically linked program's PT_INTERP) and a binary's shared-library closure (:func:`ldd_closure`, resolved
by ``ldd`` as dracut does). A user's workload file is checked with them before any boot
(lab.workloads.user_workload), and the files a guest image carries are worked out with them
(lab.workloads.image_layers) before lab.guest.image lays them out."""

from __future__ import annotations

import re
import struct
import subprocess

from lab.errors import LabError
from lab.paths import TOOL_TEXT


def ldd_closure(binary: str) -> list[str]:
    """Shared libraries (and the ELF interpreter) a binary loads, by path."""
    try:
        out = subprocess.run(["ldd", binary], capture_output=True, **TOOL_TEXT, check=False).stdout
    except FileNotFoundError:
        raise LabError("ldd: not found (install libc-bin)") from None
    libs = []
    for line in out.splitlines():
        if "not found" in line:
            raise LabError(f"{binary}: shared library missing on the host: {line.strip()}")
        m = re.search(r"=>\s*(/\S+)", line) or re.match(r"\s*(/\S+)\s+\(", line)
        if m:
            libs.append(m.group(1))
    return libs


def elf_interpreter(data: bytes) -> str | None:
    """The PT_INTERP of an ELF file (a dynamically linked program's loader); None for a static one or not
    an ELF file."""
    if data[:4] != b"\x7fELF" or len(data) < 64:
        return None
    wide, endian = data[4] == 2, "<" if data[5] == 1 else ">"
    try:
        if wide:
            (phoff,) = struct.unpack_from(endian + "Q", data, 0x20)
            phentsize, phnum = struct.unpack_from(endian + "HH", data, 0x36)
        else:
            (phoff,) = struct.unpack_from(endian + "I", data, 0x1C)
            phentsize, phnum = struct.unpack_from(endian + "HH", data, 0x2A)
        for i in range(min(phnum, 4096)):
            at = phoff + i * phentsize
            (ptype,) = struct.unpack_from(endian + "I", data, at)
            if ptype == 3:  # PT_INTERP
                off, size = struct.unpack_from(
                    endian + ("QxxxxxxxxxxxxxxxxQ" if wide else "IxxxxxxxxI"), data, at + (8 if wide else 4)
                )
                return data[off : off + size].rstrip(b"\0").decode(errors="replace")
    except struct.error:
        return None
    return None
