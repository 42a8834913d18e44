"""The cache of built kernels (filled by ``numalab kernel build``)."""

from __future__ import annotations

from pathlib import Path

from lab.paths import cache_dir


def built_dir() -> Path:
    return cache_dir("kernels", "built")


def find_built(name: str):
    """A built kernel by name, or None. Builds are added by the kernel-build work."""
    from lab.kernel.resolve import Kernel

    entry = built_dir() / name
    image = entry / "bzImage"
    if not image.exists():
        return None
    config = entry / "config"
    return Kernel(
        name,
        image,
        None,
        config if config.exists() else None,
        (entry / "release").read_text().strip() if (entry / "release").exists() else "",
    )
