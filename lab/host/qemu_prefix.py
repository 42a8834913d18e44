"""A second QEMU beside the system's: Debian's backports build, unpacked into a private prefix.

``make setup-qemu10`` (``python -m lab.host.qemu_prefix``) asks apt for
``qemu-system-x86`` from ``<codename>-backports`` with a private apt
configuration (its own source list, package lists and download cache under
numalab's cache), downloads the packages apt would upgrade for it
(``apt-get download``: QEMU, its data and firmware, SeaBIOS) and unpacks them
into ``<cache>/qemu/<version>/``. Nothing is installed; the system's apt
sources and packages are left alone. The archive is the one the system's own
sources name for Debian (a local mirror stays the mirror).

A private prefix gets no security updates from apt: fetch again (``--refresh``)
to follow the backports archive.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from lab.apt import PrivateApt, debian_archive, setup_run
from lab.apt import codename as _codename
from lab.errors import LabError
from lab.paths import COMPLETE, TOOL_TEXT, cache_dir, publish_dir, write_text_atomic
from lab.vm.qemu.emulator import DEFAULT_QEMU, private_prefixes, resolve

PACKAGE = "qemu-system-x86"


def _run(cmd: list[str], what: str, cwd: Path | None = None) -> str:
    return setup_run(cmd, what, "setup-qemu10", "needs Debian's apt", cwd)


def prefix_dir(version: str) -> Path:
    """``<cache>/qemu/<Debian version>``, the version made file-name safe."""
    return cache_dir("qemu") / re.sub(r"[^A-Za-z0-9.+-]", "_", version.split(":", 1)[-1])


def fetch(release_suffix: str = "backports", refresh: bool = False, say=print) -> Path:
    """The backports QEMU's binary in its private prefix: the newest one already unpacked (no network), or,
    with ``refresh`` or when there is none, the archive's current version, fetched and unpacked."""
    have = private_prefixes()
    if have and not refresh:
        binary = have[0] / "usr" / "bin" / DEFAULT_QEMU
        say(f"numalab: QEMU from {have[0]} (--refresh to look for a newer one)")
        return binary
    codename = _codename()
    release = f"{codename}-{release_suffix}"
    apt = PrivateApt(cache_dir("qemu", ".apt"), debian_archive(codename), codename)
    say(f"numalab: asking apt (private lists) for {PACKAGE} from {release}")
    apt.update()
    packages = apt.upgrade_set(PACKAGE, release)
    version = dict(packages)[PACKAGE]
    prefix = prefix_dir(version)
    binary = prefix / "usr" / "bin" / DEFAULT_QEMU
    if (prefix / ".complete").exists() and binary.is_file() and not refresh:
        say(f"numalab: QEMU {version} already in {prefix}")
        return binary
    tmp = Path(tempfile.mkdtemp(dir=prefix.parent, prefix=f".{prefix.name}."))
    try:
        debs = tmp / ".debs"
        debs.mkdir()
        say(f"numalab: downloading {', '.join(f'{n} {v}' for n, v in packages)}")
        for deb in apt.download(packages, debs):
            _run(["dpkg-deb", "-x", str(deb), str(tmp)], f"dpkg-deb -x {deb.name}")
        shutil.rmtree(debs)
        check_libraries(tmp / "usr" / "bin" / DEFAULT_QEMU, "setup-qemu10")
        write_text_atomic(tmp / "VERSION", f"{version}\n{release}\n")
        (tmp / COMPLETE).touch()
        publish_dir(tmp, prefix, replace=refresh)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    e = resolve(str(binary))
    say(f"numalab: {e.version} in {prefix} (firmware from {', '.join(e.data_dirs)}); "
        "use it with --qemu " + str(binary))  # fmt: skip
    return binary


def check_libraries(binary: Path, step: str, env: dict[str, str] | None = None) -> None:
    """One line naming ``step`` (the make target) if ``binary`` would miss a library of this system (ldd; with
    ``env``, e.g. a prefix's LD_LIBRARY_PATH)."""
    proc = subprocess.run(["ldd", str(binary)], capture_output=True, **TOOL_TEXT, timeout=60, env=env)
    missing = [ln.split()[0] for ln in proc.stdout.splitlines() if "not found" in ln]
    if proc.returncode != 0 or missing:
        why = ", ".join(missing) or (proc.stderr.strip() or "ldd failed")
        raise LabError(f"{step}: {binary.name} needs libraries this system lacks: {why}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m lab.host.qemu_prefix",
        description="Fetch Debian's backports QEMU into a private prefix under numalab's cache (make setup-qemu10); "
        "prints the binary's path. System packages and apt sources are left alone.",
    )
    p.add_argument("--refresh", action="store_true",
                   help="ask the archive for its current version (and fetch it) even if one is unpacked")  # fmt: skip
    p.add_argument("--print-binary", action="store_true", help="only print the binary's path (for scripts)")
    args = p.parse_args(argv)
    return print_binary(lambda say: fetch(refresh=args.refresh, say=say), quiet=args.print_binary)


def print_binary(make: Callable[[Callable[[str], None]], Path], quiet: bool) -> int:
    """A setup command's end: ``make(say)`` the binary (progress on stderr unless ``quiet``), print its path;
    a LabError is one line and exit 2."""
    say = (lambda _m: None) if quiet else (lambda m: print(m, file=sys.stderr))
    try:
        binary = make(say)
    except LabError as err:
        print(f"numalab: error: {err}", file=sys.stderr)
        return 2
    print(binary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
