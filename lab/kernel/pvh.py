"""Boot kernels through their PVH entry point, skipping decompression.

Under TCG, decompressing a distro bzImage (xz) takes about 3 s before the
kernel prints a line. A kernel built with CONFIG_PVH has an ELF note with a
32-bit entry point that QEMU's ``-kernel`` uses when given the uncompressed
ELF ``vmlinux``. So the payload of the bzImage is decompressed once on the
host, checked for that note, and cached by the bzImage's hash; a kernel
without it boots as the bzImage it is.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import lzma
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from lab.paths import cache_dir

XEN_ELFNOTE_PHYS32_ENTRY = 18
PT_NOTE = 4


def _elf_notes(data: bytes):
    """(name, type) of every note in the PT_NOTE segments of an ELF64 file."""
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return
    phoff = int.from_bytes(data[0x20:0x28], "little")
    phentsize = int.from_bytes(data[0x36:0x38], "little")
    phnum = int.from_bytes(data[0x38:0x3A], "little")
    for i in range(phnum):
        ph = data[phoff + i * phentsize : phoff + (i + 1) * phentsize]
        if int.from_bytes(ph[0:4], "little") != PT_NOTE:
            continue
        off, size = int.from_bytes(ph[8:16], "little"), int.from_bytes(ph[32:40], "little")
        pos, end = off, off + size
        while pos + 12 <= end:
            namesz, descsz, ntype = (int.from_bytes(data[pos + k : pos + k + 4], "little") for k in (0, 4, 8))
            name = data[pos + 12 : pos + 12 + namesz].rstrip(b"\0")
            yield name, ntype
            pos += 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4


def has_pvh_entry(data: bytes) -> bool:
    return any(name == b"Xen" and t == XEN_ELFNOTE_PHYS32_ENTRY for name, t in _elf_notes(data))


def _payload(bz: bytes) -> bytes | None:
    """The compressed kernel inside a bzImage (boot protocol >= 2.08 fields)."""
    if len(bz) < 0x250 or bz[0x202:0x206] != b"HdrS":
        return None
    setup_sects = bz[0x1F1] or 4
    start = (setup_sects + 1) * 512
    off = int.from_bytes(bz[0x248:0x24C], "little")
    length = int.from_bytes(bz[0x24C:0x250], "little")
    return bz[start + off : start + off + length] if off and length else None


def _tool(cmd: list[str], data: bytes) -> bytes | None:
    if not shutil.which(cmd[0]):
        return None
    res = subprocess.run(cmd, input=data, capture_output=True)
    return res.stdout if res.stdout else None


def _decompress(payload: bytes) -> bytes | None:
    try:
        if payload.startswith(b"\xfd7zXZ\x00"):
            return lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(payload)
        if payload.startswith(b"\x1f\x8b"):
            return gzip.decompress(payload)
        if payload.startswith(b"BZh"):
            return bz2.BZ2Decompressor().decompress(payload)
        if payload.startswith(b"\x5d\x00"):
            return lzma.LZMADecompressor(format=lzma.FORMAT_ALONE).decompress(payload)
        if payload.startswith(b"\x28\xb5\x2f\xfd"):
            return _tool(["zstd", "-dcq"], payload)
        if payload.startswith(b"\x02\x21\x4c\x18"):
            return _tool(["lz4", "-dcq"], payload)
    except (OSError, EOFError, lzma.LZMAError):
        return None
    return None


def payload_elf(bz: bytes) -> bytes | None:
    """The vmlinux a bzImage carries, decompressed; None when it cannot be read."""
    payload = _payload(bz)
    return _decompress(payload) if payload else None


def boot_image(image: Path) -> tuple[Path, str]:
    """(path to boot, "pvh" or "bzimage")."""
    data = image.read_bytes()
    if has_pvh_entry(data):
        return image, "pvh"
    key = hashlib.sha256(data).hexdigest()[:20]
    cached = cache_dir("kernels", "pvh") / f"{key}.vmlinux"
    miss = cache_dir("kernels", "pvh") / f"{key}.none"
    if cached.exists():
        return cached, "pvh"
    if miss.exists():
        return image, "bzimage"
    elf = payload_elf(data)
    if elf is None or not has_pvh_entry(elf):
        miss.touch()
        return image, "bzimage"
    with tempfile.NamedTemporaryFile(dir=cached.parent, delete=False) as f:
        f.write(elf)
    os.chmod(f.name, 0o644)
    os.replace(f.name, cached)
    return cached, "pvh"
