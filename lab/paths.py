"""Where numalab keeps its caches and runs."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def cache_root() -> Path:
    """$NUMALAB_CACHE, else $XDG_CACHE_HOME/numalab, else ~/.cache/numalab."""
    env = os.environ.get("NUMALAB_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "numalab"


def cache_dir(*parts: str) -> Path:
    path = cache_root().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``path`` so that readers see the old content or the new, never half of it: a
    temporary file beside it (named per process, so concurrent writers do not share one), then
    a rename."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
