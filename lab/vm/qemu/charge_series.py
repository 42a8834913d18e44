"""What numalab's patched QEMU (``--qemu charge``, ``make setup-qemu-charge``) is built from: the patch series
of ``images/qemu`` and the configure options, and the prefix name they hash to. lab.host.qemu_charge builds
that prefix; lab.vm.qemu.emulator runs the one of the current series and no other (a build of an older series
lacks a patch a run may count on: images/qemu/0004, say, without which --clock virtual runs do not repeat)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from lab.paths import REPO_ROOT

PATCHES = REPO_ROOT / "images" / "qemu"
CONFIGURE = (
    "--target-list=x86_64-softmmu", "--without-default-features", "--enable-tcg", "--enable-plugins",
    "--enable-numa", "--enable-attr", "--enable-virtfs", "--enable-fdt=system", "--disable-install-blobs",
    "--disable-docs", "--disable-werror", "--disable-tools", "--disable-guest-agent",
    # no -g and only the devices numalab's machines have (images/qemu/0011): 206 s of ninja against 295, 10 MB not 71
    "--disable-debug-info", "--without-default-devices", "--with-devices-x86_64=numalab",
)  # fmt: skip


def series() -> list[Path]:
    """The patches, in ``images/qemu/series`` order."""
    names = [n.strip() for n in (PATCHES / "series").read_text().splitlines() if n.strip() and not n.startswith("#")]
    return [PATCHES / n for n in names]


def prefix_name(upstream: str) -> str:
    """``<upstream>+numalab.<hash>`` (``10.0.2+numalab.…``): another QEMU version, a changed patch or option is
    another prefix (built again)."""
    h = hashlib.sha256(" ".join(CONFIGURE).encode())
    for p in series():
        h.update(p.read_bytes())
    return f"{upstream}+numalab.{h.hexdigest()[:10]}"


def is_current(prefix: Path) -> bool:
    """Whether a prefix in the cache was built from the current series and options."""
    return prefix.name == prefix_name(prefix.name.split("+", 1)[0])
