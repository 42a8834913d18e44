"""The guest's results as they reach the host: tar files on the results share, unpacked here.

The guest init (images/guest/init) writes everything to its tmpfs and sends it
over virtio-9p as two files: ``readback.tar`` (the guest's view of itself,
sent before the workload, so a run that panics or hangs later still has it)
and ``results.tar`` (workload output, vmstat, the raw trace, dmesg), then
``guest-done``. Creating a file over 9p takes several round trips between the
vCPU and QEMU's main loop, milliseconds each under TCG; with two tars instead
of about twenty files (and the tars copied in 1 MiB writes) the guest init of
an idle run took 0.05-0.1 s less (medians of 7 boots).

``unpack_results`` turns them back into the plain files of a run record. Every
member is checked first (regular files and directories, relative paths, no
``..``, nothing already in the run directory), then the tar is unpacked into a
scratch directory and its entries moved into place, so a tar that does not
unpack leaves nothing half-written: it is kept for a look and its problem is
returned.
"""

from __future__ import annotations

import shutil
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

TARS = ("readback.tar", "results.tar")


class UnpackError(Exception):
    pass


def _members(tf: tarfile.TarFile, tar_name: str, run_dir: Path) -> list[tuple[tarfile.TarInfo, PurePosixPath]]:
    out = []
    for m in tf.getmembers():
        rel = PurePosixPath(m.name)
        parts = [p for p in rel.parts if p != "."]
        if not parts and m.isdir():
            continue  # the archive's own "./"
        if not parts or rel.is_absolute() or ".." in parts or not (m.isfile() or m.isdir()):
            raise UnpackError(f"{tar_name}: unexpected member {m.name!r}")
        rel = PurePosixPath(*parts)
        if len(parts) == 1 and (run_dir / parts[0]).exists():
            raise UnpackError(f"{tar_name}: {parts[0]} is already in the run directory")
        out.append((m, rel))
    return out


def _unpack(tar: Path, run_dir: Path) -> None:
    scratch = Path(tempfile.mkdtemp(prefix=f".{tar.stem}-", dir=run_dir))
    try:
        with tarfile.open(tar) as tf:
            members = _members(tf, tar.name, run_dir)
            for m, rel in members:
                dest = scratch.joinpath(*rel.parts)
                if m.isdir():
                    dest.mkdir(parents=True, exist_ok=True)
                    continue
                dest.parent.mkdir(parents=True, exist_ok=True)
                src = tf.extractfile(m)
                assert src is not None  # a regular file
                with src, open(dest, "wb") as f:
                    shutil.copyfileobj(src, f, 1 << 20)
        for entry in sorted(scratch.iterdir()):
            entry.rename(run_dir / entry.name)
    except (tarfile.TarError, OSError) as e:
        raise UnpackError(f"{tar.name}: {e}") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def unpack_results(run_dir: Path) -> list[str]:
    """Unpack the guest's tars into ``run_dir`` and remove them. Returns the problems (a tar
    that did not unpack stays, and nothing of it is in the run directory)."""
    problems = []
    for name in TARS:
        tar = run_dir / name
        if not tar.is_file():
            continue
        try:
            _unpack(tar, run_dir)
        except UnpackError as e:
            problems.append(str(e))
            continue
        tar.unlink()
    return problems
