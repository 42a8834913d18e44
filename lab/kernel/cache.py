"""The cache of built kernels (filled by ``numalab kernel build``).

``<cache>/kernels/builds/<key>/`` holds one build's artefacts (bzImage,
config, System.map, build.log, release, meta.json); ``<cache>/kernels/built/
<name>`` is a symlink to the build a name points at.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import time
from pathlib import Path

from lab.errors import LabError
from lab.kernel.bootable import Kernel
from lab.kernel.identity import image_identity
from lab.kernel.sched_ext import shipped
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


def find_built(name: str) -> Kernel | None:
    """A built kernel by name (or build key prefix), or None. A build whose bzImage is not the one its
    meta.json recorded (edited, or cached before builds recorded their identity) is refused."""
    entry = _entry(name)
    if entry is None:
        return None
    config = entry / "config"
    meta = read_meta(entry)
    image = (entry / "bzImage").resolve()
    if not meta.get("build_id") or not meta.get("bzimage_sha256"):
        raise LabError(
            f"--kernel {name}: its build ({entry.resolve().name}) records no build-id (made by an older numalab, "
            "whose incremental builds could carry a stale payload): build it again with numalab kernel build"
        )
    if image_identity(image)["sha256"] != meta["bzimage_sha256"]:
        raise LabError(f"--kernel {name}: {image} is not the bzImage its build recorded (sha256 differs)")
    return Kernel(
        name,
        image,
        None,
        config.resolve() if config.exists() else None,
        (entry / "release").read_text().strip() if (entry / "release").exists() else "",
        str(meta["build_id"]),
    )


def read_meta(entry: Path) -> dict:
    try:
        meta = json.loads((entry / "meta.json").read_text())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def list_builds() -> list[dict]:
    """Every cached build with the names pointing at it and the sched_ext schedulers it carries
    (``sched_ext_schedulers``, [] for most), newest first."""
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
        # the sched_ext example schedulers it carries (--scheduler NAME), as a run finds them: in the entry
        ext = list(shipped(d / "config"))
        out.append({"names": names.get(d.name, []), "path": str(d), "bzimage_bytes": size, **meta,
                    "sched_ext_schedulers": ext})  # fmt: skip
    return sorted(out, key=lambda m: m.get("built_at", ""), reverse=True)


def _tree_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def prunable(sources: bool = False, log_age_s: float = 86400.0) -> list[dict]:
    """What ``numalab kernel prune`` removes: builds no name points at, logs of builds that are gone
    (older than ``log_age_s``, so a failed build's log survives a while), and with ``sources`` the
    private source trees and warm build directories (the next build of that source is cold)."""
    root = cache_dir("kernels")
    named = {Path(os.readlink(link)).name for link in built_dir().iterdir() if link.is_symlink()}
    out: list[dict] = []
    for d in sorted(builds_dir().iterdir()):
        if d.is_dir() and not d.name.startswith(".") and d.name not in named:
            out.append({"what": "unnamed build", "path": str(d), "bytes": _tree_bytes(d)})
    logs = root / "logs"
    now = time.time()
    if logs.is_dir():
        for log in sorted(logs.glob("*.log")):
            if log.stem not in named and now - log.stat().st_mtime > log_age_s:
                out.append({"what": "build log", "path": str(log), "bytes": log.stat().st_size})
    if sources and (root / "src").is_dir():
        for src in sorted((root / "src").iterdir()):
            if src.is_dir():
                out.append({"what": "source tree", "path": str(src), "bytes": _tree_bytes(src)})
    return out


def prune(items: list[dict]) -> None:
    """Remove what :func:`prunable` listed, each source tree under its build lock."""
    for item in items:
        path = Path(item["path"])
        if item["what"] == "source tree":
            with open(path / ".lock", "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # no build of this source is running
                doomed = path.with_name(f".{path.name}.pruning-{os.getpid()}")
                os.rename(path, doomed)
            shutil.rmtree(doomed, ignore_errors=True)
        elif path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
