"""A bootable kernel: its image, modules and config (what ``lab.kernel.resolve`` and the cache give)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lab.kernel.identity import image_identity


@dataclass(frozen=True)
class Kernel:
    name: str
    image: Path
    modules_dir: Path | None = None  # with modules.dep, for modular kernels
    config: Path | None = None
    release: str = ""
    build_id: str | None = None  # numalab's builds: the build-id of vmlinux in the build directory

    def sha256(self) -> str:
        return image_identity(self.image)["sha256"]

    def expected_build_id(self) -> tuple[str | None, str]:
        """(the build-id the guest must show, where it comes from): a numalab build's ``vmlinux`` (what
        was asked for), else the image's own payload (what was given)."""
        if self.build_id:
            return self.build_id, "vmlinux"
        return image_identity(self.image)["build_id"], "image"

    def to_dict(self) -> dict:
        expected, source = self.expected_build_id()
        return {
            "name": self.name,
            "image": str(self.image),
            "sha256": self.sha256(),
            "release": self.release,
            "modular": self.modules_dir is not None,
            "config": str(self.config) if self.config else None,
            "expected_build_id": expected,
            "expected_build_id_from": source if expected else None,
        }
