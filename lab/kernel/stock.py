"""The stock kernel: Debian's linux-image-amd64, fetched with apt and cached.

``apt-get download`` + ``dpkg-deb -x`` into the cache; nothing is installed on
the host. ``depmod`` builds modules.dep so the image builder can pick the
virtio/9p modules with their dependencies.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from lab.errors import LabError
from lab.paths import COMPLETE, TOOL_TEXT, cache_dir, publish_dir, system_tool

META_PACKAGE = "linux-image-amd64"


def _run(cmd: list[str], cwd: Path, what: str) -> str:
    try:
        res = subprocess.run([system_tool(cmd[0]) or cmd[0], *cmd[1:]], cwd=cwd, capture_output=True, **TOOL_TEXT)
    except FileNotFoundError:
        raise LabError(
            f"{what}: {cmd[0]} not found (Debian's apt/dpkg tools are needed for the stock kernel)"
        ) from None
    if res.returncode != 0:
        err = [ln for ln in res.stderr.splitlines() if ln.startswith("E:")] or res.stderr.strip().splitlines()[-1:]
        raise LabError(f"{what}: {' '.join(cmd[:2])} failed: {err[0] if err else 'exit ' + str(res.returncode)}")
    return res.stdout


def stock_dir() -> Path:
    return cache_dir("kernels", "stock")


def cached_stock() -> Path | None:
    """The newest complete stock kernel in the cache, if any."""
    done = sorted(p.parent for p in stock_dir().glob("*/.complete"))
    return done[-1] if done else None


def fetch_stock(refresh: bool = False) -> Path:
    """Make sure a stock kernel is cached and return its directory.

    The directory holds ``vmlinuz``, ``config``, ``System.map``, ``version``
    and ``modules/`` (with modules.dep).
    """
    have = cached_stock()
    if have and not refresh:
        return have
    with tempfile.TemporaryDirectory(dir=stock_dir(), prefix=".fetch-") as tmp_s:
        tmp = Path(tmp_s)
        _run(["apt-get", "download", META_PACKAGE], tmp, "stock kernel")
        meta = next(tmp.glob(f"{META_PACKAGE}_*.deb"))
        depends = _run(["dpkg-deb", "-f", str(meta), "Depends"], tmp, "stock kernel")
        image_pkg = next((d.split()[0] for d in depends.split(",") if d.strip().startswith("linux-image-")), None)
        if not image_pkg:
            raise LabError(f"stock kernel: {META_PACKAGE} depends on no linux-image package ({depends.strip()})")
        release = image_pkg.removeprefix("linux-image-")
        target = stock_dir() / release
        if (target / ".complete").exists():
            return target
        _run(["apt-get", "download", image_pkg], tmp, "stock kernel")
        deb = next(tmp.glob(f"{image_pkg}_*.deb"))
        root = tmp / "root"
        _run(["dpkg-deb", "-x", str(deb), str(root)], tmp, "stock kernel")
        mods = root / "lib" / "modules" / release
        if not mods.exists():
            mods = root / "usr" / "lib" / "modules" / release
        _run(["depmod", "-b", str(mods.parents[2]), release], tmp, "stock kernel")
        out = tmp / "out"
        out.mkdir()
        shutil.copy(root / "boot" / f"vmlinuz-{release}", out / "vmlinuz")
        shutil.copy(root / "boot" / f"config-{release}", out / "config")
        shutil.copy(root / "boot" / f"System.map-{release}", out / "System.map")
        shutil.move(str(mods), out / "modules")
        (out / "version").write_text(release + "\n")
        (out / "package").write_text(deb.name + "\n")
        (out / COMPLETE).touch()
        return publish_dir(out, target)
