"""An sshd for the nested libvirt host, unpacked into numalab's cache: nothing installed on this host.

``numalab nested --libvirt-host`` runs sshd inside the outer guest, whose root is this host's, shared
read-only over 9p. Installing ``openssh-server`` on the host would give the guest its sshd, but on a host
with systemd the package also enables and starts the host's own sshd. So ``make setup-sshd`` (``python -m
lab.host.sshd_prefix``) asks the system's apt for the packages (``apt-get download``: ``openssh-server``,
and ``libwrap0``, the one library of sshd's that numalab's other packages do not bring) and unpacks them
with ``dpkg-deb -x`` into ``<cache>/tools/openssh-server/<version>/``. The guest runs that sshd by its path
(the cache is part of the shared root), with the prefix's libraries first on ``LD_LIBRARY_PATH``. Nothing
on the host starts it, and the system's packages are left alone.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

from lab.errors import LabError
from lab.host.qemu_prefix import check_libraries, print_binary, setup_run
from lab.paths import COMPLETE, cache_root, publish_dir

PACKAGES = ("openssh-server", "libwrap0")
SSHD = "usr/sbin/sshd"
LIBS = ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu")


def _run(cmd: list[str], what: str, cwd: Path | None = None) -> str:
    return setup_run(cmd, what, "setup-sshd", "needs Debian's apt", cwd, timeout=600)


def base_dir() -> Path:
    return cache_root() / "tools" / "openssh-server"


def find(base: Path | None = None) -> Path | None:
    """The newest complete prefix already unpacked (no apt, no network), or None."""
    base = base or base_dir()
    done = sorted((p for p in base.glob("*") if (p / ".complete").exists() and (p / SSHD).is_file()),
                  key=lambda p: p.stat().st_mtime, reverse=True)  # fmt: skip
    return done[0] if done else None


def library_path(prefix: Path) -> str:
    """The prefix's library directories, for ``LD_LIBRARY_PATH`` (the system's come after them)."""
    return ":".join(str(prefix / d) for d in LIBS)


def _candidate(package: str) -> str | None:
    out = _run(["apt-cache", "policy", package], f"apt-cache policy {package}")
    m = re.search(r"^\s*Candidate:\s*(\S+)", out, re.MULTILINE)
    return m.group(1) if m and m.group(1) != "(none)" else None


def candidate_version(package: str) -> str:
    """apt's candidate version of ``package`` from the system's lists (updated once when they have none: a
    machine whose packages were all there already never ran ``apt-get update``)."""
    version = _candidate(package)
    if version is None:
        _run(["apt-get", "update", "-q"], "apt-get update")
        version = _candidate(package)
    if version is None:
        raise LabError(f"setup-sshd: apt knows no {package} (after apt-get update)")
    return version


def fetch(refresh: bool = False, say=print) -> Path:
    """The prefix (its ``usr/sbin/sshd``): the one unpacked already, or apt's candidate, downloaded and unpacked."""
    have = find()
    if have and not refresh:
        return have
    version = candidate_version(PACKAGES[0])
    base = base_dir()
    base.mkdir(parents=True, exist_ok=True)
    prefix = base / re.sub(r"[^A-Za-z0-9.+-]", "_", version.split(":", 1)[-1])
    tmp = Path(tempfile.mkdtemp(dir=base, prefix=f".{prefix.name}."))
    try:
        debs = tmp / ".debs"
        debs.mkdir()
        say(f"numalab: downloading {', '.join(PACKAGES)} (apt-get download; nothing is installed)")
        _run(["apt-get", "download", "-q", *PACKAGES], "apt-get download", cwd=debs)
        for deb in sorted(debs.glob("*.deb")):
            _run(["dpkg-deb", "-x", str(deb), str(tmp)], f"dpkg-deb -x {deb.name}")
        shutil.rmtree(debs)
        check_sshd_libraries(tmp)
        (tmp / "VERSION").write_text(f"{version}\n")
        (tmp / COMPLETE).touch()
        publish_dir(tmp, prefix)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    say(f"numalab: sshd {version} in {prefix}")
    return prefix


def check_sshd_libraries(prefix: Path) -> None:
    """The unpacked sshd finds every library: the prefix's, then the system's."""
    check_libraries(prefix / SSHD, "setup-sshd", env={"LD_LIBRARY_PATH": library_path(prefix), "PATH": "/usr/bin:/bin"})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m lab.host.sshd_prefix",
        description="Unpack Debian's openssh-server into numalab's cache for numalab nested --libvirt-host "
        "(make setup-sshd); prints the sshd's path. Nothing is installed and no service is started.",
    )
    p.add_argument("--refresh", action="store_true", help="download apt's candidate even if one is unpacked")
    args = p.parse_args(argv)
    return print_binary(lambda say: fetch(args.refresh, say=say) / SSHD, quiet=False)


if __name__ == "__main__":
    sys.exit(main())
