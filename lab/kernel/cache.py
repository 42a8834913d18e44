"""The cache of built kernels (filled by ``numalab kernel build``).

``<cache>/kernels/builds/<key>/`` holds one build's artefacts (bzImage,
config, System.map, build.log, release, meta.json); ``<cache>/kernels/built/
<name>`` is a symlink to the build a name points at.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from lab.errors import LabError
from lab.paths import cache_dir

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


def built_dir() -> Path:
    return cache_dir("kernels", "built")


def builds_dir() -> Path:
    return cache_dir("kernels", "builds")


def validate_name(name: str) -> str:
    if not _NAME.fullmatch(name) or name == "stock":
        raise LabError(f"--name {name}: use letters, digits, '.', '_', '+', '-' (not 'stock'), at most 64 characters")
    return name


def link_name(name: str, key: str) -> None:
    """Point NAME at builds/KEY (atomically; a name may be re-pointed by a later build)."""
    link = built_dir() / name
    if link.exists() and not link.is_symlink():
        raise LabError(f"--name {name}: {link} exists and is not a numalab build link")
    tmp = built_dir() / f".{name}.{os.getpid()}"
    if tmp.is_symlink():
        tmp.unlink()
    tmp.symlink_to(Path("..") / "builds" / key)
    os.replace(tmp, link)


def _entry(spec: str) -> Path | None:
    entry = built_dir() / spec
    if (entry / "bzImage").exists():
        return entry
    if re.fullmatch(r"[0-9a-f]{6,20}", spec):  # a key (prefix), as `numalab kernel list` shows it
        hits = [d for d in builds_dir().glob(f"{spec}*") if (d / "bzImage").exists()]
        if len(hits) == 1:
            return hits[0]
    return None


def find_built(name: str):
    """A built kernel by name (or build key prefix), or None."""
    from lab.kernel.resolve import Kernel

    entry = _entry(name)
    if entry is None:
        return None
    config = entry / "config"
    return Kernel(
        name,
        (entry / "bzImage").resolve(),
        None,
        config.resolve() if config.exists() else None,
        (entry / "release").read_text().strip() if (entry / "release").exists() else "",
    )


def list_builds() -> list[dict]:
    """Every cached build with the names pointing at it, newest first."""
    names: dict[str, list[str]] = {}
    for link in sorted(built_dir().iterdir()):
        if link.is_symlink() and not link.name.startswith("."):
            names.setdefault(Path(os.readlink(link)).name, []).append(link.name)
    out = []
    for d in builds_dir().iterdir():
        meta_path = d / "meta.json"
        if d.name.startswith(".") or not meta_path.exists():
            continue
        try:
            meta = json.loads(meta_path.read_text())
        except ValueError:
            continue
        size = (d / "bzImage").stat().st_size if (d / "bzImage").exists() else 0
        out.append({"names": names.get(d.name, []), "path": str(d), "bzimage_bytes": size, **meta})
    return sorted(out, key=lambda m: m.get("built_at", ""), reverse=True)
