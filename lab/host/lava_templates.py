"""LAVA's device-type templates (``qemu.jinja2``, ``base.jinja2``), unpacked into numalab's cache.

``numalab matrix lava`` renders each job's device configuration for ``lava-run`` from the device dictionary of
a numalab host and LAVA's own ``qemu`` device type, as a LAVA server does before it dispatches a job. The
templates are a LAVA server's (Debian's ``lava-server``: ``/usr/share/lava-server/device-types``), which a
worker with only ``lava-dispatcher`` does not have, and installing ``lava-server`` would pull in PostgreSQL and
Django and start its services. So ``make setup-lava`` (``python -m lab.host.lava_templates``) asks apt for the
package (``apt-get download``) and unpacks it with ``dpkg-deb -x`` into ``<cache>/tools/lava-server/<version>/``:
nothing is installed.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

from lab.apt import setup_run
from lab.errors import LabError
from lab.host.qemu_prefix import print_binary
from lab.host.sshd_prefix import candidate_version
from lab.paths import COMPLETE, cache_root, publish_dir

PACKAGE = "lava-server"
DEVICE_TYPES = "usr/share/lava-server/device-types"


def base_dir() -> Path:
    return cache_root() / "tools" / PACKAGE


def find(base: Path | None = None) -> Path | None:
    """The device-types directory of the newest complete unpacking (no apt, no network), or None."""
    base = base or base_dir()
    done = [p for p in base.glob("*") if (p / COMPLETE).exists() and (p / DEVICE_TYPES / "qemu.jinja2").is_file()]
    done.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    return done[0] / DEVICE_TYPES if done else None


def fetch(refresh: bool = False, say=print) -> Path:
    """The device-types directory: the one unpacked already, or apt's candidate of lava-server's, unpacked."""
    have = find()
    if have and not refresh:
        return have
    version = candidate_version(PACKAGE)
    base = base_dir()
    base.mkdir(parents=True, exist_ok=True)
    prefix = base / re.sub(r"[^A-Za-z0-9.+-]", "_", version.split(":", 1)[-1])
    tmp = Path(tempfile.mkdtemp(dir=base, prefix=f".{prefix.name}."))
    try:
        say(f"numalab: downloading {PACKAGE} for its device-type templates (apt-get download; nothing is installed)")
        setup_run(["apt-get", "download", "-q", PACKAGE], "apt-get download", "setup-lava", "needs Debian's apt", tmp)
        deb = next(tmp.glob("*.deb"))
        setup_run(["dpkg-deb", "-x", str(deb), str(tmp)], f"dpkg-deb -x {deb.name}", "setup-lava", "needs dpkg")
        deb.unlink()
        if not (tmp / DEVICE_TYPES / "qemu.jinja2").is_file():
            raise LabError(f"setup-lava: {PACKAGE} {version} has no {DEVICE_TYPES}/qemu.jinja2")
        (tmp / "VERSION").write_text(f"{version}\n")
        (tmp / COMPLETE).touch()
        publish_dir(tmp, prefix)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    say(f"numalab: LAVA's device types ({PACKAGE} {version}) in {prefix / DEVICE_TYPES}")
    return prefix / DEVICE_TYPES


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m lab.host.lava_templates",
        description="Unpack Debian's lava-server into numalab's cache for its device-type templates (make "
        "setup-lava); prints their directory. Nothing is installed and no service is started.",
    )
    p.add_argument("--refresh", action="store_true", help="download apt's candidate even if one is unpacked")
    args = p.parse_args(argv)
    return print_binary(lambda say: fetch(args.refresh, say=say), quiet=False)


if __name__ == "__main__":
    sys.exit(main())
