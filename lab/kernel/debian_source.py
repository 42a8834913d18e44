"""``--source debian:7.3``: Debian's ``linux-source-7.3`` package, fetched through numalab's private apt lists.

Debian ships each kernel series' source as one package, ``linux-source-X.Y``, holding
``/usr/src/linux-source-X.Y.tar.xz``. A Debian 12 system's own apt sources reach 6.1 and 6.12; today's kernels
are in later suites (2026-11: 7.3 in trixie-backports, 7.2 in trixie-backports and sid). numalab asks apt with a
private configuration (:class:`lab.apt.PrivateApt`: its own source list and lists under
``<cache>/kernels/debian/.apt``, the system's keys, nothing installed): the system's release and every later one
numalab knows of, their backports, testing and sid. apt's candidate is the version taken (sid's over a backport's
at the same priority); ``apt-get download`` checks the package against the signed index, and the tarball is
unpacked from it into ``<cache>/kernels/debian/<package>_<version>/``. From there it is a tarball source like any
other (the same identity as giving that tarball's path), with the Debian package and version in its record.

The lists are read again when they are older than :data:`LISTS_MAX_AGE_S` or do not name the package; without
the network, a version fetched before is used, and said to be.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lab.apt import PrivateApt, codename, debian_archive
from lab.errors import LabError
from lab.paths import COMPLETE, TOOL_TEXT, cache_dir, json_text, publish_dir, write_text_atomic

WHO = "--source"
SPEC = re.compile(r"debian:(\d{1,2})\.(\d{1,3})")
# Debian's releases in order, then the suites after the newest: a system's own release and the later ones are asked.
RELEASES = ("bookworm", "trixie", "forky")
LATER = {"trixie": ("trixie", "trixie-backports"), "forky": ("forky",)}
LISTS_MAX_AGE_S = 12 * 3600


@dataclass(frozen=True)
class DebianKernelSource:
    package: str  # linux-source-7.3
    version: str  # 7.3.4-1~bpo13+1
    suite: str  # trixie-backports
    tarball: Path

    def to_dict(self) -> dict:
        return {"package": self.package, "version": self.version, "suite": self.suite}


def is_debian_spec(spec: str) -> bool:
    return spec.startswith("debian:")


def suites(system: str) -> tuple[str, ...]:
    """The suites asked on a system of release ``system``: its own, the later releases (with trixie's backports),
    and sid."""
    if system not in RELEASES:
        return (system, "sid")
    later = RELEASES[RELEASES.index(system) + 1 :]
    return (system, *(s for r in later for s in LATER.get(r, (r,))), "sid")


def _apt() -> PrivateApt:
    system = codename(WHO, "debian:X.Y needs Debian's apt (give the tarball's path instead)")
    return PrivateApt(cache_dir("kernels", "debian", ".apt"), debian_archive(system, WHO), "", suites=suites(system),
                      who=f"{WHO} debian")  # fmt: skip


def parse_policy(text: str, package: str) -> tuple[str, str] | None:
    """(candidate version, its suite) from ``apt-cache policy PACKAGE``; None when apt has no candidate."""
    m = re.search(rf"^{re.escape(package)}:\n(?:.*\n)*?\s+Candidate:\s*(\S+)", text, re.M)
    if not m or m.group(1) == "(none)":
        return None
    version = m.group(1)
    table = text[m.end() :]
    at = re.search(rf"^\s+(?:\*\*\* )?{re.escape(version)} \d+\n((?:\s+-?\d+ .*\n?)+)", table, re.M)
    suite = ""
    if at:
        for line in at.group(1).splitlines():
            parts = line.split()
            if len(parts) >= 3 and "/" in parts[2]:
                suite = parts[2].split("/")[0]
                break
    return version, suite


def _lists_fresh(root: Path) -> bool:
    lists = list((root / "lists").glob("*_Packages*"))
    return bool(lists) and time.time() - min(p.stat().st_mtime for p in lists) < LISTS_MAX_AGE_S


def _cached(package: str) -> list[Path]:
    """The complete fetched copies of ``package``, newest first (by when they were fetched)."""
    found = [p.parent for p in cache_dir("kernels", "debian").glob(f"{package}_*/{COMPLETE}")]
    return sorted(found, key=lambda d: (d / COMPLETE).stat().st_mtime, reverse=True)


def _from_dir(d: Path, package: str) -> DebianKernelSource:
    meta = json.loads((d / "debian.json").read_text())
    return DebianKernelSource(package, meta["version"], meta.get("suite", ""), d / f"{package}.tar.xz")


def fetch(spec: str, say: Callable[[str], None]) -> DebianKernelSource:
    """The tarball of ``debian:X.Y``: apt's candidate, fetched once (see the module's docstring)."""
    m = SPEC.fullmatch(spec)
    if not m:
        raise LabError(f"{WHO} {spec}: not a Debian kernel series (debian:7.3, debian:7.2, debian:6.12, debian:6.1)")
    package = f"linux-source-{m.group(1)}.{m.group(2)}"
    apt = _apt()
    found = None
    try:
        if _lists_fresh(apt.root):
            found = parse_policy(apt.run("apt-cache", ["policy", package], f"apt-cache policy {package}"), package)
        if found is None:
            asked = ", ".join(suites(codename(WHO)))
            say(f"numalab: asking Debian's archive (private apt lists: {asked}) for {package}")
            apt.update()
            found = parse_policy(apt.run("apt-cache", ["policy", package], f"apt-cache policy {package}"), package)
    except LabError as err:
        have = _cached(package)
        if not have:
            raise
        got = _from_dir(have[0], package)
        say(f"numalab: note: {err}; using {package} {got.version} fetched before")
        return got
    if found is None:
        raise LabError(f"{WHO} {spec}: Debian's archive has no {package} (asked: {', '.join(suites(codename(WHO)))})")
    version, suite = found
    out = cache_dir("kernels", "debian") / re.sub(r"[^A-Za-z0-9.+-]", "_", f"{package}_{version}")
    if (out / COMPLETE).exists():
        return _from_dir(out, package)
    say(f"numalab: downloading {package} {version} ({suite}) with apt")
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    try:
        debs = tmp / ".debs"
        debs.mkdir()
        deb = apt.download([(package, version)], debs)
        if len(deb) != 1:
            raise LabError(f"{WHO} {spec}: apt-get download gave {len(deb)} packages, expected {package}")
        member = f"./usr/src/{package}.tar.xz"
        with open(tmp / f"{package}.tar.xz", "wb") as f:
            unpack = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb[0])], stdout=subprocess.PIPE)
            tar = subprocess.run(["tar", "-xO", member], stdin=unpack.stdout, stdout=f, stderr=subprocess.PIPE,
                                 **TOOL_TEXT)  # fmt: skip
            assert unpack.stdout is not None
            unpack.stdout.close()
            if unpack.wait() != 0 or tar.returncode != 0:
                raise LabError(f"{WHO} {spec}: {deb[0].name} holds no {member.lstrip('.')} "
                               f"({tar.stderr.strip()[-200:] or 'dpkg-deb failed'})")  # fmt: skip
        shutil.rmtree(debs)
        write_text_atomic(tmp / "debian.json", json_text({"package": package, "version": version, "suite": suite},
                                                          indent=2) + "\n")  # fmt: skip
        (tmp / COMPLETE).touch()
        publish_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return _from_dir(out, package)
