"""A minimal writer for the kernel's initramfs format (cpio "newc").

The kernel accepts several archives concatenated, which is how an image is
assembled: a kernel-independent base, the kernel's modules, and the run's plan.
"""

from __future__ import annotations

import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO


@dataclass(frozen=True)
class Entry:
    path: str  # inside the archive, no leading slash (a host file's name: its bytes that are not UTF-8 as surrogates)
    mode: int  # full st_mode (type | permissions)
    data: bytes = b""  # file content, or the target of a symlink


def _header(ino: int, entry: Entry, size: int) -> bytes:
    name = entry.path.encode(errors="surrogateescape") + b"\0"  # (the name's own bytes, as os.fsencode)
    fields = [ino, entry.mode, 0, 0, 1, 0, size, 0, 0, 0, 0, len(name), 0]
    head = b"070701" + b"".join(f"{f:08x}".encode() for f in fields)
    return head + name + b"\0" * (-(len(head) + len(name)) % 4)


def write_cpio(out: BinaryIO, entries: Iterable[Entry]) -> None:
    """Write entries (directories before their contents) and the trailer."""
    ino = 1
    for entry in entries:
        out.write(_header(ino, entry, len(entry.data)))
        out.write(entry.data)
        out.write(b"\0" * (-len(entry.data) % 4))
        ino += 1
    out.write(_header(0, Entry("TRAILER!!!", 0), 0))


def directory(path: str) -> Entry:
    return Entry(path.strip("/"), stat.S_IFDIR | 0o755)


def file_entry(path: str, data: bytes, executable: bool = False) -> Entry:
    return Entry(path.strip("/"), stat.S_IFREG | (0o755 if executable else 0o644), data)


def symlink(path: str, target: str) -> Entry:
    return Entry(path.strip("/"), stat.S_IFLNK | 0o777, target.encode(errors="surrogateescape"))


def parents(paths: Iterable[str]) -> list[Entry]:
    """Directory entries for every parent of the given archive paths, outermost first."""
    dirs: set[str] = set()
    for p in paths:
        parts = Path(p.strip("/")).parts[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:i]))
    return [directory(d) for d in sorted(dirs, key=lambda d: (d.count("/"), d))]
