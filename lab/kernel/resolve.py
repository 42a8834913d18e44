"""Kernel specs on the command line -> a bootable :class:`Kernel`.

``stock`` is Debian's kernel (fetched and cached); a path is any bzImage the
user gives. Built kernels (``numalab kernel build``) resolve by name.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError
from lab.kernel.stock import fetch_stock


@dataclass(frozen=True)
class Kernel:
    name: str
    image: Path
    modules_dir: Path | None = None  # with modules.dep, for modular kernels
    config: Path | None = None
    release: str = ""

    def sha256(self) -> str:
        h = hashlib.sha256()
        with open(self.image, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()

    def config_option(self, option: str) -> str | None:
        """The value of CONFIG_<option> in the kernel's .config, if known."""
        if not self.config or not self.config.exists():
            return None
        for line in self.config.read_text().splitlines():
            if line.startswith(f"CONFIG_{option}="):
                return line.split("=", 1)[1]
        return None

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "image": str(self.image),
            "sha256": self.sha256(),
            "release": self.release,
            "modular": self.modules_dir is not None,
            "config": str(self.config) if self.config else None,
        }


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
    from lab.kernel.cache import find_built  # built kernels (numalab kernel build)

    built = find_built(spec)
    if built is None:
        raise LabError(
            f"--kernel {spec}: not 'stock', a bzImage path, or a built kernel name (see numalab kernel list)"
        )
    return built
