"""The guest's results as they reach the host: tar files on the results share, unpacked here.

The guest init (images/guest/init) writes everything to its tmpfs and sends it
over virtio-9p as two files: ``readback.tar`` (the guest's view of itself,
sent before the workload, so a run that panics or hangs later still has it)
and ``results.tar`` (workload output, vmstat, the raw trace, dmesg), then
``guest-done``. Creating a file over 9p takes several round trips between the
vCPU and QEMU's main loop, milliseconds each under TCG; with two tars instead
of about twenty files (and the tars copied in 1 MiB writes) the guest init of
an idle run took 0.05-0.1 s less (medians of 7 boots).

``unpack_results`` turns them into the plain files of a run record. The tars
are read from the share (a directory the run record never is, see
:mod:`lab.vm.share`) without following links, as plain uncompressed tars only
(a compressed one could expand without bound before a member is checked).
Every member is checked first (regular files and directories, relative paths,
no ``..``, nothing already in the run directory, no more members and bytes
than the limits; a link, a device node or a FIFO is named as what it is), then
the tar is unpacked into a scratch directory of the run and its entries moved
into place, so a tar that does not unpack leaves nothing half-written; its
problem is returned. A host-side failure while writing (a full disk) raises
OSError: it is not the guest's fault and not a result.
"""

from __future__ import annotations

import errno
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from lab.record_files import ALL, READBACK_TAR, RESULTS_TAR
from lab.vm.share import DEFAULT_OUTPUT_LIMIT, GuestLimitExceeded, fmt_bytes, open_guest_file

TARS = (READBACK_TAR, RESULTS_TAR)
HOST_FILES = frozenset(f.name for f in ALL if f.side == "host")  # the manifest, the console...: never the guest's
MAX_MEMBERS = 20000  # the most ever; a run's own limit is ShareLimits.tar_members (lab.run.request.RunRequest.limits)


class UnpackError(Exception):
    pass


@dataclass
class Unpacked:
    problems: list[str] = field(default_factory=list)  # tars that did not unpack, and why
    limit: str | None = None  # the first limit the guest's results went over
    bytes: int = 0  # unpacked into the run record


def _kind(m: tarfile.TarInfo) -> str:
    """What a tar member that is neither a regular file nor a directory is, for the problem that names it."""
    if m.issym():
        return f"a symbolic link (to {m.linkname[:200]!r})"
    if m.islnk():
        return f"a hard link (to {m.linkname[:200]!r})"
    if m.ischr() or m.isblk():
        return "a device node"
    if m.isfifo():
        return "a FIFO"
    return "a sparse file" if m.issparse() else f"of tar type {m.type!r}"


def _members(
    tf: tarfile.TarFile, tar_name: str, run_dir: Path, budget: int, max_members: int = MAX_MEMBERS
) -> list[tuple[tarfile.TarInfo, PurePosixPath]]:
    out = []
    total = 0
    kinds: dict[PurePosixPath, str] = {}  # every path the tar makes: "file" or "dir" (parents included)
    for m in tf:
        if len(out) >= max_members:
            raise GuestLimitExceeded(f"{tar_name} has more than {max_members} members (files and directories)")
        rel = PurePosixPath(m.name)
        parts = [p for p in rel.parts if p != "."]
        if not parts and m.isdir():
            continue  # the archive's own "./"
        if not (m.isfile() or m.isdir()) or m.issparse():
            raise UnpackError(f"{tar_name}: {m.name[:200]!r} is {_kind(m)}; only files and directories are taken")
        if not parts or rel.is_absolute() or ".." in parts:
            raise UnpackError(f"{tar_name}: unexpected member {m.name!r}")
        rel = PurePosixPath(*parts)
        if (run_dir / parts[0]).exists() or (run_dir / parts[0]).is_symlink():
            raise UnpackError(f"{tar_name}: {parts[0]} is already in the run directory")
        if parts[0] in HOST_FILES:
            raise UnpackError(f"{tar_name}: {parts[0]} is a file the host writes")
        # The same path twice, a file where a directory was (or under a file): each would
        # unpack one way or the other depending on order, so the tar is refused.
        for i in range(1, len(parts)):
            if kinds.setdefault(PurePosixPath(*parts[:i]), "dir") != "dir":
                raise UnpackError(f"{tar_name}: {'/'.join(parts[:i])!r} is both a file and a directory")
        kind = "dir" if m.isdir() else "file"
        if kinds.get(rel, kind) != kind:
            raise UnpackError(f"{tar_name}: {str(rel)!r} is both a file and a directory")
        if kind == "file" and rel in kinds:
            raise UnpackError(f"{tar_name}: {str(rel)!r} is in it twice")
        kinds[rel] = kind
        total += m.size
        if total > budget:
            raise GuestLimitExceeded(f"{tar_name} unpacks to more than {fmt_bytes(budget)}")
        out.append((m, rel))
    return out


def _unpack(
    share: Path, name: str, run_dir: Path, budget: int, max_members: int = MAX_MEMBERS
) -> tuple[int, int] | None:
    """Unpack one tar of the share into ``run_dir``; (bytes, members) unpacked, None if the guest sent none."""
    try:
        f = open_guest_file(share, name, budget)
    except ValueError as e:
        raise UnpackError(str(e)) from None
    if f is None:
        return None
    scratch = Path(tempfile.mkdtemp(prefix=f".{Path(name).stem}-", dir=run_dir))
    try:
        with f, tarfile.open(fileobj=f, mode="r:") as tf:
            members = _members(tf, name, run_dir, budget, max_members)
            for m, rel in members:
                dest = scratch.joinpath(*rel.parts)
                if m.isdir():
                    dest.mkdir(parents=True, exist_ok=True)
                    continue
                dest.parent.mkdir(parents=True, exist_ok=True)
                src = tf.extractfile(m)
                assert src is not None  # a regular file
                with src, open(dest, "xb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
        for entry in sorted(scratch.iterdir()):
            entry.rename(run_dir / entry.name)
        return sum(m.size for m, _ in members), len(members)
    except tarfile.TarError as e:
        raise UnpackError(f"{name}: {e}") from None
    except OSError as e:
        # A name the guest chose that the host's file system refuses (too long, a clash the checks
        # above missed) is the guest's; a full or read-only disk is the host's, and is raised.
        if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.ENOMEM):
            raise
        raise UnpackError(f"{name}: did not unpack ({e.strerror or e})") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def unpack_results(
    share: Path, run_dir: Path, max_bytes: int = DEFAULT_OUTPUT_LIMIT, max_members: int = MAX_MEMBERS
) -> Unpacked:
    """Unpack the guest's tars from ``share`` into ``run_dir`` (at most ``max_bytes`` and ``max_members`` files
    and directories in all). A tar that does not unpack leaves nothing of itself in the run directory."""
    result = Unpacked()
    members = 0
    for name in TARS:
        try:
            n = _unpack(share, name, run_dir, max_bytes - result.bytes, max_members - members)
        except GuestLimitExceeded as e:
            result.limit = result.limit or str(e)
            result.problems.append(str(e))  # it names the tar
            continue
        except UnpackError as e:
            result.problems.append(str(e))
            continue
        result.bytes += n[0] if n else 0
        members += n[1] if n else 0
    return result
