"""make setup-qemu-charge's real way to its source, against Debian's archive (network; no build): the version of
the backports QEMU make setup-qemu10 unpacked, its source and SHA-256 from the backports Sources index apt
checked, the orig tarball downloaded with apt or found in numalab's cache, and the patch series tried on it.

Marked vm like the other tests that run a setup target's network path (tests/vm/test_vm_qemu10.py), so the
fast tier stays offline. Here (2026-11-25, 2 loaded cores, tarball already cached) it took about 40 s: apt-get
update of the private lists ~5 s, reading the 39 MB tarball for the patched files ~30 s; a download adds the
tarball's 39 MB. Every step has a timeout (apt 120 s, the download 600 s, each patch 300 s)."""

from __future__ import annotations

import time

import pytest
from common import qemu10_binary

from lab.host import qemu_charge, qemu_source
from lab.paths import cache_dir
from lab.vm.qemu.emulator import private_prefixes

pytestmark = pytest.mark.vm


def test_the_source_of_the_installed_backports_qemu_is_found_checked_and_takes_the_patches(tmp_path) -> None:
    qemu10_binary()  # make setup-qemu10's prefix (fetched if this cache has none)
    installed = qemu_source.installed_version(private_prefixes()[0])
    apt_root = tmp_path / "apt"  # fresh private lists: the archive asked now
    said: list[str] = []
    start = time.monotonic()
    source = qemu_source.find(installed, apt_root, timeout=120)
    found = time.monotonic()
    assert source.package == "qemu"
    assert qemu_source.upstream_version(source.version) == qemu_source.upstream_version(installed)
    assert list((apt_root / "lists").glob("*_dists_*-backports_InRelease")), "apt kept no signed InRelease"
    name, digest, size = source.orig
    assert name == f"qemu_{source.version.split(':', 1)[-1].rsplit('-', 1)[0]}.orig.tar.xz"
    orig = qemu_source.orig_tarball(source, cache_dir("qemu-charge", ".src"), apt_root, said.append, timeout=600)
    fetched = time.monotonic()
    assert orig.name == name and orig.stat().st_size == size and qemu_source.sha256(orig) == digest
    src = qemu_source.check(orig, source, qemu_charge.series(), qemu_charge.WHEELS, tmp_path / "check")
    assert "qemu_plugin_charge_ns" in (src / "include" / "qemu" / "qemu-plugin.h").read_text()  # 0001 applied
    end = time.monotonic()
    print(f"QEMU {source.version}: found in {found - start:.1f} s, tarball {'downloaded' if said else 'cached'} "
          f"in {fetched - found:.1f} s, patches tried in {end - fetched:.1f} s")  # fmt: skip
