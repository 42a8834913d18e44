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
