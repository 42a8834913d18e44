"""Guest firmware choice: qboot when QEMU ships it (direct QEMU only), else SeaBIOS."""

from __future__ import annotations

from dataclasses import replace

import pytest
from common import BOOT

from lab.errors import LabError
from lab.placement.host_inventory import read_inventory
from lab.placement.plan import plan_placement
from lab.topology.spec import load_topology
from lab.vm.firmware import firmware_name, resolve_firmware
from lab.vm.libvirt_xml import domain_xml
from lab.vm.qemu_argv import qemu_argv


def test_auto_takes_qboot_where_qemu_ships_it(tmp_path) -> None:
    (tmp_path / "qboot.rom").write_bytes(b"\0" * 65536)
    dirs = (str(tmp_path / "nothing-here"), str(tmp_path))
    assert resolve_firmware("auto", "qemu", dirs) == str(tmp_path / "qboot.rom")
    assert resolve_firmware("qboot", "qemu", dirs) == str(tmp_path / "qboot.rom")
    assert resolve_firmware("seabios", "qemu", dirs) == ""
    assert firmware_name(str(tmp_path / "qboot.rom")) == "qboot" and firmware_name("") == "seabios"


def test_without_qboot_auto_falls_back_and_qboot_is_an_error(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no qemu binary to look beside either
    dirs = (str(tmp_path),)
    assert resolve_firmware("auto", "qemu", dirs) == ""
    with pytest.raises(LabError, match=r"^--firmware qboot: qboot.rom not found in .*; install qemu-system-data$"):
        resolve_firmware("qboot", "qemu", dirs)


def test_libvirt_boots_the_hosts_default_firmware(tmp_path) -> None:
    (tmp_path / "qboot.rom").write_bytes(b"\0")
    assert resolve_firmware("auto", "libvirt", (str(tmp_path),)) == ""
    with pytest.raises(LabError, match="only with --backend qemu"):
        resolve_firmware("qboot", "libvirt", (str(tmp_path),))
    with pytest.raises(LabError, match="--firmware bogus: expected one of auto, qboot, seabios"):
        resolve_firmware("bogus", "qemu")


def test_the_rom_goes_into_the_argv_and_never_silently_into_a_domain() -> None:
    topo = load_topology("ring-2")
    placement = plan_placement(topo, read_inventory(), enforce_fit=False)
    assert "-bios" not in qemu_argv(topo, placement, BOOT)
    argv = qemu_argv(topo, placement, replace(BOOT, firmware="/usr/share/qemu/qboot.rom"))
    assert argv[argv.index("-bios") + 1] == "/usr/share/qemu/qboot.rom"
    with pytest.raises(LabError, match="^firmware: /usr/share/qemu/qboot.rom: libvirt domains boot"):
        domain_xml(topo, placement, replace(BOOT, firmware="/usr/share/qemu/qboot.rom"))
