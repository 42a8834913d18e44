"""Guest firmware choice: qboot when QEMU ships it (direct QEMU only), else SeaBIOS.

On Debian QEMU always ships qboot (``make setup`` installs it): there a missing qboot.rom fails, loudly,
rather than letting every "qboot when QEMU has it" check pass without checking anything."""

from __future__ import annotations

from dataclasses import replace

import pytest
from common import BOOT, debian_like, os_release, platform_ships_qboot, require_setup_package

from lab.errors import LabError
from lab.placement.host_inventory import read_inventory
from lab.placement.pinning import plan_placement
from lab.topology.model.spec import load_topology
from lab.vm.libvirt.libvirt_backend import LibvirtBackend
from lab.vm.libvirt.libvirt_xml import domain_xml
from lab.vm.qemu.emulator import resolve as resolve_emulator
from lab.vm.qemu.firmware import find_qboot, firmware_name, resolve_firmware
from lab.vm.qemu.qemu_argv import qemu_argv


def test_auto_takes_qboot_where_qemu_ships_it(tmp_path) -> None:
    (tmp_path / "qboot.rom").write_bytes(b"\0" * 65536)
    dirs = (str(tmp_path / "nothing-here"), str(tmp_path))
    assert resolve_firmware("auto", dirs) == str(tmp_path / "qboot.rom")
    assert resolve_firmware("qboot", dirs) == str(tmp_path / "qboot.rom")
    assert resolve_firmware("seabios", dirs) == ""
    assert firmware_name(str(tmp_path / "qboot.rom")) == "qboot" and firmware_name("") == "seabios"


def test_without_qboot_auto_falls_back_and_qboot_is_an_error(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no qemu binary to look beside either
    dirs = (str(tmp_path),)
    assert resolve_firmware("auto", dirs) == ""
    with pytest.raises(LabError, match=r"^--firmware qboot: qboot.rom not found in .*; install qemu-system-data$"):
        resolve_firmware("qboot", dirs)


def test_libvirt_boots_the_hosts_default_firmware(tmp_path) -> None:
    (tmp_path / "qboot.rom").write_bytes(b"\0")
    libvirt = LibvirtBackend()  # (no connection: the firmware is decided without asking the host)
    assert libvirt.firmware_rom("auto") == libvirt.firmware_rom("seabios") == ""
    with pytest.raises(LabError, match="only with --backend qemu"):
        libvirt.firmware_rom("qboot")
    with pytest.raises(LabError, match="--firmware bogus: expected one of auto, qboot, seabios"):
        libvirt.firmware_rom("bogus")
    with pytest.raises(LabError, match="--firmware bogus: expected one of auto, qboot, seabios"):
        resolve_firmware("bogus")


def test_the_rom_goes_into_the_argv_and_never_silently_into_a_domain() -> None:
    topo = load_topology("ring-2")
    placement = plan_placement(topo, read_inventory(), enforce_fit=False)
    assert "-bios" not in qemu_argv(topo, placement, BOOT)
    argv = qemu_argv(topo, placement, replace(BOOT, firmware="/usr/share/qemu/qboot.rom"))
    assert argv[argv.index("-bios") + 1] == "/usr/share/qemu/qboot.rom"
    with pytest.raises(LabError, match="^firmware: /usr/share/qemu/qboot.rom: libvirt domains boot"):
        domain_xml(topo, placement, replace(BOOT, firmware="/usr/share/qemu/qboot.rom"))


def test_this_platforms_qemu_ships_qboot_and_auto_boots_it() -> None:
    rel = os_release()
    if not platform_ships_qboot(rel):
        pytest.skip(
            f"not Debian ({rel.get('PRETTY_NAME', 'no /etc/os-release')}): whether its QEMU ships qboot "
            "is not known here, and runs fall back to SeaBIOS (the VM tests check that they say so)"
        )
    dirs = resolve_emulator().firmware_dirs  # where the system QEMU itself looks (its -L help)
    rom = find_qboot(dirs)
    assert rom, (
        "qboot.rom not found, but Debian's QEMU ships it (/usr/share/qemu/qboot.rom in qemu-system-data, "
        "which make setup installs): the setup is broken; apt-get install qemu-system-data"
    )
    assert resolve_firmware("auto", dirs) == rom and firmware_name(rom) == "qboot"


def test_debian_and_its_derivatives_are_known_to_ship_qboot(tmp_path) -> None:
    assert platform_ships_qboot({"ID": "debian", "VERSION_ID": "12"})
    assert platform_ships_qboot({"ID": "ubuntu", "ID_LIKE": "debian"})
    assert not platform_ships_qboot({"ID": "fedora"}) and not platform_ships_qboot({})
    (tmp_path / "os-release").write_text('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n')
    assert os_release(tmp_path / "os-release")["ID"] == "debian" and os_release(tmp_path / "nothing") == {}


def test_a_missing_setup_package_fails_on_debian_and_is_skipped_elsewhere() -> None:
    require_setup_package(True, "anything", "any-package")  # present: nothing happens
    expected = pytest.fail.Exception if debian_like() else pytest.skip.Exception
    with pytest.raises(expected, match="no-such-tool is missing"):
        require_setup_package(False, "no-such-tool", "no-such-package")
