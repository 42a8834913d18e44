"""A bootable kernel: its image, modules and config (what ``lab.kernel.resolve`` and the cache give)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path


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

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "image": str(self.image),
            "sha256": self.sha256(),
            "release": self.release,
            "modular": self.modules_dir is not None,
            "config": str(self.config) if self.config else None,
        }
