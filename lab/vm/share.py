"""The guest's results share: a drop directory the guest writes and the host only reads, with limits.

A kernel under test is untrusted code running as root in the guest. What it can
do to the host is bounded here:

* The share is a fresh, private directory of the run's scratch space, never the
  run record: the host writes the record elsewhere, so nothing the guest makes
  can stand in the path of a host write.
* QEMU exports it with ``security_model=mapped-file`` (libvirt:
  ``accessmode='mapped'``): every file the guest creates is a plain host file,
  mode 0600, owned by QEMU's user; a guest symlink, device node, owner or
  setuid bit is only metadata in QEMU's ``.virtfs_metadata`` files. The host
  sees no symlink and no setuid file, whatever the guest does.
* The host opens only the names in :data:`SHARE_FILES`, with ``O_NOFOLLOW``,
  and only if they are regular files within the size limit
  (:func:`open_guest_file`).
* :class:`ShareGuard`, called while the guest runs, stops the VM as soon as the
  share or the console log outgrow their limits; the run is then recorded with
  status ``limit-exceeded``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from lab.errors import LabError
from lab.record_files import GUEST_DONE, SHARE_FILES

QEMU_METADATA_DIR = ".virtfs_metadata"  # QEMU's mapped-file metadata: not the guest's to see

GiB = 1 << 30
MiB = 1 << 20
DEFAULT_OUTPUT_LIMIT = 1 * GiB
MIN_OUTPUT_LIMIT = 1 * MiB
MAX_SHARE_ENTRIES = 256  # the guest init makes 3 files; QEMU adds a metadata file each
CONSOLE_LIMIT = 64 * MiB  # a kernel log with sched_verbose on 288 CPUs is a few MiB
LISTED_ENTRIES = 50  # entries of a misbehaving share kept in the manifest


class GuestLimitExceeded(Exception):
    """The guest sent more than it may. ``str()`` says what and which limit."""


@dataclass(frozen=True)
class ShareLimits:
    output_bytes: int = DEFAULT_OUTPUT_LIMIT  # the share as a whole, and what its tars unpack to
    entries: int = MAX_SHARE_ENTRIES
    console_bytes: int = CONSOLE_LIMIT
    tar_members: int = 20000  # files and directories the tars may unpack to (lab.analysis.results), both together

    def __post_init__(self) -> None:
        if self.output_bytes < MIN_OUTPUT_LIMIT:
            raise LabError(f"--guest-output-limit: must be at least {MIN_OUTPUT_LIMIT // MiB}M")


def fmt_bytes(n: int) -> str:
    return f"{n / MiB:.0f} MiB" if n >= MiB else f"{n} bytes"


def make_share(parent: Path) -> Path:
    """A new, empty share directory only this user can enter (QEMU runs as this user)."""
    share = parent / "share"
    share.mkdir(mode=0o700)
    return share


def _walk(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """(relative path, lstat) of everything the guest made below ``root``; links are never followed.
    QEMU's own ``.virtfs_metadata`` directories are left out (the guest cannot see them), so the limit and
    the manifest's inventory count the same entries."""
    stack = [(root, "")]
    while stack:
        d, rel = stack.pop()
        try:
            with os.scandir(d) as it:
                for e in it:
                    if e.name == QEMU_METADATA_DIR:
                        continue
                    st = e.stat(follow_symlinks=False)
                    name = f"{rel}{e.name}"
                    yield name, st
                    if stat.S_ISDIR(st.st_mode):
                        stack.append((Path(e.path), f"{name}/"))
        except FileNotFoundError:
            continue


def usage(share: Path, max_entries: int) -> tuple[int, int]:
    """(apparent bytes, entries) of what the guest put in the share; stops counting past ``max_entries``."""
    total = entries = 0
    for _name, st in _walk(share):
        entries += 1
        total += st.st_size
        if entries > max_entries:
            break
    return total, entries


def over_limit(limits: ShareLimits, total: int, entries: int, console: int = 0) -> str | None:
    """Why what the guest sent so far is too much (console bytes, share bytes and entries), or None."""
    if console > limits.console_bytes:
        return f"console output over the {fmt_bytes(limits.console_bytes)} limit"
    if entries > limits.entries:
        return f"the guest made more than {limits.entries} files in the results share"
    if total > limits.output_bytes:
        return (
            f"the guest wrote {fmt_bytes(total)} to the results share, over the "
            f"{fmt_bytes(limits.output_bytes)} limit (--guest-output-limit)"
        )
    return None


class ShareGuard:
    """Called between looks at a running guest: the reason to stop it, or None."""

    def __init__(self, share: Path | None, console: Path | None, limits: ShareLimits) -> None:
        self.share, self.console, self.limits = share, console, limits

    def __call__(self) -> str | None:
        console = 0
        if self.console is not None:
            try:
                console = self.console.stat().st_size
            except OSError:
                pass
        total, entries = usage(self.share, self.limits.entries) if self.share is not None else (0, 0)
        return over_limit(self.limits, total, entries, console)


def open_guest_file(share: Path, name: str, max_bytes: int) -> BinaryIO | None:
    """One of :data:`SHARE_FILES`, opened without following links; None if it is not there.

    Raises :class:`GuestLimitExceeded` for a file over ``max_bytes`` and :class:`ValueError`
    for anything that is not a regular file."""
    if name not in SHARE_FILES:
        raise ValueError(f"{name}: not a file the guest sends")
    try:
        fd = os.open(share / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:  # ELOOP: a symlink (cannot happen with mapped-file, refused all the same)
        raise ValueError(f"{name}: not a regular file ({e.strerror})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ValueError(f"{name}: not a regular file")
    if st.st_size > max_bytes:
        os.close(fd)
        raise GuestLimitExceeded(f"{name} is {fmt_bytes(st.st_size)}, over the {fmt_bytes(max_bytes)} limit")
    return os.fdopen(fd, "rb")


def guest_done(share: Path) -> bool:
    """The guest init's last word, ``guest-done``: a small regular file."""
    try:
        f = open_guest_file(share, GUEST_DONE, 4096)
    except (ValueError, GuestLimitExceeded):
        return False
    if f is None:
        return False
    with f:
        return f.read(64).strip() == b"done"


def inventory(share: Path) -> dict:
    """What the share held, as the host sees it (lstat): for the manifest, so a run shows what its
    guest left. Files the guest init does not send are listed under ``unexpected``."""
    entries = []
    total = count = 0
    for name, st in _walk(share):
        count += 1
        total += st.st_size
        if len(entries) < LISTED_ENTRIES:
            entries.append(
                {
                    "name": name,
                    "type": _kind(st.st_mode),
                    "mode": f"{stat.S_IMODE(st.st_mode):04o}",
                    "bytes": st.st_size,
                }
            )
    return {
        "entries": count,
        "bytes": total,
        "unexpected": [e for e in entries if e["name"] not in SHARE_FILES],
        "special": [e for e in entries if e["type"] not in ("file", "dir") or int(e["mode"], 8) & 0o7000],
    }


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"
