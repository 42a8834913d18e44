"""Kernel arguments for TCG boots: tsc=reliable, no_timer_check and cryptomgr.notests always; lpj= learned from the
guest's own dmesg, per kernel image."""

from __future__ import annotations

import os

import pytest

from lab.vm.tcg import tcg_boot, tcg_clock


@pytest.fixture(autouse=True)
def _no_host_tsc(monkeypatch):
    """These tests are about lpj=: this machine's own TSC frequency (tsc_early_khz=) is left out."""
    monkeypatch.setattr(tcg_clock, "host_tsc_khz", lambda dmesg=None: None)


DMESG = (
    "[    0.354004] tsc: Marking TSC unstable due to TSCs unsynchronized\n"
    "[    0.354358] Calibrating delay loop (skipped), value calculated using timer frequency.. "
    "4599.96 BogoMIPS (lpj=9199920)\n"
)


def test_learned_lpj_is_passed_on_later_tcg_boots_of_the_same_image(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    image = tmp_path / "bzImage"
    image.write_bytes(b"kernel")
    assert tcg_boot.boot_args(image, "tcg") == "tsc=reliable no_timer_check cryptomgr.notests"
    assert tcg_boot.learn(image, "tcg", DMESG) == 9199920
    assert tcg_boot.boot_args(image, "tcg") == "tsc=reliable no_timer_check cryptomgr.notests lpj=9199920"
    # A remote libvirt host has its own TSC: nothing learned here applies there.
    assert tcg_boot.boot_args(image, "tcg", "qemu+ssh://lab2/system") == "tsc=reliable no_timer_check cryptomgr.notests"
    assert tcg_boot.learn(image, "tcg", DMESG.replace("9199920", "12000000"), "qemu+ssh://lab2/system")
    remote = tcg_boot.boot_args(image, "tcg", "qemu+ssh://lab2/system")
    assert remote == "tsc=reliable no_timer_check cryptomgr.notests lpj=12000000"
    assert tcg_boot.boot_args(image, "tcg") == "tsc=reliable no_timer_check cryptomgr.notests lpj=9199920"
    # KVM guests use kvmclock and never calibrate: nothing is added or learned.
    assert tcg_boot.boot_args(image, "kvm") == ""
    assert tcg_boot.learn(image, "kvm", DMESG) is None
    # A rebuilt image (new mtime) starts again without lpj=.
    st = image.stat()
    os.utime(image, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert tcg_boot.boot_args(image, "tcg") == "tsc=reliable no_timer_check cryptomgr.notests"


def test_no_calibration_line_learns_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    image = tmp_path / "bzImage"
    image.write_bytes(b"kernel")
    assert tcg_boot.learn(image, "tcg", "[    0.1] Calibrating delay loop (skipped) preset value.. ") is None
    (tmp_path / "cache").mkdir(exist_ok=True)
    (tmp_path / "cache" / "tcg-lpj.json").write_text("not json")
    assert tcg_boot.boot_args(image, "tcg") == "tsc=reliable no_timer_check cryptomgr.notests"


def test_an_lpj_no_real_tsc_gives_is_not_learned_or_used(tmp_path, monkeypatch) -> None:
    """The guest's dmesg is the word of a kernel under test: a huge, tiny, negative or mid-line
    lpj= is ignored, and a poisoned cache entry is never passed on."""
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    image = tmp_path / "bzImage"
    image.write_bytes(b"kernel")
    for bad in ("99999999999999999999", "4000000000", "12", "0", "-5"):
        assert tcg_boot.learn(image, "tcg", DMESG.replace("9199920", bad)) is None, bad
    forged = "[    1.0] numalab: Calibrating delay loop (skipped), value calculated using timer frequency.. 1.00 BogoMIPS (lpj=9199920)\n"  # noqa: E501
    assert tcg_boot.learn(image, "tcg", forged) is None
    assert tcg_boot.boot_args(image, "tcg") == "tsc=reliable no_timer_check cryptomgr.notests"
    key = tcg_boot._key(image, "")
    (tmp_path / "cache" / "tcg-lpj.json").write_text(f'{{"{key}": 1e30, "x": "9199920 rm -rf"}}')
    assert tcg_boot.boot_args(image, "tcg") == "tsc=reliable no_timer_check cryptomgr.notests"
    (tmp_path / "cache" / "tcg-lpj.json").write_text(f'{{"{key}": 5000000000}}')
    assert tcg_boot.boot_args(image, "tcg") == "tsc=reliable no_timer_check cryptomgr.notests"


def test_this_machines_own_tsc_wins_over_what_a_guest_says(tmp_path, monkeypatch) -> None:
    """tsc_early_khz= comes from this machine's kernel log when it can be read; a guest's figure (a kernel
    under test) that disagrees with it by more than 2% is not learned."""
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(tcg_clock, "host_tsc_khz", lambda dmesg=None: 2_300_000)
    assert tcg_clock.clock_args() == "tsc_early_khz=2300000"
    lying = "[ 0.1] tsc: Refined TSC clocksource calibration: 3000.000 MHz\n"
    assert tcg_clock.learn(lying) is None
    assert tcg_clock.learn(lying.replace("3000.000", "2301.000")) == 2_301_000
    assert tcg_clock.clock_args() == "tsc_early_khz=2300000"  # still the machine's own
    assert tcg_clock.clock_args("qemu+ssh://h/system") == ""  # a remote host: only what was learned for it


def test_the_virtual_clock_gets_its_1_ghz_tsc_and_the_lpj_of_the_kernels_hz(tmp_path) -> None:
    image = tmp_path / "bzImage"
    image.write_bytes(b"kernel")
    config = tmp_path / "config"
    config.write_text("CONFIG_X86_64=y\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n")
    args = tcg_boot.boot_args(image, "tcg", virtual_clock=True, config=config)
    assert args == "tsc=reliable no_timer_check cryptomgr.notests tsc_early_khz=1000000 lpj=4000000"
    config.write_text("CONFIG_HZ=1000\n")
    assert tcg_boot.boot_args(image, "tcg", virtual_clock=True, config=config).endswith(" lpj=1000000")
    # no config, no HZ in it, or an HZ no kernel has: no lpj= (the guest calibrates, as before)
    for text in (None, "CONFIG_HZ_250=y\n", "CONFIG_HZ=0\n", "CONFIG_HZ=99999\n"):
        if text is not None:
            config.write_text(text)
        args = tcg_boot.boot_args(image, "tcg", virtual_clock=True, config=config if text else None)
        assert args == "tsc=reliable no_timer_check cryptomgr.notests tsc_early_khz=1000000", text
    assert tcg_boot.boot_args(image, "tcg", virtual_clock=True, config=tmp_path / "missing").endswith("=1000000")
    assert tcg_boot.boot_args(image, "kvm", virtual_clock=True, config=config) == ""
