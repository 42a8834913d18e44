"""What a kernel image is: the GNU build-id of the vmlinux it carries, and the image's own hash.

The build-id is the one number that ties a binary to the guest that runs it: the linker writes it
into vmlinux's notes, the bzImage carries that vmlinux compressed, and the running kernel shows it
in ``/sys/kernel/notes``. numalab reads it three times: from ``vmlinux`` in the build directory
(what was asked for), from the bzImage's decompressed payload (what will boot: a stale payload
shows here), and from the guest (what booted). Every run compares the last with the first
(:func:`lab.run.execute`), so a kernel that is not the one asked for is a failed run, never a result.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from lab.kernel.pvh import payload_elf
from lab.paths import cache_dir, write_text_atomic

NT_GNU_BUILD_ID = 3


def notes_build_id(data: bytes) -> str | None:
    """The GNU build-id in a list of ELF notes (``/sys/kernel/notes``, or a PT_NOTE segment), as hex."""
    off = 0
    while off + 12 <= len(data):
        namesz, descsz, ntype = (int.from_bytes(data[off + i : off + i + 4], "little") for i in (0, 4, 8))
        name_start = off + 12
        desc_start = name_start + (namesz + 3) // 4 * 4
        if desc_start + descsz > len(data):
            return None
        if ntype == NT_GNU_BUILD_ID and data[name_start : name_start + namesz].rstrip(b"\0") == b"GNU":
            return data[desc_start : desc_start + min(descsz, 64)].hex() or None
        off = desc_start + (descsz + 3) // 4 * 4
    return None


def elf_build_id(data: bytes) -> str | None:
    """The GNU build-id of an ELF64 file (from its PT_NOTE segments), or None."""
    if data[:4] != b"\x7fELF" or len(data) < 0x40 or data[4] != 2:
        return None
    phoff = int.from_bytes(data[0x20:0x28], "little")
    phentsize = int.from_bytes(data[0x36:0x38], "little")
    phnum = int.from_bytes(data[0x38:0x3A], "little")
    for i in range(min(phnum, 64)):
        ph = data[phoff + i * phentsize : phoff + (i + 1) * phentsize]
        if len(ph) < 56 or int.from_bytes(ph[0:4], "little") != 4:  # PT_NOTE
            continue
        off, size = int.from_bytes(ph[8:16], "little"), int.from_bytes(ph[32:40], "little")
        found = notes_build_id(data[off : off + size])
        if found:
            return found
    return None


def file_build_id(path: Path) -> str | None:
    """The build-id of a vmlinux (ELF) file."""
    try:
        return elf_build_id(path.read_bytes())
    except OSError:
        return None


_SEEN: dict[tuple[str, int, int], dict] = {}  # this process's answers, by (path, size, mtime)


def image_identity(image: Path) -> dict:
    """``{"sha256": ..., "build_id": ...}`` of a bootable image: an ELF vmlinux, or a bzImage whose
    payload is decompressed to read it (build_id None when the payload cannot be read). Remembered
    by the image's hash, so a cache hit costs one hash of the file."""
    st = image.stat()
    stamp = (str(image.resolve()), st.st_size, st.st_mtime_ns)
    if stamp in _SEEN:  # (a run asks for the hash and the build-id of one image several times)
        return _SEEN[stamp]
    data = image.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    memo = cache_dir("kernels", "identity") / f"{sha[:32]}.json"
    try:
        known = json.loads(memo.read_text())
        if known.get("sha256") == sha:
            _SEEN[stamp] = known
            return known
    except (OSError, ValueError):
        pass
    build_id = elf_build_id(data)
    if build_id is None:
        elf = payload_elf(data)
        build_id = elf_build_id(elf) if elf else None
    ident = {"sha256": sha, "build_id": build_id}
    write_text_atomic(memo, json.dumps(ident) + "\n")
    _SEEN[stamp] = ident
    return ident
