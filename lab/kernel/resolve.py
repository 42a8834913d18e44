"""Kernel specs on the command line -> a bootable :class:`Kernel`.

``stock`` is Debian's kernel (fetched and cached); a path is any bzImage the
user gives. Built kernels (``numalab kernel build``) resolve by name.
"""

from __future__ import annotations

from pathlib import Path

from lab.errors import LabError
from lab.kernel.bootable import Kernel
from lab.kernel.cache import find_built
from lab.kernel.stock import fetch_stock

__all__ = ["Kernel", "resolve_kernel"]


def _looks_like_bzimage(path: Path) -> bool:
    with open(path, "rb") as f:
        head = f.read(0x206)
    return len(head) >= 0x206 and head[0x202:0x206] == b"HdrS"


def resolve_kernel(spec: str) -> Kernel:
    if spec == "stock":
        d = fetch_stock()
        return Kernel("stock", d / "vmlinuz", d / "modules", d / "config", (d / "version").read_text().strip())
    path = Path(spec)
    if path.exists() or "/" in spec:
        if not path.is_file():
            raise LabError(f"--kernel {spec}: no such file")
        if not _looks_like_bzimage(path):
            raise LabError(f"--kernel {spec}: not an x86 bzImage (no 'HdrS' boot header)")
        config = next(
            (
                c
                for c in (path.parent / ".config", path.parents[2] / ".config" if len(path.parents) > 2 else None)
                if c and c.exists()
            ),
            None,
        )
        return Kernel(path.name, path.resolve(), None, config)
    built = find_built(spec)
    if built is None:
        raise LabError(
            f"--kernel {spec}: not 'stock', a bzImage path, or a built kernel name (see numalab kernel list)"
        )
    return built
