"""Kernel arguments for TCG boots: tsc=reliable and no_timer_check always; lpj= learned from the
guest's own dmesg, per kernel image."""

from __future__ import annotations

import os

from lab.vm import tcg_boot

DMESG = (
    "[    0.354004] tsc: Marking TSC unstable due to TSCs unsynchronized\n"
    "[    0.354358] Calibrating delay loop (skipped), value calculated using timer frequency.. "
    "4599.96 BogoMIPS (lpj=9199920)\n"
)


def test_learned_lpj_is_passed_on_later_tcg_boots_of_the_same_image(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    image = tmp_path / "bzImage"
    image.write_bytes(b"kernel")
    assert tcg_boot.boot_args(image, "tcg") == "tsc=reliable no_timer_check"
    assert tcg_boot.learn(image, "tcg", DMESG) == 9199920
    assert tcg_boot.boot_args(image, "tcg") == "tsc=reliable no_timer_check lpj=9199920"
    # A remote libvirt host has its own TSC: nothing learned here applies there.
    assert tcg_boot.boot_args(image, "tcg", "qemu+ssh://lab2/system") == "tsc=reliable no_timer_check"
    assert tcg_boot.learn(image, "tcg", DMESG.replace("9199920", "12000000"), "qemu+ssh://lab2/system")
    assert tcg_boot.boot_args(image, "tcg", "qemu+ssh://lab2/system") == "tsc=reliable no_timer_check lpj=12000000"
    assert tcg_boot.boot_args(image, "tcg") == "tsc=reliable no_timer_check lpj=9199920"
    # KVM guests use kvmclock and never calibrate: nothing is added or learned.
    assert tcg_boot.boot_args(image, "kvm") == ""
    assert tcg_boot.learn(image, "kvm", DMESG) is None
    # A rebuilt image (new mtime) starts again without lpj=.
    st = image.stat()
    os.utime(image, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert tcg_boot.boot_args(image, "tcg") == "tsc=reliable no_timer_check"


def test_no_calibration_line_learns_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    image = tmp_path / "bzImage"
    image.write_bytes(b"kernel")
    assert tcg_boot.learn(image, "tcg", "[    0.1] Calibrating delay loop (skipped) preset value.. ") is None
    (tmp_path / "cache").mkdir(exist_ok=True)
    (tmp_path / "cache" / "tcg-lpj.json").write_text("not json")
    assert tcg_boot.boot_args(image, "tcg") == "tsc=reliable no_timer_check"
