"""Golden files: the QEMU argv and libvirt domain XML of every preset.

A change to either emitter shows up here as a diff to review. Regenerate
with ``make golden`` (UPDATE_GOLDEN=1) and commit the new files with the
change that explains them.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import replace
from pathlib import Path

import pytest
from common import BOOT, HOST

from lab.errors import LabError
from lab.placement.pinning import plan_placement
from lab.topology.model.spec import load_topology, preset_names
from lab.vm.libvirt.libvirt_xml import domain_xml
from lab.vm.qemu.emulator import Emulator
from lab.vm.qemu.qemu_argv import qemu_argv
from lab.vm.tcg.guest_clock import GuestClock
from lab.vm.tcg.tcg_boot import boot_args

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def _argv_text(argv: list[str]) -> str:
    """One option per line with its value, shell-quoted: readable diffs."""
    lines = [shlex.quote(argv[0])]
    for arg in argv[1:]:
        if arg.startswith("-"):
            lines.append(arg)
        else:
            lines[-1] += " " + shlex.quote(arg)
    return "\n".join(lines) + "\n"


def _check(path: Path, text: str) -> None:
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} missing: run 'make golden'"
    assert text == path.read_text(), f"{path} differs from the emitter's output: review, then 'make golden'"


@pytest.mark.parametrize("preset", preset_names())
def test_qemu_argv_golden(preset: str) -> None:
    topo = load_topology(preset)
    argv = qemu_argv(topo, plan_placement(topo, HOST), BOOT)
    _check(GOLDEN / "qemu" / f"{preset}.argv", _argv_text(argv))


def _libvirt_refuses(topo) -> bool:
    """A machine libvirt 9.0 cannot express (clusters: <topology clusters=> came in 10.1) is a one-line refusal,
    not a flatter domain; checked here instead of a golden file."""
    if topo.memoryless_nodes:
        with pytest.raises(LabError, match=r"is memoryless, which libvirt 9\.0 cannot start .*--backend qemu"):
            domain_xml(topo, plan_placement(topo, HOST), BOOT, "qemu")
        return True
    if topo.cpu_grid is None or not topo.cpu_grid.has_clusters:
        return False
    with pytest.raises(LabError, match=r"libvirt 9\.0's <topology> has no clusters .*--qemu backports"):
        domain_xml(topo, plan_placement(topo, HOST), BOOT, "qemu")
    return True


@pytest.mark.parametrize("preset", preset_names())
def test_libvirt_xml_golden(preset: str) -> None:
    topo = load_topology(preset)
    if _libvirt_refuses(topo):
        return
    _check(GOLDEN / "libvirt" / f"{preset}.xml", domain_xml(topo, plan_placement(topo, HOST), BOOT, "qemu"))


# KVM: what a KVM host runs (direct QEMU with qboot, as --firmware auto picks it; the libvirt domain of
# type kvm). Nothing here has booted under KVM on the machines these files were made on (KVM hangs
# there): the files pin down what the emitters give a KVM host; see README "KVM".
KVM_BOOT = replace(BOOT, accel="kvm", firmware="/usr/share/qemu/qboot.rom")


@pytest.mark.parametrize("preset", preset_names())
def test_qemu_argv_kvm_golden(preset: str) -> None:
    topo = load_topology(preset)
    argv = qemu_argv(topo, plan_placement(topo, HOST), KVM_BOOT)
    text = _argv_text(argv)
    _check(GOLDEN / "qemu-kvm" / f"{preset}.argv", text)
    # what a KVM host needs: the KVM accelerator with the host's CPU model, nothing of TCG
    assert argv[argv.index("-accel") + 1] == "kvm" and argv[argv.index("-cpu") + 1] == "host"
    assert "tcg" not in text and argv.count("-accel") == 1
    assert boot_args(Path("/srv/numalab/bzImage"), "kvm") == ""  # no TCG kernel arguments under KVM
    assert "tsc=reliable" not in text and "no_timer_check" not in text and "lpj=" not in text


@pytest.mark.parametrize("preset", preset_names())
def test_libvirt_xml_kvm_golden(preset: str) -> None:
    import xml.etree.ElementTree as ET

    topo = load_topology(preset)
    if _libvirt_refuses(topo):
        return
    xml = domain_xml(topo, plan_placement(topo, HOST), replace(KVM_BOOT, firmware=""), "kvm")  # host's firmware
    _check(GOLDEN / "libvirt-kvm" / f"{preset}.xml", xml)
    root = ET.fromstring(xml)
    assert root.get("type") == "kvm" and root.find("cpu").get("mode") == "host-passthrough"
    assert len(root.findall("cpu/numa/cell")) == topo.n_nodes
    assert len(root.findall("cputune/vcpupin")) == topo.total_cpus


def test_every_golden_file_has_a_preset() -> None:
    names = set(preset_names())
    # (guest/ and record/ are the run record's golden files, tests/unit/test_golden_record.py)
    emitters = ("qemu", "libvirt", "qemu-kvm", "libvirt-kvm")
    stale = [p for d in emitters for p in (GOLDEN / d).iterdir() if p.stem not in names]
    assert not stale, f"golden files without a preset: {stale}"


# QEMU 10 from a private prefix (make setup-qemu10): the same VM, with the prefix's data directories ahead of
# the binary's built-in /usr/share/qemu (the system QEMU's) and qboot from the prefix. Nothing else differs
# between 7.2 and 10.0 in what numalab asks for; two presets show it (one with an HMAT).
QEMU10 = Emulator(
    "/opt/numalab/qemu/10.0.2/usr/bin/qemu-system-x86_64",
    "QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)",
    ("/usr/share/qemu", "/usr/share/seabios", "/usr/lib/ipxe/qemu"),
    ("/opt/numalab/qemu/10.0.2/usr/share/qemu", "/opt/numalab/qemu/10.0.2/usr/share/seabios"),
)


@pytest.mark.parametrize("preset", ["ring-4", "tiered-2s-cxl"])
def test_qemu10_argv_golden(preset: str) -> None:
    topo = load_topology(preset)
    boot = replace(BOOT, firmware="/opt/numalab/qemu/10.0.2/usr/share/qemu/qboot.rom")
    argv = qemu_argv(topo, plan_placement(topo, HOST), boot, QEMU10.argv_prefix())
    _check(GOLDEN / "qemu10" / f"{preset}.argv", _argv_text(argv))
    plain = qemu_argv(topo, plan_placement(topo, HOST), boot)
    assert argv[5:] == plain[1:]  # the binary and its two -L directories are all that differ


def test_qemu10_virtual_clock_argv_golden() -> None:
    """--clock virtual: one TCG thread and QEMU's instruction counter as the guest's clock."""
    topo = load_topology("ring-4")
    boot = replace(BOOT, firmware="/opt/numalab/qemu/10.0.2/usr/share/qemu/qboot.rom", clock=GuestClock("virtual"))
    argv = qemu_argv(topo, plan_placement(topo, HOST), boot, QEMU10.argv_prefix())
    _check(GOLDEN / "qemu10" / "ring-4-virtual-clock.argv", _argv_text(argv))
    i = argv.index("-accel")
    assert argv[i : i + 4] == ["-accel", "tcg,thread=single", "-icount", "shift=0,sleep=off"]
